"""Dataset download against a local HTTP server (with Range support) serving test files."""

import hashlib
import http.server
import threading
from functools import partial

import pytest

from gpu_tigrag.errors import OutputError, TigragError
from gpu_tigrag.outputs import OutputFolder
from gpu_tigrag.evaluate.fetch import DOWNLOAD_KIND, Source, fetch


class RangeHandler(http.server.SimpleHTTPRequestHandler):
    ranges: list = []

    def log_message(self, *args):
        pass

    def do_GET(self):
        path = self.translate_path(self.path)
        try:
            data = open(path, "rb").read()
        except OSError:
            self.send_error(404)
            return
        header = self.headers.get("Range")
        RangeHandler.ranges.append(header)
        if header:
            start = int(header.split("=")[1].split("-")[0])
            if start >= len(data):
                self.send_error(416)
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            data = data[start:]
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture()
def server(tmp_path):
    served = tmp_path / "served"
    served.mkdir()
    (served / "data.json").write_bytes(b'[{"title": "A", "text": "alpha"}]' * 500)
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(RangeHandler, directory=str(served)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    RangeHandler.ranges = []
    yield f"http://127.0.0.1:{httpd.server_address[1]}", served
    httpd.shutdown()


def test_fetch_verifies_and_resumes(server, tmp_path, caplog):
    url, served = server
    content = (served / "data.json").read_bytes()
    digest = hashlib.sha256(content).hexdigest()
    registry = {"toy": [Source(f"{url}/data.json", "data.json", sha256=digest)]}
    out = tmp_path / "out"
    (out / "toy").mkdir(parents=True)
    (out / "toy" / "data.json.part").write_bytes(content[:1000])  # an interrupted earlier download: its record
    record = OutputFolder(out / "toy", DOWNLOAD_KIND, "--to")  # says the engine started it (as fetch records it)
    record.files["data.json.part"] = {"partial": True}
    record.record([])
    with caplog.at_level("INFO", logger="gpu_tigrag.evaluate.fetch"):
        folder = fetch("toy", out, registry=registry)
    assert f"data.json: sha256 {digest} verified" in caplog.messages
    assert (folder / "data.json").read_bytes() == content
    assert RangeHandler.ranges == ["bytes=1000-"]  # resumed, not restarted
    assert digest in (folder / "SHA256SUMS").read_text()
    assert sorted(p.name for p in folder.iterdir()) == [".tigrag-outputs.json", "SHA256SUMS", "data.json"]  # no .part
    fetch("toy", out, registry=registry)  # already there: verified, nothing fetched
    assert RangeHandler.ranges == ["bytes=1000-"]


def test_checksum_mismatch_discards_download(server, tmp_path):
    url, _ = server
    registry = {"toy": [Source(f"{url}/data.json", "data.json", sha256="0" * 64)]}
    with pytest.raises(TigragError, match="does not match"):
        fetch("toy", tmp_path / "out", registry=registry)
    assert not (tmp_path / "out" / "toy" / "data.json").exists()


def test_first_download_records_checksum_and_later_ones_check_it(server, tmp_path):
    url, served = server
    registry = {"toy": [Source(f"{url}/data.json", "data.json")]}
    folder = fetch("toy", tmp_path / "out", registry=registry)
    (folder / "data.json").write_bytes(b"tampered")
    with pytest.raises(TigragError, match="changed since"):
        fetch("toy", tmp_path / "out", registry=registry)
    assert (folder / "data.json").read_bytes() == b"tampered"


@pytest.mark.parametrize("name", ["data.json.part", "SHA256SUMS", "data.json"])
def test_fetch_never_replaces_a_file_it_did_not_write(server, tmp_path, name):
    """Issue 30: a user's file in the dataset folder (a .part, SHA256SUMS, the data file itself with other
    bytes) is refused in one line before any download, and left as it was."""
    url, _ = server
    registry = {"toy": [Source(f"{url}/data.json", "data.json")]}
    folder = tmp_path / "out" / "toy"
    folder.mkdir(parents=True)
    (folder / name).write_bytes(b"mine")
    RangeHandler.ranges = []
    with pytest.raises(TigragError, match="was not written there by gpu_tigrag"):
        fetch("toy", tmp_path / "out", registry=registry)
    assert (folder / name).read_bytes() == b"mine" and sorted(p.name for p in folder.iterdir()) == [name]


def test_offline_gives_a_clear_message(tmp_path):
    registry = {"toy": [Source("http://127.0.0.1:9/data.json", "data.json")]}
    with pytest.raises(TigragError, match="cannot download .* --data-dir"):
        fetch("toy", tmp_path / "out", registry=registry)
    with pytest.raises(TigragError, match="unknown dataset"):
        fetch("nope", tmp_path / "out", registry=registry)


def test_a_full_disk_during_a_download_is_not_called_offline_and_the_rerun_resumes(server, tmp_path, monkeypatch):
    import builtins
    import errno

    import gpu_tigrag.evaluate.fetch as fetch_module

    url, served = server
    content = (served / "data.json").read_bytes()
    registry = {"toy": [Source(f"{url}/data.json", "data.json", sha256=hashlib.sha256(content).hexdigest())]}
    real_open = builtins.open

    class FullDisk:
        def __init__(self, handle):
            self.handle = handle

        def write(self, data):  # half of the first block reaches the disk, then it is full
            self.handle.write(data[: len(data) // 2])
            raise OSError(errno.ENOSPC, "No space left on device")

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.handle.close()

    def open_on_a_full_disk(file, mode="r", *args, **kwargs):
        handle = real_open(file, mode, *args, **kwargs)
        return FullDisk(handle) if str(file).endswith(".part") else handle

    monkeypatch.setattr(fetch_module, "open", open_on_a_full_disk, raising=False)
    with pytest.raises(OutputError, match=r"data\.json\.part: cannot write \(no space left on device\); a rerun "
                                          "resumes the download from there"):
        fetch("toy", tmp_path / "out", registry=registry)
    kept = (tmp_path / "out" / "toy" / "data.json.part").stat().st_size
    assert 0 < kept < len(content)
    monkeypatch.undo()
    RangeHandler.ranges = []
    folder = fetch("toy", tmp_path / "out", registry=registry)
    assert (folder / "data.json").read_bytes() == content
    assert RangeHandler.ranges == [f"bytes={kept}-"]  # resumed where the full disk stopped it
