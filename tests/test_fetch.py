"""Dataset download against a local HTTP server (with Range support) serving test files."""

import hashlib
import http.server
import threading
from functools import partial

import pytest

from gpu_tigrag.errors import TigragError
from gpu_tigrag.evaluate.fetch import Source, fetch


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
    (out / "toy" / "data.json.part").write_bytes(content[:1000])  # an interrupted earlier download
    with caplog.at_level("INFO", logger="gpu_tigrag.evaluate.fetch"):
        folder = fetch("toy", out, registry=registry)
    assert f"data.json: sha256 {digest} verified" in caplog.messages
    assert (folder / "data.json").read_bytes() == content
    assert RangeHandler.ranges == ["bytes=1000-"]  # resumed, not restarted
    assert digest in (folder / "SHA256SUMS").read_text()
    assert sorted(p.name for p in folder.iterdir()) == ["SHA256SUMS", "data.json"]  # no .part, no temporary
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
    with pytest.raises(TigragError, match="does not match"):
        fetch("toy", tmp_path / "out", registry=registry)


def test_offline_gives_a_clear_message(tmp_path):
    registry = {"toy": [Source("http://127.0.0.1:9/data.json", "data.json")]}
    with pytest.raises(TigragError, match="cannot download .* --data-dir"):
        fetch("toy", tmp_path / "out", registry=registry)
    with pytest.raises(TigragError, match="unknown dataset"):
        fetch("nope", tmp_path / "out", registry=registry)
