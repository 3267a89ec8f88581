"""Hard links or copies for the files a new index generation re-uses (issue 30 item 7): `tigrag extend`
(a method stage; every base file re-used) and `tigrag add` (one passage) with unchanged files hard-linked
(`generation_files.HARD_LINKS`) or copied (a reflink where the filesystem clones, else written again),
time and disk; and the bytes per second of each way to put one file in a generation, to size a large index.

    python bench/studies/generation_copies.py [--corpus FILE | --passages N] [--reflink-dir XFS_MOUNT] [-o bench/results/generations.md]

The index is built with the fast stand-ins (hashing:384, capitalized entities). Each command runs in a
fresh process on a fresh copy of the index while this process holds the old generation (as a reader
would), so the disk figure is what the index directory takes while both generations exist. `-o` replaces
this script's section of the Markdown file (between its markers) and keeps the rest.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("TIGRAG_DATA", ROOT.parent / "shared" / "data"))
DEFAULT_CORPUS = DATA / "2wikimultihopqa" / "2wikimultihopqa_corpus.json"
FAST = ["--set", "encoder.model=hashing:384", "--set", "entities.model=capitalized"]
BEGIN, END = "<!-- generation_copies: begin -->", "<!-- generation_copies: end -->"

RUN = """
import json, sys, time
import gpu_tigrag.index.generation_files as files
import gpu_tigrag.index.store as store
files.HARD_LINKS = sys.argv[1] == "links"
writes = []
write = store._write_generation
def timed(*args):
    start = time.perf_counter()
    write(*args)
    writes.append(time.perf_counter() - start)
store._write_generation = timed
from gpu_tigrag.cli import main
code = main(sys.argv[3:])
with open(sys.argv[2], "w") as handle:
    json.dump(writes, handle)
sys.exit(code)
"""


def command(mode: str, *args: str) -> tuple[float, float]:
    """(seconds of the whole `tigrag` command in a fresh process, seconds of its generation write)."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", RUN, mode, out.name, *args], check=True, cwd=ROOT,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        total = time.perf_counter() - start
        return total, sum(json.loads(Path(out.name).read_text()))


def allocated(*folders: Path) -> int:
    """Bytes allocated to the files under `folders`, each inode counted once (hard links shared)."""
    seen, total = set(), 0
    for folder in folders:
        for path in folder.rglob("*"):
            info = path.lstat()
            if path.is_file() and (info.st_dev, info.st_ino) not in seen:
                seen.add((info.st_dev, info.st_ino))
                total += info.st_blocks * 512
    return total


def free_bytes(folder: Path) -> int:
    os.sync()  # delayed allocation settled, on both sides of a command
    info = os.statvfs(folder)
    return info.f_bavail * info.f_frsize


def measure(base: Path, work: Path, mode: str, action: str, extra: Path, repeat: int) -> dict:
    """Median seconds and the disk taken by one `action` ("extend" or "add") in `mode`, in `work`."""
    from gpu_tigrag.index.store import generation_folder, load_index

    totals, writes, disks, new = [], [], [], []
    for attempt in range(repeat):
        index = work / f"idx-{mode}-{action}-{attempt}"
        shutil.copytree(base, index)  # a plain copy: no block shared with `base`
        reader = load_index(index)  # holds the old generation as a reader would
        old = generation_folder(index)
        free = free_bytes(work)
        args = (["extend", str(index), "--methods", "spectrag", "-q"] if action == "extend"
                else ["add", str(index), str(extra), "-q"])
        total, write = command(mode, *args)
        current = generation_folder(index)
        totals.append(total)
        writes.append(write)
        disks.append((free - free_bytes(work)) / 2**20)  # what the filesystem itself gave the new generation
        new.append((allocated(old, current) - allocated(old)) / 2**20)  # the new generation's own inodes
        del reader
        shutil.rmtree(index)
    return {"command s": statistics.median(totals), "write s": statistics.median(writes),
            "new inodes MB": statistics.median(new), "free space taken MB": statistics.median(disks)}


def file_rates(folder: Path, source: Path, repeat: int) -> dict:
    """Seconds to put `source` (an .npy file) in a new folder in each way the writer can; MB/s."""
    import numpy as np

    import gpu_tigrag.index.generation_files as files

    array = np.load(source)
    ways = {
        "hard link": lambda target: os.link(source, target),
        "reflink (FICLONE) + fsync": lambda target: _reflink(source, target),
        "copy_file_range + fsync": lambda target: _copy(source, target),
        "written from memory, sha256 + fsync": lambda target: files._durable(
            target, lambda tee: np.save(tee, array, allow_pickle=False)),
        "sha256 of the array only (no file)": lambda target: np.save(files._Tee(None, ""), array, allow_pickle=False),
    }
    found = {}
    for name, way in ways.items():
        seconds = []
        for attempt in range(repeat):
            target = folder / f"rate-{attempt}.npy"
            start = time.perf_counter()
            try:
                way(target)
            except OSError:
                seconds = []
                break
            seconds.append(time.perf_counter() - start)
            if target.exists():
                os.chmod(target, 0o644)
                target.unlink()
        if seconds:
            best = statistics.median(seconds)
            found[name] = {"s": best, "MB/s": source.stat().st_size / 2**20 / best if best else float("inf")}
    return found


def _reflink(source: Path, target: Path) -> None:
    import gpu_tigrag.index.generation_files as files

    if not files._clone(source, target):
        raise OSError("this filesystem does not clone")


def _copy(source: Path, target: Path) -> None:
    with open(source, "rb") as origin, open(target, "xb") as copy:
        remaining = os.fstat(origin.fileno()).st_size
        while remaining > 0:
            remaining -= os.copy_file_range(origin.fileno(), copy.fileno(), remaining)
        os.fsync(copy.fileno())


def table(rows: list[dict]) -> str:
    keys = list(dict.fromkeys(k for row in rows for k in row))
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    for row in rows:
        lines.append("| " + " | ".join(f"{row[k]:,.3f}" if isinstance(row.get(k), float) else str(row.get(k, "–"))
                                       for k in keys) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--passages", type=int, help="a synthetic corpus of N passages instead of --corpus")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--big-mb", type=int, default=256, help="size of the synthetic array for the file rates")
    parser.add_argument("--reflink-dir", type=Path, help="a folder on a filesystem that clones (btrfs, XFS)")
    parser.add_argument("-o", "--output", type=Path)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    import numpy as np

    with tempfile.TemporaryDirectory(prefix="tigrag-copies-") as tmp:
        folder = Path(tmp)
        corpus = args.corpus
        if args.passages:
            from gpu_tigrag.synth import passages, write_corpus

            corpus = folder / "corpus.jsonl"
            write_corpus(corpus, passages(args.passages))
        base = folder / "base"
        subprocess.run([sys.executable, "-m", "gpu_tigrag.cli", "index", str(corpus), "-o", str(base), "-q", *FAST],
                       check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
        extra = folder / "extra.json"
        extra.write_text(json.dumps([{"title": "Zebrine Quay", "text": "Zebrine Quay is a new pier near Korvath."}]))
        places = [("tmp", folder)]
        if args.reflink_dir:
            places.append(("reflink dir", Path(tempfile.mkdtemp(prefix="tigrag-copies-", dir=args.reflink_dir))))
        from gpu_tigrag.index.store import generation_folder

        index_mb = sum(p.stat().st_size for p in generation_folder(base).iterdir()) / 2**20
        embeddings = generation_folder(base) / "embeddings.npy"
        rows, rates = [], []
        big = folder / "big.npy"
        np.save(big, np.random.default_rng(0).standard_normal(args.big_mb * 2**18, dtype=np.float32))
        try:
            for place, work in places:
                fs = subprocess.run(["df", "--output=fstype", str(work)], capture_output=True,
                                    text=True).stdout.split()[-1]
                for action in ("extend", "add"):
                    for mode in ("links", "copies"):
                        rows.append({"filesystem": fs, "command": action, "unchanged files": mode,
                                     **measure(base, work, mode, action, extra, args.repeat)})
                for source in (embeddings, big):
                    local = work / f"source-{source.name}"
                    shutil.copyfile(source, local)
                    for way, got in file_rates(work, local, args.repeat).items():
                        rates.append({"filesystem": fs, "file": f"{source.name} ({local.stat().st_size / 2**20:.1f} MB)",
                                      "way": way, **got})
                    local.unlink()
        finally:
            if args.reflink_dir:
                shutil.rmtree(places[-1][1], ignore_errors=True)
    section = (f"{BEGIN}\n## Hard links or copies of the unchanged files (issue 30 item 7)\n\n"
               f"`{' '.join(['python', 'bench/studies/generation_copies.py', *sys.argv[1:]])}`: the index of "
               f"`{'synthetic ' + str(args.passages) if args.passages else args.corpus.name}` ({index_mb:.1f} MB, "
               f"hashing:384), median of {args.repeat}; the commands run in fresh processes while a reader holds "
               "the old generation.\n\n" + table(rows) + "\n\nOne file into a new generation:\n\n" + table(rates)
               + f"\n{END}\n")
    print(section)
    if args.output:
        text = args.output.read_text() if args.output.exists() else ""
        if BEGIN in text and END in text:
            text = text[: text.index(BEGIN)] + section + text[text.index(END) + len(END) + 1:]
        else:
            text = text.rstrip("\n") + "\n\n" + section
        args.output.write_text(text)


if __name__ == "__main__":
    main()
