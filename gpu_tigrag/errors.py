"""Exceptions raised for user mistakes: the CLI prints them without a traceback."""


class TigragError(Exception):
    """Base class of errors that are the user's to fix (bad input, bad index, bad flag)."""


class CorpusError(TigragError):
    """A corpus file cannot be read: names the file, the record and what was expected."""


class IndexFormatError(TigragError):
    """An index directory is missing, damaged, or written by an incompatible version."""


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
