"""bench/synth.py: reproducible Zipf text corpora that the whole pipeline can read."""

import subprocess
import sys

from conftest import ROOT
from gpu_tigrag.corpus import load_corpus


def test_synthetic_corpus_is_reproducible_and_loads(tmp_path):
    outputs = []
    for name in ("a.jsonl", "b.jsonl", "c.parquet"):
        subprocess.run([sys.executable, str(ROOT / "bench" / "synth.py"), "300", "--seed", "3", "-o",
                        str(tmp_path / name)], check=True, capture_output=True, timeout=120)
        outputs.append(tmp_path / name)
    assert outputs[0].read_bytes() == outputs[1].read_bytes()
    passages = load_corpus(outputs[0])
    assert len(passages) == 300 and all(p.text.startswith(p.title) for p in passages)
    assert [p.text for p in load_corpus(outputs[2])] == [p.text for p in passages]
