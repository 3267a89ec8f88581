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

from ..errors import EXIT_BROKEN_PIPE, EXIT_BUG, EXIT_RESOURCES, TigragError
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
    """Run one command; returns its exit code (`errors.EXIT_CODES`): 0 success, 2 usage or input error
    (argparse's own errors included), 3 damaged index, 4 out of memory or disk space, 1 a bug (printed
    with its traceback), 130 interrupted, 141 standard output closed by its reader (quietly)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    _quiet_libraries()
    try:
        with logging_to_stderr(verbose=args.verbose, quiet=args.quiet):
            check_options(args)
            from ..threads import apply_thread_policy

            apply_thread_policy(args.threads)  # before any pool starts (numba, torch, ONNX Runtime, Dask)
            code = args.func(args)
            sys.stdout.flush()  # a reader that closed the pipe is found here, not at the interpreter's exit
            return code
    except TigragError as exc:
        print(f"tigrag: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("tigrag: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - the last resort: a closed output, resources, else a bug
        if isinstance(exc, BrokenPipeError) and stdout_closed():
            return EXIT_BROKEN_PIPE
        reason = out_of_resources(exc)
        if reason:
            print(f"tigrag: error: {reason} ({type(exc).__name__}: {exc})", file=sys.stderr)
            return EXIT_RESOURCES
        import traceback

        traceback.print_exc()
        print(f"tigrag: internal error ({type(exc).__name__}): this is a bug; please report it with the "
              "traceback above", file=sys.stderr)
        return EXIT_BUG


def stdout_closed() -> bool:
    """Whether standard output's reader has gone (`| head` read enough). If so, standard output is
    pointed at /dev/null, so that the interpreter's last flush at exit fails no more (no "Exception
    ignored" message): the command then stops quietly, as a Unix tool stopped by SIGPIPE."""
    import os
    import select

    try:
        fd = sys.stdout.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        if not any(events & select.POLLERR for _, events in poller.poll(0)):  # a pipe without reader: POLLERR
            return False
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # a replaced stdout without a file descriptor
        return False
    return True


def out_of_resources(exc: BaseException) -> str | None:
    """What ran out, when `exc` is an out-of-memory error (host, CuPy, torch, onnxruntime) or a full disk;
    else None."""
    import errno

    if isinstance(exc, MemoryError) or "OutOfMemory" in type(exc).__name__:
        return "out of memory"
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return "no space left on the disk"
    if "out of memory" in str(exc).lower() and type(exc).__name__ in ("RuntimeError", "RuntimeException", "Fail"):
        return "out of memory"
    return None


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
