"""Exceptions raised for user mistakes: the CLI prints them without a traceback, and exits with
the error's `exit_code` (EXIT_CODES)."""

#: the exit codes of `tigrag`, documented in `tigrag --help`, docs/cli.md and the README
EXIT_OK, EXIT_BUG, EXIT_USAGE, EXIT_DAMAGED_INDEX, EXIT_RESOURCES = 0, 1, 2, 3, 4
#: standard output closed by its reader (`tigrag eval ... | head`): 128 + SIGPIPE, what a shell
#: reports for a Unix tool that the closed pipe stopped
EXIT_BROKEN_PIPE = 141
EXIT_CODES = {
    EXIT_OK: "success",
    EXIT_BUG: "a bug: an unexpected error, printed with its traceback (please report it)",
    EXIT_USAGE: "usage or input error: bad option or value, unreadable or invalid input file, no such index, "
                "missing index stage, output that cannot be written",
    EXIT_DAMAGED_INDEX: "damaged or incompatible index: checksum mismatch, missing or inconsistent files; rebuild it",
    EXIT_RESOURCES: "out of resources: out of memory (host or device) or no space left on the disk",
    130: "interrupted (Ctrl-C)",
    EXIT_BROKEN_PIPE: "standard output closed by its reader (e.g. `| head`): the command stops quietly, as Unix tools do",
}


class TigragError(Exception):
    """Base class of errors that are the user's to fix (bad input, bad index, bad flag)."""

    exit_code = EXIT_USAGE


class CorpusError(TigragError):
    """A corpus file cannot be read: names the file, the record and what was expected."""


class IndexFormatError(TigragError):
    """An index directory is missing, damaged, or written by an incompatible version."""

    exit_code = EXIT_DAMAGED_INDEX


class NotAnIndexError(IndexFormatError):
    """The path names no index directory at all (a usage error, not a damaged index)."""

    exit_code = EXIT_USAGE


class ResourceError(TigragError):
    """Out of memory (host or device) or of disk space."""

    exit_code = EXIT_RESOURCES


class BackendUnavailableError(TigragError):
    """The requested array backend (e.g. CuPy) is not installed or has no device."""


class ModelError(TigragError):
    """An encoder or NER model cannot be loaded or failed verification."""


class WriterLockError(TigragError):
    """Another process (or thread) is writing the same index directory or output file."""


class ResumeMismatchError(TigragError):
    """`run --resume` found an output that does not belong to this query file, index or configuration."""


class OutputError(TigragError):
    """An output cannot be written (disk full, unwritable folder): names the file and the reason."""

    @property
    def exit_code(self) -> int:  # type: ignore[override]
        """Out of resources for a full disk or quota (the reasons `atomic.describe_os_error` gives), else usage."""
        text = str(self)
        return EXIT_RESOURCES if "no space left on device" in text or "disk quota exceeded" in text else EXIT_USAGE
