"""sha256_file_once: a file's digest is computed once per process while the file is unchanged."""

from __future__ import annotations

import hashlib
import os

from gpu_tigrag import checksums
from gpu_tigrag.checksums import sha256_file, sha256_file_once


def _counting(monkeypatch) -> list[int]:
    calls: list[int] = []
    real = checksums._sha256_handle

    def counted(handle, chunk=1 << 20):
        calls.append(1)
        return real(handle, chunk)

    monkeypatch.setattr(checksums, "_sha256_handle", counted)
    return calls


def test_the_digest_is_sha256_and_a_second_call_reads_nothing(tmp_path, monkeypatch):
    path = tmp_path / "weights.bin"
    path.write_bytes(b"weights" * 1000)
    expected = sha256_file(path)
    calls = _counting(monkeypatch)
    digest = sha256_file_once(path)
    assert digest == hashlib.sha256(b"weights" * 1000).hexdigest() == expected
    assert sha256_file_once(path) == digest and sha256_file_once(str(path)) == digest
    assert len(calls) == 1


def test_a_changed_or_replaced_file_is_hashed_again(tmp_path, monkeypatch):
    path = tmp_path / "weights.bin"
    path.write_bytes(b"a" * 64)
    first = sha256_file_once(path)
    calls = _counting(monkeypatch)
    stat = os.stat(path)
    path.write_bytes(b"b" * 64)  # the same size; stamps a clock tick apart may coincide, so move mtime on
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert sha256_file_once(path) == hashlib.sha256(b"b" * 64).hexdigest() != first
    other = tmp_path / "other.bin"
    other.write_bytes(b"c" * 64)
    os.replace(other, path)  # another inode at the same path
    assert sha256_file_once(path) == hashlib.sha256(b"c" * 64).hexdigest()
    assert len(calls) == 2


def test_a_file_that_changed_while_it_was_read_is_not_remembered(tmp_path, monkeypatch):
    path = tmp_path / "weights.bin"
    path.write_bytes(b"a" * 64)
    real = checksums._sha256_handle
    calls: list[int] = []

    def growing(handle, chunk=1 << 20):
        calls.append(1)
        digest = real(handle, chunk)
        if len(calls) == 1:
            with open(path, "ab") as more:  # written while the first hash ran
                more.write(b"a")
        return digest

    monkeypatch.setattr(checksums, "_sha256_handle", growing)
    sha256_file_once(path)
    assert sha256_file_once(path) == hashlib.sha256(b"a" * 65).hexdigest()
    assert len(calls) == 2
