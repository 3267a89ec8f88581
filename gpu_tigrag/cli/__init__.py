"""`tigrag` command line: index a corpus, query an index, evaluate recall on a query set.

Results (statistics, answers, `--json`) go to standard output. Progress and warnings are log
messages of the modules' own loggers (`logging.getLogger(__name__)` under `gpu_tigrag`), which
`main` sends to standard error as plain lines: INFO and above by default, WARNING and above with
`-q/--quiet`, everything with `-v/--verbose`. The parser is in `parser.py`, the commands in
`commands.py`, the option checks they share in `options.py`.
"""

from __future__ import annotations

import logging
import sys
from contextlib import contextmanager
from typing import Iterator, Sequence

from ..errors import TigragError
from .options import check_options, parse_sets
from .parser import build_parser

#: the logger every module of the package logs under, configured once per command by `main`
PACKAGE_LOGGER = "gpu_tigrag"

__all__ = ["PACKAGE_LOGGER", "build_parser", "logging_to_stderr", "main", "parse_sets"]


class _StderrHandler(logging.StreamHandler):
    """Writes each message as a plain line to the `sys.stderr` of the moment (a caller, or a test,
    may have replaced it since the handler was made)."""

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(logging.Formatter("%(message)s"))

    @property
    def stream(self):  # type: ignore[override]
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass


@contextmanager
def logging_to_stderr(verbose: bool = False, quiet: bool = False) -> Iterator[None]:
    """For the block, send the package's log messages to standard error as plain lines: INFO and
    above, WARNING and above when `quiet`, DEBUG and above when `verbose` (which wins over `quiet`).
    The package logger's handler and level are restored afterwards, so a process running several
    commands (the tests) neither repeats messages nor keeps one command's level for the next."""
    logger = logging.getLogger(PACKAGE_LOGGER)
    handler, level = _StderrHandler(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG if verbose else logging.WARNING if quiet else logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    _quiet_libraries()
    try:
        with logging_to_stderr(verbose=args.verbose, quiet=args.quiet):
            check_options(args)
            return args.func(args)
    except TigragError as exc:
        print(f"tigrag: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("tigrag: interrupted", file=sys.stderr)
        return 130


def _quiet_libraries() -> None:
    import os
    import warnings

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "warning")  # read when dask.distributed is imported
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    for name in ("sentence_transformers", "transformers", "huggingface_hub"):
        logging.getLogger(name).setLevel(logging.ERROR)
