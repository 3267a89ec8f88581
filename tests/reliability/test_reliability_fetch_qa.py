"""Writers of `datasets fetch` (zip extraction) and of the QA answer cache: an untrusted archive member or a
bad `--qa-cache` is one clear error that loses nothing, and a damaged cache entry is a cache miss."""

import json
import os
import zipfile

import pytest

from helpers import EXAMPLES, logged_messages
from gpu_tigrag.cli import main
from gpu_tigrag.errors import TigragError
from gpu_tigrag.evaluate.fetch import DOWNLOAD_KIND, Source, fetch
from gpu_tigrag.evaluate.qa import ChatClient, QAConfig
from gpu_tigrag.outputs import FOLDER_RECORD

pytestmark = [pytest.mark.reliability]


def zip_registry(tmp_path, members):
    """A one-archive registry `ds` served from a local zip (file://: no network) holding `members`."""
    archive = tmp_path / "served.zip"
    with zipfile.ZipFile(archive, "w") as handle:
        for name, data in members.items():
            handle.writestr(name, data)
    return {"ds": [Source(f"file://{archive}", "ds.zip", unzip=True)]}


def test_a_well_formed_zip_is_extracted_recorded_and_refetched(tmp_path):
    registry = zip_registry(tmp_path, {"ds/": "", "ds/corpus.jsonl": "{}\n", "ds/qrels/test.tsv": "q\td\t1\n"})
    folder = fetch("ds", tmp_path / "to", registry=registry)
    assert (folder / "ds" / "corpus.jsonl").read_text() == "{}\n"
    assert (folder / "ds" / "qrels" / "test.tsv").read_text() == "q\td\t1\n"
    record = json.loads((folder / FOLDER_RECORD).read_text())
    assert record["kind"] == DOWNLOAD_KIND and {"ds/corpus.jsonl", "ds/qrels/test.tsv"} <= set(record["files"])
    assert not [p for p in folder.rglob("*") if ".tmp-" in p.name]
    fetch("ds", tmp_path / "to", registry=registry)  # its own files: replaced without complaint
    (folder / "ds" / "corpus.jsonl").write_text("edited by the user\n")
    with pytest.raises(TigragError, match="was not written there by gpu_tigrag"):
        fetch("ds", tmp_path / "to", registry=registry)
    assert (folder / "ds" / "corpus.jsonl").read_text() == "edited by the user\n"


@pytest.mark.parametrize("member, written_by_zipfile", [("../mine.txt", "mine.txt"), ("/abs/mine.txt", "abs/mine.txt"),
                                                        ("a\\..\\mine.txt", None), ("./mine.txt", "mine.txt")])
def test_a_member_name_that_zipfile_would_rewrite_is_refused(tmp_path, member, written_by_zipfile):
    """`extractall` writes '../x' as x and '/abs/x' as abs/x, where a user's file was never checked."""
    registry = zip_registry(tmp_path, {member: "from the zip\n", "corpus.jsonl": "{}\n"})
    folder = tmp_path / "to" / "ds"
    mine = folder / (written_by_zipfile or "mine.txt")
    mine.parent.mkdir(parents=True)
    mine.write_text("USER DATA\n")
    with pytest.raises(TigragError) as caught:
        fetch("ds", tmp_path / "to", registry=registry)
    message = str(caught.value)
    assert "ds.zip" in message and repr(member) in message and "\n" not in message, message
    assert mine.read_text() == "USER DATA\n" and not (folder / "corpus.jsonl").exists()


def test_a_member_under_a_linked_folder_is_refused(tmp_path):
    registry = zip_registry(tmp_path, {"sub/corpus.jsonl": "from the zip\n"})
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "to" / "ds").mkdir(parents=True)
    (tmp_path / "to" / "ds" / "sub").symlink_to(elsewhere)
    with pytest.raises(TigragError, match=r"member 'sub/corpus.jsonl' would be written under .*sub, which is a "
                                          "symbolic link"):
        fetch("ds", tmp_path / "to", registry=registry)
    assert list(elsewhere.iterdir()) == [] and os.readlink(tmp_path / "to" / "ds" / "sub") == str(elsewhere)


def test_a_member_under_a_users_file_is_one_clear_error(tmp_path, capsys):
    registry = zip_registry(tmp_path, {"sub/x.jsonl": "from the zip\n"})
    (tmp_path / "to" / "ds").mkdir(parents=True)
    (tmp_path / "to" / "ds" / "sub").write_text("USER FILE\n")
    with pytest.raises(TigragError, match=r"member 'sub/x.jsonl' would be written under .*sub, which is not a folder"):
        fetch("ds", tmp_path / "to", registry=registry)
    assert (tmp_path / "to" / "ds" / "sub").read_text() == "USER FILE\n"


def test_a_member_named_like_the_fetchs_own_files_is_refused(tmp_path):
    registry = zip_registry(tmp_path, {"SHA256SUMS": "0" * 64 + "  ds.zip\n"})
    with pytest.raises(TigragError, match="names a file that `tigrag datasets fetch` itself writes"):
        fetch("ds", tmp_path / "to", registry=registry)
    assert not (tmp_path / "to" / "ds" / "SHA256SUMS").exists()


# --- the QA answer cache -------------------------------------------------------------------------------------


def fake_client(cache_dir, answers=None):
    """A ChatClient whose endpoint is a stub (no network); `answers` collects the prompts it was asked."""
    client = ChatClient(QAConfig(endpoint="http://qa.invalid/v1", model="toy", cache_dir=cache_dir))
    asked = [] if answers is None else answers
    client._request = lambda prompt: asked.append(prompt) or f"Answer: {prompt}"
    return client, asked


@pytest.mark.parametrize("damage", [b"{not json", b"\xff\xfe", b'{"text": 3}', b"[]"])
def test_a_damaged_cache_entry_is_a_miss_and_is_replaced(tmp_path, damage):
    cache = tmp_path / "cache"
    client, asked = fake_client(cache)
    entry = client.cache_path("p")
    entry.write_bytes(damage)
    (cache / "notes.json").write_text("{not json either")  # not an entry of the cache: never touched
    with logged_messages("gpu_tigrag.evaluate.qa") as messages:
        answer = client.complete("p")
    assert answer["cached"] is False and answer["text"] == "Answer: p" and asked == ["p"]
    assert any("QA cache entry" in m and "replacing it" in m for m in messages), messages
    assert json.loads(entry.read_text())["text"] == "Answer: p"
    assert (cache / "notes.json").read_text() == "{not json either"
    assert client.complete("p")["cached"] is True and asked == ["p"]


@pytest.mark.parametrize("kind", ["link", "fifo"])
def test_a_link_or_fifo_at_an_entry_is_refused_before_asking(tmp_path, kind):
    cache = tmp_path / "cache"
    client, asked = fake_client(cache)
    entry = client.cache_path("p")
    foreign = tmp_path / "foreign.json"
    foreign.write_text("{not json")
    entry.symlink_to(foreign) if kind == "link" else os.mkfifo(entry)
    with pytest.raises(TigragError, match=f"{entry.name}: exists and is a"):
        client.complete("p")
    assert asked == [] and foreign.read_text() == "{not json"
    assert entry.is_symlink() if kind == "link" else not entry.is_file()


def test_a_cache_folder_that_is_a_file_is_a_clear_error(tmp_path):
    blocker = tmp_path / "F"
    blocker.write_text("x\n")
    with pytest.raises(TigragError, match="exists and is not a folder"):
        ChatClient(QAConfig(endpoint="http://qa.invalid/v1", model="toy", cache_dir=blocker))
    assert blocker.read_text() == "x\n"


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("qa") / "idx"
    assert main(["index", str(EXAMPLES / "corpus.json"), "-o", str(folder), "--set", "encoder.model=hashing:64",
                 "--set", "entities.model=capitalized", "-q"]) == 0
    return folder


@pytest.mark.parametrize("place", ["file", "link", "index"])
def test_a_bad_qa_cache_is_refused_before_any_retrieval(index_dir, tmp_path, monkeypatch, capsys, place):
    import gpu_tigrag.evaluate.experiment as experiment

    def no_retrieval(*args, **kwargs):
        raise AssertionError("retrieval started before --qa-cache was checked")

    monkeypatch.setattr(experiment, "run_experiment", no_retrieval)
    (tmp_path / "elsewhere").mkdir()
    cache = {"file": tmp_path / "F", "link": tmp_path / "L", "index": index_dir / "qa_cache"}[place]
    if place == "file":
        cache.write_text("x\n")
    elif place == "link":
        cache.symlink_to(tmp_path / "elsewhere")
    code = main(["eval", str(index_dir), str(EXAMPLES / "questions.json"), "--systems", "TIGRAG", "--qa-endpoint",
                 "http://qa.invalid/v1", "--qa-model", "m", "--qa-cache", str(cache), "-q"])
    err = capsys.readouterr().err
    expected = {"file": "exists and is not a folder", "link": "is a symbolic link", "index": "inside the index"}
    assert code == 2 and f"--qa-cache {cache}" in err and expected[place] in err, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert list((tmp_path / "elsewhere").iterdir()) == [] and not (index_dir / "qa_cache").exists()
    if place == "file":
        assert cache.read_text() == "x\n"
