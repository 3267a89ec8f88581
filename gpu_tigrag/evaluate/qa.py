"""Question answering with an LLM behind an OpenAI-compatible chat endpoint (vLLM, Ollama,
llama.cpp server, ...), with the prompt of the paper's Figure 2, concurrent requests,
retries with back-off, a request-rate limit, and an on-disk answer cache keyed by
(model, prompt hash) so that an interrupted run resumes where it stopped. Scored with
SQuAD-style exact match and token F1.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import string
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..atomic import atomic_write_json, describe_os_error
from ..errors import OutputError, TigragError
from ..outputs import OutputFolder, check_replaceable

log = logging.getLogger(__name__)

#: what the answer cache folder is (`outputs.py`): it holds only `<sha256>.json` entries the client names
QA_CACHE_KIND = "a QA answer cache"

PROMPT_TEMPLATE = """You are a strict information extraction assistant.
Examine the context to find the exact answer.
You MUST follow this format:
Thought: <your step-by-step reasoning>
Answer: <the concise answer only>
If the answer is in the text, you must find it. Do not chat.
Example:
Context:
Wikipedia Title: The Last Horse
The Last Horse (Spanish: El último caballo) is a 1950 Spanish comedy film directed by Edgar Neville starring Fernando Fernán Gómez.
Question: Who directed The Last Horse?
Thought: The text states that the film 'The Last Horse' was directed by Edgar Neville.
Answer: Edgar Neville.
---

Context: {context}
Question: {question}
Thought:
Answer:"""


@dataclass(frozen=True)
class QAConfig:
    endpoint: str  # base URL, e.g. http://localhost:8000/v1
    model: str
    cache_dir: Path
    api_key: str | None = None
    concurrency: int = 8
    max_retries: int = 5
    requests_per_second: float = 0.0  # 0: no limit
    timeout: float = 120.0
    temperature: float = 0.0
    max_tokens: int = 256
    backoff: float = 1.0  # seconds before the first retry, doubled each time


def build_prompt(question: str, contexts: Sequence[tuple[str, str]]) -> str:
    """Figure 2's prompt; each context chunk as 'Wikipedia Title: <title>\\n<text>'."""
    context = "\n\n".join(f"Wikipedia Title: {title}\n{text}" for title, text in contexts)
    return PROMPT_TEMPLATE.format(context=context, question=question)


def extract_answer(completion: str) -> str:
    """The text after the last 'Answer:' (the whole completion if there is none)."""
    matches = re.findall(r"Answer:\s*(.*)", completion)
    answer = matches[-1] if matches else completion
    return answer.strip().splitlines()[0].strip() if answer.strip() else ""


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lower case, no punctuation, no articles, single spaces."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def exact_match(prediction: str, gold: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(gold))


def token_f1(prediction: str, gold: str) -> float:
    pred, ref = normalize_answer(prediction).split(), normalize_answer(gold).split()
    common = Counter(pred) & Counter(ref)
    same = sum(common.values())
    if not pred or not ref:
        return float(pred == ref)
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(ref)
    return 2 * precision * recall / (precision + recall)


class RateLimiter:
    """At most `rate` request starts per second across threads (0 = unlimited)."""

    def __init__(self, rate: float):
        self.interval = 1.0 / rate if rate > 0 else 0.0
        self.lock = threading.Lock()
        self.next_start = 0.0

    def wait(self) -> None:
        if not self.interval:
            return
        with self.lock:
            now = time.monotonic()
            start = max(now, self.next_start)
            self.next_start = start + self.interval
        time.sleep(max(0.0, start - now))


class ChatClient:
    """A minimal chat-completions client with retries, a rate limit and a disk cache."""

    RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}

    def __init__(self, config: QAConfig):
        self.config = config
        self.limiter = RateLimiter(config.requests_per_second)
        check_cache_dir(config.cache_dir, f"QA cache {config.cache_dir}")
        try:
            config.cache_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OutputError(f"QA cache {config.cache_dir}: cannot create it ({describe_os_error(exc)})") from None
        self.requests = 0  # HTTP requests actually sent (retries included)
        self._count = threading.Lock()

    def cache_path(self, prompt: str) -> Path:
        key = hashlib.sha256(f"{self.config.model}\0{prompt}".encode()).hexdigest()
        return self.config.cache_dir / f"{key}.json"

    def complete(self, prompt: str) -> dict[str, Any]:
        """{'text', 'latency', 'cached'} for one prompt, from the cache or the endpoint."""
        path = self.cache_path(prompt)
        check_replaceable(path)  # a link, FIFO or folder at an entry's name is never read nor replaced
        record = _read_entry(path) if path.is_file() else None
        if record is not None:
            return {"text": record["text"], "latency": record["latency"], "cached": True}
        start = time.perf_counter()
        text = self._request(prompt)
        latency = time.perf_counter() - start
        # atomic: a killed run never leaves a half answer (a full disk is an OutputError naming the file)
        atomic_write_json(path, {"model": self.config.model, "text": text, "latency": latency})
        return {"text": text, "latency": latency, "cached": False}

    def _request(self, prompt: str) -> str:
        cfg = self.config
        body = json.dumps({"model": cfg.model, "messages": [{"role": "user", "content": prompt}],
                           "temperature": cfg.temperature, "max_tokens": cfg.max_tokens}).encode()
        headers = {"Content-Type": "application/json"}
        if cfg.api_key:
            headers["Authorization"] = f"Bearer {cfg.api_key}"
        url = cfg.endpoint.rstrip("/") + "/chat/completions"
        delay = cfg.backoff
        for attempt in range(cfg.max_retries + 1):
            self.limiter.wait()
            with self._count:
                self.requests += 1
            try:
                request = urllib.request.Request(url, data=body, headers=headers, method="POST")
                with urllib.request.urlopen(request, timeout=cfg.timeout) as response:
                    payload = json.loads(response.read().decode("utf-8"))
                return payload["choices"][0]["message"]["content"] or ""
            except urllib.error.HTTPError as exc:
                if exc.code not in self.RETRY_STATUS or attempt == cfg.max_retries:
                    raise TigragError(f"{url}: HTTP {exc.code} {exc.reason}") from None
            except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
                if attempt == cfg.max_retries:
                    raise TigragError(f"{url}: no answer after {cfg.max_retries + 1} tries ({exc})") from None
            except (KeyError, IndexError, json.JSONDecodeError) as exc:
                raise TigragError(f"{url}: not a chat-completions response ({exc})") from None
            time.sleep(delay)
            delay *= 2
        raise AssertionError("unreachable")

    def complete_all(self, prompts: Sequence[str]) -> list[dict[str, Any]]:
        with ThreadPoolExecutor(max_workers=max(1, self.config.concurrency)) as pool:
            return list(pool.map(self.complete, prompts))


def check_cache_dir(folder: Path, what: str) -> None:
    """Refuse (TigragError, before any work) an answer cache folder that is a link, a file, or inside an index."""
    OutputFolder(folder, QA_CACHE_KIND, what).check_folder()


def _read_entry(path: Path) -> dict[str, Any] | None:
    """A cached answer {'text', 'latency'}; None (a cache miss, logged) when the entry cannot be read or is not
    one: the entry is then asked again and replaced atomically (its name is the cache's own, `cache_path`)."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(record, dict) and isinstance(record.get("text"), str) \
                and isinstance(record.get("latency"), (int, float)):
            return record
        why = "not an answer record"
    except (OSError, ValueError) as exc:
        why = describe_os_error(exc) if isinstance(exc, OSError) else f"not JSON: {exc}"
    log.warning("QA cache entry %s is unreadable (%s); asking again and replacing it", path, why)
    return None


def run_qa(config: QAConfig, index, dataset, runs: dict[str, Any], beta: int) -> dict[str, Any]:
    """EM / F1 / latency for NoRAG and for each retrieval system's top-β context."""
    client = ChatClient(config)
    contexts: dict[str, list[list[tuple[str, str]]]] = {"NoRAG": [[] for _ in dataset.queries]}
    for name, run in runs.items():
        contexts[name] = [[(index.chunk_title(c), index.chunk_texts[c]) for c in ids[:beta]] for ids in run.chunk_ids]
    out: dict[str, Any] = {"model": config.model, "endpoint": config.endpoint, "systems": {}}
    for name, ctx in contexts.items():
        prompts = [build_prompt(q.text, c) for q, c in zip(dataset.queries, ctx)]
        answers = client.complete_all(prompts)
        predictions = [extract_answer(a["text"]) for a in answers]
        golds = [q.answer for q in dataset.queries]
        latencies = [a["latency"] for a in answers]
        out["systems"][name] = {
            "em": float(np.mean([exact_match(p, g) for p, g in zip(predictions, golds)])),
            "f1": float(np.mean([token_f1(p, g) for p, g in zip(predictions, golds)])),
            "mean_latency_seconds": float(np.mean(latencies)),
            "latencies": latencies,
            "cached_answers": sum(a["cached"] for a in answers),
            "predictions": predictions,
        }
    out["http_requests"] = client.requests
    return out
