"""Run reports: results.json, report.md with tables laid out like the paper's Tables 2-10,
PNG plots, and side-by-side comparison of several runs (`tigrag report`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from ..atomic import atomic_write, atomic_write_text
from ..errors import TigragError

SWEEP_TITLES = {"beta": "Table 6 (β)", "iota": "Table 7 (ι)", "h": "Table 8 (h)", "th": "Table 9 (th_ρ)",
                "gamma": "γ (not in the paper)", "damping": "PPR damping (not in the paper)", "w": "window w"}


def pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.2f}"


def number(value: float | None, spec: str) -> str:
    """`value` formatted with `spec`, or '–' where the system has no such figure (baselines)."""
    return "–" if value is None else format(value, spec)


def ablation_tables(systems: dict[str, Any]) -> list[str]:
    """Per method, its ablation systems that this run holds (`System.ablation_of`), then the full
    system they ablate: the paper's Table-10 layout for TIGRAG."""
    from ..methods.registry import methods

    out: list[str] = []
    for method in methods():
        by_full: dict[str, list[str]] = {}
        for system in method.systems:
            if system.ablation_of is not None and system.name in systems:
                by_full.setdefault(system.ablation_of, []).append(system.name)
        for full, ablations in by_full.items():
            caption = f" ({method.ablation_caption})" if method.ablation_caption else ""
            out += ["", f"## Ablations of {full}{caption}", "", "| approach | R@2 | R@5 |", "|---|---|---|"]
            for name in ablations + ([full] if full in systems else []):
                metrics = systems[name]["metrics"]
                out.append(f"| {name} | {pct(metrics['recall@2'])} | {pct(metrics['recall@5'])} |")
    return out


def claims(systems: dict[str, Any]) -> list[str]:
    """Each method's published claims checked against this run (`Method.claims`), one line each
    saying whether it holds, with the paired test of its comparison where the run kept per-query values."""
    from ..methods.registry import methods

    m = {name: s["metrics"] for name, s in systems.items()}
    per_query = {name: s.get("per_query") or {} for name, s in systems.items()}
    return [line for method in methods() if method.claims is not None for line in method.claims(m, per_query)]


#: the per-query metrics of the main table, in its column order
MAIN_METRICS = ("recall@2", "recall@5", "recall@10", "recall_dedup@2", "recall_dedup@5", "mrr@10", "ndcg@10",
                "context_recall")
#: the marker of a figure significantly different from the baseline's
MARKER = "†"
#: column names of the metrics in the significance and cutoff tables
METRIC_LABELS = {"recall": "R@{k}", "recall_dedup": "R@{k} dedup", "mrr": "MRR@{k}", "ndcg": "nDCG@{k}"}


def metric_label(metric: str) -> str:
    name, _, k = metric.partition("@")
    return METRIC_LABELS[name].format(k=k) if k and name in METRIC_LABELS else metric.replace("_", " ")


def markers(significance: dict[str, Any] | None):
    """A function (system, metric) -> the marker when the system differs significantly from the baseline."""
    rows = (significance or {}).get("systems", {})

    def mark(system: str, metric: str) -> str:
        return MARKER if rows.get(system, {}).get(metric, {}).get("significant") else ""

    return mark


def every_cutoff(results: dict[str, Any], systems: dict[str, Any], mark) -> list[str]:
    """A table of every metric at every cutoff, when the run's cutoffs are not the default ones."""
    from .metrics import DEFAULT_CUTOFFS

    cutoffs = results.get("cutoffs")
    if not cutoffs or (tuple(cutoffs["recall"]), tuple(cutoffs["rank"])) == (DEFAULT_CUTOFFS.recall,
                                                                               DEFAULT_CUTOFFS.rank):
        return []
    keys = ([f"recall@{k}" for k in cutoffs["recall"]] + [f"recall_dedup@{k}" for k in cutoffs["recall"]]
            + [f"mrr@{k}" for k in cutoffs["rank"]] + [f"ndcg@{k}" for k in cutoffs["rank"]])
    out = ["", f"## Every cutoff ({', '.join(map(str, sorted(set(cutoffs['recall']) | set(cutoffs['rank']))))}; "
           f"{results.get('depth', '?')} chunks retrieved per query)", "",
           "| system | " + " | ".join(metric_label(k) for k in keys) + " |", "|---|" + "---|" * len(keys)]
    for name, s in systems.items():
        out.append(f"| {name} | " + " | ".join(f"{pct(s['metrics'].get(k))}{mark(name, k)}" for k in keys) + " |")
    return out


def p_value(p: float) -> str:
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def marker_phrase(significance: dict[str, Any]) -> str:
    """What the markers follow: the test (with its swaps where it is the randomisation test) and the
    multiple-comparison correction, or that none was applied."""
    test = significance["marker_test"]
    if "randomisation" in test:
        test += f" ({significance['permutations']:,} random swaps, seed {significance['seed']})"
    correction = significance.get("correction", "none")
    return test + (f", p-values corrected by {correction.capitalize()} over the systems compared on each metric"
                   if correction != "none" else ", no correction for multiple comparisons (--correction holm adds one)")


def significance_table(significance: dict[str, Any], systems: dict[str, Any]) -> list[str]:
    """Each system against the baseline on the main metrics: the difference in points and both p-values."""
    keys = [k for k in MAIN_METRICS if any(k in row for row in significance["systems"].values())]
    tests = significance["tests"]
    out = ["", "## Significance", "",
           f"Each system against the baseline `{significance['baseline']}`, on the same queries: the difference in "
           f"points (system − baseline) with its 95% confidence interval, then the p-values of the "
           f"{tests['p_randomization']} and of the {tests['p_t_test']}"
           + (f", and of the marker test after {significance['correction'].capitalize()}'s correction"
              if significance.get("correction", "none") != "none" else "")
           + f". {MARKER}: p < {significance['alpha']} in the {marker_phrase(significance)}. results.json holds the "
           "Wilcoxon signed-rank p-values too.", "",
           "| system | " + " | ".join(metric_label(k) for k in keys) + " |", "|---|" + "---|" * len(keys)]
    for name, rows in significance["systems"].items():
        cells = []
        for key in keys:
            row = rows.get(key)
            interval = (f" [{100 * row['ci95'][0]:+.2f}, {100 * row['ci95'][1]:+.2f}]" if row and "ci95" in row else "")
            corrected = (f" / {p_value(row['p_marker'])}" if row and significance.get("correction", "none") != "none"
                         else "")
            cells.append("–" if row is None else f"{100 * row['delta']:+.2f}{MARKER if row['significant'] else ''}"
                                                 f"{interval} (p {p_value(row['p_randomization'])} / "
                                                 f"{p_value(row['p_t_test'])}{corrected})")
        out.append(f"| {name} | " + " | ".join(cells) + " |")
    return out


def per_query_tsv(systems: dict[str, Any]) -> str | None:
    """The per-query tables of every system as one TSV (system, query id, each metric), or None when the
    run has none."""
    from .runfiles import trec_id

    tables = {name: s["per_query"] for name, s in systems.items() if s.get("per_query")}
    if not tables:
        return None
    columns = list(dict.fromkeys(m for t in tables.values() for m in t if m != "qid"))
    lines = ["\t".join(["system", "query-id", *columns])]
    for name, table in tables.items():
        for i, qid in enumerate(table["qid"]):
            values = [repr(float(table[m][i])) if m in table else "" for m in columns]
            lines.append("\t".join([name, trec_id(qid), *values]))
    return "\n".join(lines) + "\n"


def markdown(payload: dict[str, Any]) -> str:
    run, systems = payload["run"], payload["results"]["systems"]
    out = [f"# Evaluation: {run['dataset']} ({run['queries']} queries, {run['chunks']:,} chunks)", "",
           f"Code {run['code_version']}, encoder {run['encoder']}, backend {run['backend']}, started {run['started']}. "
           f"Command: `{run['command']}`", ""]
    if "preset" in run:
        out += [f"Preset of the TIGRAG rows, the Table-10 ablations and the sweeps: `{run['preset']}` "
                "(the `TIGRAG paper` / `TIGRAG best` rows and the mechanism ablations start from their own preset; "
                "`--set` applies on top of every row's preset). [Settings of each row](#settings-of-each-row) "
                "lists what each row runs with; the full configuration is in the [appendix]"
                "(#appendix-the-full-retrieval-configuration).", ""]
    significance = payload["results"].get("significance")
    mark = markers(significance)
    out += ["## Retrieval (Table 2 layout)", "",
            "| system | R@2 | R@5 | R@10 | R@2 dedup | R@5 dedup | MRR@10 | nDCG@10 | context recall | context chunks |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    for name, s in systems.items():
        m = s["metrics"]
        cells = [f"{pct(m.get(key))}{mark(name, key)}" for key in MAIN_METRICS]
        out.append(f"| {name} | " + " | ".join(cells) + f" | {number(m.get('context_chunks'), '.1f')} |")
    out += ["", "R@k: HippoRAG's recall over the top-k chunks (two chunks of one passage take two slots); R@k dedup, "
            "MRR and nDCG: over the passage ranking (each passage at its best chunk), the ranking of the TREC runs "
            "of `--save-runs`, where an external scorer's R@k, RR@k and nDCG@k equal them. Context recall: recall "
            "over each query's whole context, the top β chunks, or the adaptive context of a method that chooses "
            "its size (SpectRAG's token-budgeted selection)."]
    if significance:
        out += ["", f"{MARKER}: p < {significance['alpha']} against the baseline `{significance['baseline']}` in the "
                f"{marker_phrase(significance)}; every test's p-values are in [Significance](#significance)."]
    chosen = payload["results"].get("measures") or []
    if chosen:
        out += ["", "## Measures of your choosing (ir_measures)", "",
                "Computed by ir_measures on each system's passage run (each passage at its best chunk) against the "
                "qrels, both named by passage id, as an external scorer computes them from `--save-runs`.", "",
                "| system | " + " | ".join(chosen) + " |", "|---|" + "---|" * len(chosen)]
        for name, s in systems.items():
            out.append(f"| {name} | " + " | ".join(f"{pct(s['metrics'].get(m))}{mark(name, m)}" for m in chosen) + " |")
    out += every_cutoff(payload["results"], systems, mark)
    if significance:
        out += significance_table(significance, systems)
    if payload.get("per_query_file"):
        out += ["", f"Per-query values of every metric and system: [{payload['per_query_file']}]"
                f"({payload['per_query_file']}) (one row per system and query; their means are the figures above)."]
    qa = payload["results"].get("qa")
    if qa:
        out += ["", f"## Question answering (Table 3 layout; {qa['model']})", "", "| system | EM | F1 | mean latency (s) |",
                "|---|---|---|---|"]
        for name, s in qa["systems"].items():
            out.append(f"| {name} | {pct(s['em'])} | {pct(s['f1'])} | {s['mean_latency_seconds']:.2f} |")
    else:
        out += ["", "## Question answering", "", "Skipped: no LLM endpoint was given (`--qa-endpoint`)."]
    out += ["", "## Resources (Tables 4-5 layout)", "",
            "| system | retrieval seconds | queries/s | queries/s with query encoding | queries/s without encoder | "
            "encoder texts/query | mean hop-1 pool | mean hops | dense fallbacks | context tokens |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    for name, s in systems.items():
        out.append(f"| {name} | {s['seconds']:.2f} | {number(s['queries_per_second'], '.1f')} | "
                   f"{number(s.get('queries_per_second_with_query_encoding'), '.1f')} | "
                   f"{number(s.get('queries_per_second_without_encoder'), '.1f')} | "
                   f"{number(s.get('encoder_texts_per_query'), '.2f')} | {number(s.get('mean_pool_size_hop1'), '.0f')} | "
                   f"{number(s.get('mean_hops'), '.2f')} | {number(s.get('dense_fallbacks'), 'd')} | "
                   f"{s['context_tokens']:.1f} |")
    encode = payload["results"].get("query_encode_seconds")
    out += ["", "Every system is timed after an untimed warm-up call on the first queries (compilation, uploads, "
            "lazy loads). " + (f"The queries were encoded once, before any system was timed ({encode:.2f} s); "
                               "`queries/s` times retrieval with those vectors given, `with query encoding` adds "
                               "that time back to each system that uses the encoder (equal terms), `without "
                               "encoder` leaves out every encoder second (the graph and scoring stages). "
                               if encode is not None else "")
            + f"Encoder time in all: {payload['results']['encoder_seconds']:.2f} s. Context tokens are Treebank word "
            "tokens of the context (top β, or the adaptive context)."]
    gains = payload["results"].get("hop_gains")
    if gains:
        out += ["", "## What the second hop adds", "",
                f"Gold passages gained in the top 5 per query: {gains['mean_gold_added_top5']:+.3f}; queries gaining: "
                f"{pct(gains['queries_gaining_top5'])}%, losing: {pct(gains['queries_losing_top5'])}%."]
    types = systems.get("TIGRAG", {}).get("metrics", {}).get("by_type")
    if types:
        from ..methods.registry import systems as named_systems

        headline = [name for name, system in named_systems().items() if system.headline]
        shown = [name for name in headline if name in systems] or list(systems)
        out += ["", "## By question type (R@2 / R@5)", "", "| type | queries | " + " | ".join(shown) + " |",
                "|---|---|" + "---|" * len(shown)]
        for t, row in types.items():
            cells = [f"{pct(systems[s]['metrics']['by_type'][t]['recall@2'])} / "
                     f"{pct(systems[s]['metrics']['by_type'][t]['recall@5'])}" for s in shown]
            out.append(f"| {t} | {row['queries']} | " + " | ".join(cells) + " |")
    out += ablation_tables(systems)
    for key, rows in payload["results"]["sweeps"].items():
        out += ["", f"## Sensitivity: {SWEEP_TITLES.get(key, key)}", "", f"| {key} | R@2 | R@5 | nDCG@10 |", "|---|---|---|---|"]
        out += [f"| {r['value']} | {pct(r['recall@2'])} | {pct(r['recall@5'])} | {pct(r['ndcg@10'])} |" for r in rows]
    found = claims(systems)
    if found:
        out += ["", "## The paper's claims on this run", "", *found]
    if payload.get("plots"):
        out += ["", "## Plots", ""] + [f"![{p}]({p})" for p in payload["plots"]]
    out += settings_table(systems)
    if "retrieval_config" in run:
        out += ["", "## Appendix: the full retrieval configuration", "",
                f"Of the preset `{run.get('preset')}` with the command's `--set`s (the rows without a preset of "
                "their own start from it):", "", "```json", json.dumps(run["retrieval_config"], indent=1), "```"]
    return "\n".join(out) + "\n"


def settings_table(systems: dict[str, Any]) -> list[str]:
    """Each row's settings that differ from the paper's defaults (`Experiment.report`), and the user's
    settings that a row's definition overrides; nothing for results written before rows recorded them."""
    if not any("settings" in s for s in systems.values()):
        return []
    out = ["", "## Settings of each row", "",
           "What each row ran with, beyond the paper's defaults (the method's own settings and the shared ones).",
           "", "| system | settings that differ from the paper's defaults | --set not applied (the row's definition "
           "fixes it) |", "|---|---|---|"]
    for name, s in systems.items():
        changed = ", ".join(f"`{k}={v}`" for k, v in s.get("settings", {}).items()) or "none (the method's defaults)"
        if "external_run" in s.get("config", {}):
            changed = f"a run made elsewhere: `{s['config']['external_run']}`"
        if "fusion" in s.get("config", {}):
            changed = (f"reciprocal-rank fusion (k {s['config']['k']}) of "
                       + ", ".join(f"`{m}`" for m in s["config"]["members"]))
        if s.get("auto_chose"):
            changed += "; auto chose " + ", ".join(f"`{k}={v}`" for k, v in s["auto_chose"].items())
        fixed = ", ".join(f"`{k}` (stays {v})" for k, v in s.get("fixed_settings", {}).items()) or "–"
        out.append(f"| {name} | {changed} | {fixed} |")
    return out


def save_png(fig: Any, path: Path) -> None:
    """Write a figure atomically: a killed or failed run never leaves a half-written PNG."""
    atomic_write(path, lambda tmp: fig.savefig(tmp, format="png"), suffix=".png")


def legend_figsize(n_systems: int, width: float = 7.0) -> tuple[float, float]:
    """A figure that fits its plot and, to the right, a legend of `n_systems` entries (one column up to 24)."""
    columns = 1 if n_systems <= 24 else 2
    return width + 2.6 * columns, max(3.8, 0.2 * n_systems / columns + 1.2)


def line_style(i: int) -> dict[str, Any]:
    """Color, line style and marker of the i-th line: 10 colors × 4 dashes × 7 markers, no two of 280 alike."""
    import matplotlib.pyplot as plt

    colors = plt.get_cmap("tab10").colors
    return {"color": colors[i % 10], "linestyle": ("-", "--", ":", "-.")[(i // 10) % 4],
            "marker": "osD^vPX"[i % 7], "markersize": 4, "linewidth": 1.3}


def legend_outside(ax: Any, n_systems: int) -> None:
    """The legend right of the axes, out of the data's way."""
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0,
              ncol=1 if n_systems <= 24 else 2, frameon=False)


def plot(payload: dict[str, Any], folder: Path) -> list[str]:
    """PNG plots next to the report; returns their file names."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results, names = payload["results"], []
    systems = results["systems"]
    fig, ax = plt.subplots(figsize=legend_figsize(len(systems)), dpi=110)
    ks = sorted({int(m.partition("@")[2]) for s in systems.values() for m in s["metrics"] if m.startswith("recall@")})
    for i, (name, s) in enumerate(systems.items()):
        ax.plot(range(len(ks)), [100 * s["metrics"].get(f"recall@{k}", float("nan")) for k in ks], label=name,
                **line_style(i))
    ax.set_xticks(range(len(ks)), [str(k) for k in ks])
    ax.set(xlabel="k (chunks)", ylabel="recall@k (%)", title="Recall@k per system")
    ax.grid(alpha=0.3)
    fig.text(0.01, 0.01, "HippoRAG's recall: the share of gold passages among the passages of the top-k chunks",
             fontsize=7, color="0.3")
    legend_outside(ax, len(systems))
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    save_png(fig, folder / "recall_at_k.png")
    plt.close(fig)
    names.append("recall_at_k.png")
    for key, rows in results["sweeps"].items():
        fig, ax = plt.subplots(figsize=(4, 3), dpi=100)
        values = [r["value"] for r in rows]
        for metric in ("recall@2", "recall@5"):
            ax.plot(values, [100 * r[metric] for r in rows], marker="o", label=metric)
        ax.set(xlabel=key, ylabel="%", title=f"Sweep of {key}")
        ax.legend(fontsize=7)
        fig.tight_layout()
        save_png(fig, folder / f"sweep_{key}.png")
        plt.close(fig)
        names.append(f"sweep_{key}.png")
    types = systems.get("TIGRAG", {}).get("metrics", {}).get("by_type")
    if types:
        fig, ax = plt.subplots(figsize=legend_figsize(len(systems), 7 + 0.15 * len(systems) * len(types)), dpi=110)
        width = 0.8 / max(len(systems), 1)
        colors = plt.get_cmap("tab20").colors
        for i, (name, s) in enumerate(systems.items()):
            ax.bar([j + i * width for j in range(len(types))],
                   [100 * s["metrics"]["by_type"][t]["recall@5"] for t in types], width, label=name,
                   color=colors[i % len(colors)], hatch=("", "//", "..", "xx")[(i // len(colors)) % 4])
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(types))], list(types), fontsize=8)
        ax.set(ylabel="recall@5 (%)", title="Recall@5 by question type")
        ax.grid(axis="y", alpha=0.3)
        legend_outside(ax, len(systems))
        fig.tight_layout()
        save_png(fig, folder / "by_type.png")
        plt.close(fig)
        names.append("by_type.png")
    qa = results.get("qa")
    if qa:
        fig, ax = plt.subplots(figsize=(5, 3.5), dpi=100)
        for name, s in qa["systems"].items():
            ax.hist(s["latencies"], bins=20, alpha=0.5, label=name)
        ax.set(xlabel="seconds per question (LLM call)", ylabel="questions", title="QA latency")
        ax.legend(fontsize=7)
        fig.tight_layout()
        save_png(fig, folder / "latency.png")
        plt.close(fig)
        names.append("latency.png")
    return names


#: the per-query table of a run directory
PER_QUERY_FILE = "per_query.tsv"


#: the kind of artefact an evaluation run folder records (`outputs.py`)
REPORT_KIND = "an evaluation run"
#: the files `write_run` may write, besides one sweep_NAME.png per sweep
REPORT_FILES = ("results.json", "report.md", "per_query.tsv", "tables.csv", "tables.tex", "recall_at_k.png", "by_type.png", "latency.png")


def table_metrics(results: dict[str, Any]) -> list[str]:
    """The columns of the tables files: the main metrics, then the user's ir_measures measures."""
    return [*MAIN_METRICS, *(results.get("measures") or [])]


def table_rows(results: dict[str, Any], metrics: Sequence[str]) -> list[tuple[str, list[float | None], list[bool]]]:
    """(system, values, significant) per system: the figures of `metrics` (None where a system has none) and
    whether each differs from the baseline in the run's marker test."""
    mark = markers(results.get("significance"))
    return [(name, [s["metrics"].get(m) for m in metrics], [bool(mark(name, m)) for m in metrics])
            for name, s in results["systems"].items()]


def tables_csv(results: dict[str, Any], metrics: Sequence[str] | None = None) -> str:
    """The systems × metrics table as CSV (values as fractions, full precision; `*_significant` columns)."""
    import csv
    import io

    metrics = list(metrics or table_metrics(results))
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["system", *metrics, *(f"{m}_significant" for m in metrics)])
    for name, values, significant in table_rows(results, metrics):
        writer.writerow([name, *("" if v is None else repr(float(v)) for v in values), *map(int, significant)])
    return buffer.getvalue()


def _latex(text: str) -> str:
    return "".join("\\" + c if c in "&%$#_{}" else ("\\textasciitilde{}" if c == "~" else c) for c in text)


def tables_latex(results: dict[str, Any], metrics: Sequence[str] | None = None) -> str:
    """The systems × metrics table as a LaTeX tabular (booktabs rules; percentages; $^\\dagger$ on figures
    that differ from the baseline in the run's marker test)."""
    metrics = list(metrics or table_metrics(results))
    lines = ["% gpu_tigrag: systems x metrics (percent); needs \\usepackage{booktabs}",
             "\\begin{tabular}{l" + "r" * len(metrics) + "}", "\\toprule",
             "System & " + " & ".join(_latex(metric_label(m)) for m in metrics) + " \\\\", "\\midrule"]
    for name, values, significant in table_rows(results, metrics):
        cells = ["--" if v is None else f"{100 * v:.2f}" + ("$^\\dagger$" if s else "")
                 for v, s in zip(values, significant)]
        lines.append(_latex(name) + " & " + " & ".join(cells) + " \\\\")
    lines += ["\\bottomrule", "\\end{tabular}"]
    return "\n".join(lines) + "\n"


def report_files(folder: Path, sweeps: Sequence[str] = ()) -> list[str]:
    """The files `write_run` may write into `folder` (the sweeps' plots there already included)."""
    found = sorted(p.name for p in folder.glob("sweep_*.png")) if folder.is_dir() else []
    return [*REPORT_FILES, *dict.fromkeys([*(f"sweep_{key}.png" for key in sweeps), *found])]


def write_run(folder: str | Path, payload: dict[str, Any], overwrite: bool = False) -> Path:
    """Write results.json, the PNG plots, per_query.tsv and report.md into `folder`, each file atomically (a reader
    sees the previous file or the new one), and the folder's record of them; a file there that gpu_tigrag did not
    write is refused (`outputs.py`) unless `overwrite`. I/O failures raise OutputError naming the file."""
    from ..outputs import OutputFolder

    folder = Path(folder)
    out = OutputFolder(folder, REPORT_KIND, f"--out {folder}", force=overwrite)
    out.check(report_files(folder, list(payload.get("results", {}).get("sweeps") or ())))
    folder.mkdir(parents=True, exist_ok=True)
    payload["plots"] = plot(payload, folder)
    table = per_query_tsv(payload["results"]["systems"])
    if table is not None:
        atomic_write_text(folder / PER_QUERY_FILE, table)
        payload["per_query_file"] = PER_QUERY_FILE
    atomic_write_text(folder / "results.json", json.dumps(payload, indent=2, default=float) + "\n")
    atomic_write_text(folder / "report.md", markdown(payload))
    atomic_write_text(folder / "tables.csv", tables_csv(payload["results"]))
    atomic_write_text(folder / "tables.tex", tables_latex(payload["results"]))
    out.record(["results.json", "report.md", "tables.csv", "tables.tex", *payload["plots"],
                *([PER_QUERY_FILE] if table is not None else [])])
    return folder


def load_run(folder: str | Path) -> dict[str, Any]:
    path = Path(folder) / "results.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TigragError(f"{path}: no such file (is {folder} a run directory written by `tigrag eval --out`?)") from None
    except json.JSONDecodeError as exc:
        raise TigragError(f"{path}: damaged results ({exc})") from None


#: the metrics `tigrag report` compares by default
COMPARE_METRICS = ("recall@2", "recall@5", "ndcg@10")
#: the formats of `tigrag report`
COMPARE_FORMATS = ("markdown", "csv", "latex")


def compare(folders: Sequence[str | Path], metrics: Sequence[str] = COMPARE_METRICS, fmt: str = "markdown") -> str:
    """The systems (rows) of every run (columns) on `metrics` (any metric or ir_measures measure the runs
    hold; † where the run's own significance test marks the figure), as Markdown, CSV or LaTeX."""
    if fmt not in COMPARE_FORMATS:
        raise TigragError(f"--format must be one of {', '.join(COMPARE_FORMATS)}, got {fmt!r}")
    runs = [(Path(f).name, load_run(f)) for f in folders]
    held = {m for _, r in runs for s in r["results"]["systems"].values() for m in s["metrics"] if m != "by_type"}
    unknown = [m for m in metrics if m not in held]
    if unknown:
        raise TigragError(f"--metrics: {unknown[0]!r} is in none of the runs; they hold " + ", ".join(sorted(held)))
    systems = list(dict.fromkeys(s for _, r in runs for s in r["results"]["systems"]))
    columns = [(name, r, m) for name, r in runs for m in metrics]

    def cell(system: str, r: dict, metric: str, latex: bool = False) -> str:
        value = r["results"]["systems"].get(system, {}).get("metrics", {}).get(metric)
        if value is None:
            return "--" if latex else "–"
        flag = markers(r["results"].get("significance"))(system, metric)
        return f"{100 * value:.2f}" + (("$^\\dagger$" if latex else MARKER) if flag else "")

    if fmt == "csv":
        import csv
        import io

        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(["system", *(f"{name}:{m}" for name, _, m in columns)])
        for s in systems:
            writer.writerow([s, *(repr(float(v)) if (v := r["results"]["systems"].get(s, {}).get("metrics", {}).get(m))
                                  is not None else "" for _, r, m in columns)])
        return buffer.getvalue()
    if fmt == "latex":
        lines = ["% gpu_tigrag report: systems x (run, metric), percent; needs \\usepackage{booktabs}",
                 "\\begin{tabular}{l" + "r" * len(columns) + "}", "\\toprule",
                 "System & " + " & ".join(_latex(f"{name} {metric_label(m)}") for name, _, m in columns) + " \\\\",
                 "\\midrule"]
        lines += [_latex(s) + " & " + " & ".join(cell(s, r, m, True) for _, r, m in columns) + " \\\\" for s in systems]
        return "\n".join([*lines, "\\bottomrule", "\\end{tabular}"]) + "\n"
    labels = " / ".join(metric_label(m) for m in metrics)
    head = "| system | " + " | ".join(f"{name} ({r['run']['dataset']}) {labels}" for name, r in runs) + " |"
    lines = [head, "|---|" + "---|" * len(runs)]
    for s in systems:
        cells = [" / ".join(cell(s, r, m) for m in metrics) if s in r["results"]["systems"] else "–" for _, r in runs]
        lines.append(f"| {s} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_run_or_keep(out: str, payload: dict[str, Any], overwrite: bool = False) -> Path:
    """write_run into `out`; when that fails (disk full, folder removed), the results go to a temporary
    file (or, failing that, standard output) that the one-line error names."""
    import os
    import sys
    import tempfile

    try:
        return write_run(out, payload, overwrite)
    except (OSError, TigragError) as exc:  # atomic.py reports I/O failures as OutputError; a refused file too
        reason = getattr(exc, "strerror", None) or str(exc)
    try:
        handle, name = tempfile.mkstemp(prefix="tigrag-eval-", suffix=".json")
        with os.fdopen(handle, "w") as file:
            json.dump(payload, file, indent=2, default=float)
        saved = f"saved in {name}"
    except OSError:
        json.dump(payload, sys.stdout, default=float)
        print()
        saved = "printed on standard output"
    raise TigragError(f"--out {out}: cannot write the run ({reason}); its results are {saved}")


def code_version() -> str:
    """`git describe` of the checkout the package runs from ("unknown" outside a git checkout)."""
    import subprocess

    try:
        root = Path(__file__).resolve().parents[2]
        proc = subprocess.run(["git", "-C", str(root), "describe", "--always", "--dirty"], capture_output=True, text=True)
        return proc.stdout.strip() or "unknown"
    except OSError:
        return "unknown"
