"""The LLM client against a local server that speaks the chat-completions protocol."""

import http.server
import threading

import pytest

from helpers import ChatHandler
from gpu_tigrag.errors import TigragError
from gpu_tigrag.evaluate.qa import (ChatClient, QAConfig, build_prompt, exact_match, extract_answer, normalize_answer,
                                    token_f1)


@pytest.fixture()
def endpoint():
    ChatHandler.calls, ChatHandler.fail_first = 0, 0
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), ChatHandler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()


def config(endpoint, tmp_path, **kw):
    return QAConfig(endpoint=endpoint, model="toy", cache_dir=tmp_path / "cache", backoff=0.01, **kw)


def test_retries_then_answers_and_cache_resumes(endpoint, tmp_path):
    ChatHandler.fail_first = 2
    client = ChatClient(config(endpoint, tmp_path, concurrency=1))
    prompts = [build_prompt(f"q{i}?", [("T", "text")]) for i in range(4)]
    answers = client.complete_all(prompts)
    assert [extract_answer(a["text"]) for a in answers] == [f"The answer to q{i}?" for i in range(4)]
    assert client.requests == 6  # two 503s retried
    again = ChatClient(config(endpoint, tmp_path, concurrency=4))
    answers = again.complete_all(prompts + [build_prompt("new?", [])])
    assert again.requests == 1 and sum(a["cached"] for a in answers) == 4  # an interrupted run resumes


def test_gives_up_with_a_clear_error(endpoint, tmp_path):
    ChatHandler.fail_first = 100
    client = ChatClient(config(endpoint, tmp_path, max_retries=2))
    with pytest.raises(TigragError, match="HTTP 503"):
        client.complete("x")
    assert client.requests == 3


def test_rate_limit_spaces_requests(endpoint, tmp_path):
    import time

    client = ChatClient(config(endpoint, tmp_path, concurrency=4, requests_per_second=20))
    start = time.perf_counter()
    client.complete_all([f"p{i}" for i in range(6)])
    assert time.perf_counter() - start >= 5 / 20 - 0.01


def test_squad_normalisation_em_and_f1():
    assert normalize_answer("The  Edgar Neville.") == "edgar neville"
    assert exact_match("Edgar Neville.", "edgar neville") == 1.0
    assert token_f1("Edgar Neville Smith", "Edgar Neville") == pytest.approx(2 * (2 / 3) * 1 / (2 / 3 + 1))
    assert token_f1("", "x") == 0.0 and exact_match("Paris", "London") == 0.0
    assert extract_answer("Thought: t\nAnswer: Port of Spain\n") == "Port of Spain"
    prompt = build_prompt("Who?", [("The Last Horse", "A film.")])
    assert "Context: Wikipedia Title: The Last Horse\nA film.\nQuestion: Who?\nThought:\nAnswer:" in prompt
