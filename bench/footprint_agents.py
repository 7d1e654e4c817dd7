"""What a day of agents leaves in `hivenote serve` (meaning on): RSS after agents that only read come and go, and
after notes written over REST once the meaning index has embedded them. Variants run interleaved, so a before/after
comparison sees the same machine load; RSS of the same run varies by several MB (what a freed cache hands back
depends on what was allocated around it), so compare medians of several runs.

    python bench/footprint_agents.py reads [--rounds 600] [--notes 3000]
    python bench/footprint_agents.py writes [--writes 3000] [--runs 5] [--variant before=<PYTHONPATH>] ...

`reads`: a notebook of `--notes` notes, then rounds of 3 MCP agents (each its own session: search, list, leave);
prints RSS every 100 rounds. `writes`: an empty notebook, `--writes` notes of 45 random words from the model's
vocabulary written over REST, RSS once the server is idle again (the meaning index
has embedded them); a variant is `name=PYTHONPATH` under which
`hivenote.server` imports (e.g. a folder holding `hivenote/server` linked to an older checkout's `server/`).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from hivenote.server.tokens import Tokens

if TYPE_CHECKING:  # run as a script, the project root is put on sys.path
    from bench.proc import rss_mb, settle
    from tests.support.live import free_port, health, mcp_session
    from tests.support.notes import write_log
else:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from bench.proc import rss_mb, settle
    from tests.support.live import free_port, health, mcp_session
    from tests.support.notes import write_log

AGENTS = ("cursor", "claude-code", "codex")


@contextmanager
def serve(data: Path, pythonpath: str | None = None) -> Iterator[tuple[subprocess.Popen[bytes], int, str]]:
    port = free_port()
    env = dict(os.environ, **({"PYTHONPATH": pythonpath} if pythonpath else {}))
    argv = [sys.executable, "-m", "hivenote.desktop", "--data-dir", str(data), "serve", "--port", str(port)]
    process = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while health(port) != 200:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the server did not start")
            time.sleep(0.05)
        yield process, port, Tokens(data / "tokens.json").default()
    finally:
        process.terminate()
        process.wait(30)


def get(port: int, token: str, path: str) -> dict[str, object]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=60) as response:
        answer = json.loads(response.read())
    assert isinstance(answer, dict)
    return answer


async def visit(port: int, token: str) -> None:
    async def one(name: str) -> None:
        async with mcp_session(f"http://127.0.0.1:{port}/mcp", token, name) as client:
            await client.call_tool("brain_search", {"query": "deploy"})
            await client.call_tool("brain_list", {})

    async with anyio.create_task_group() as tasks:
        for name in AGENTS:
            tasks.start_soon(one, name)


def reads(rounds: int, notes: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        write_log(data, notes)
        with serve(data) as (process, port, token):
            for n in range(rounds + 1):
                anyio.run(visit, port, token)
                if n % 100 == 0:
                    print(f"round {n:>5}  RSS {rss_mb(process.pid):6.1f} MB", flush=True)


def writes(count: int, pythonpath: str | None) -> float:
    from hivenote.server.meaning.model import load_default

    vocabulary = load_default().tokenizer.get_vocab()
    words = sorted(t[1:] for t in vocabulary if t.startswith("▁") and t[1:].isalpha())
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as tmp, serve(Path(tmp) / "data", pythonpath) as (process, port, token):
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        for _ in range(count):
            note = {
                "kind": "fact",
                "title": " ".join(rng.choices(words, k=5)),
                "body": " ".join(rng.choices(words, k=40)),
            }
            request = urllib.request.Request(f"http://127.0.0.1:{port}/api/notes", json.dumps(note).encode(), headers)
            urllib.request.urlopen(request, timeout=60).read()
        settle(process.pid)  # the meaning index embeds the notes in the background
        get(port, token, "/api/notes?q=crash")
        return rss_mb(process.pid)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=("reads", "writes"))
    parser.add_argument("--rounds", type=int, default=600)
    parser.add_argument("--notes", type=int, default=3000)
    parser.add_argument("--writes", type=int, default=3000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--variant", action="append", default=[], help="name=PYTHONPATH (repeatable)")
    args = parser.parse_args()
    if args.mode == "reads":
        reads(args.rounds, args.notes)
        return
    variants = [tuple(v.split("=", 1)) for v in args.variant] or [("this build", "")]
    got: dict[str, list[float]] = {name: [] for name, _ in variants}
    for _ in range(args.runs):
        for name, path in variants:
            got[name].append(writes(args.writes, path or None))
            print(f"{name:<12} RSS {got[name][-1]:6.1f} MB", flush=True)
    for name, values in got.items():
        print(f"{name:<12} median {statistics.median(values):6.1f} MB  ({', '.join(f'{v:.1f}' for v in values)})")


if __name__ == "__main__":
    main()
