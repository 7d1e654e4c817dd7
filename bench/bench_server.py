"""The notebook over real HTTP: brain_remember, brain_search, brain_get and brain_list at 10k and 100k notes
beside a no-op tool on the same server and session (the protocol floor), interleaved so all of them see the same
conditions. The client runs in its own process, as agents do, so it does not share the server's interpreter.
Prints a table per size.

With --common the notebook is of a team's everyday words (122 of them: each in about a quarter of the notes, as
"deploy", "api" or "test" are in a real team's) and the searches are of one to three of them, each through MCP and
as a typed REST search (`GET /api/notes?q=`), beside `/api/health` over the same keep-alive connection.

    python bench/bench_server.py [--notes 10000,100000] [--calls 300] [--common]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import Implementation

from hivenote.server.core.search import refresh_note_index
from hivenote.server.settings import Settings
from hivenote.server.storage.store import Store
from hivenote.server.web.app import create_app
from hivenote.server.web.serve import ServerThread, bind

if TYPE_CHECKING:  # mypy resolves bench/ from the project root; run as a script, this folder is on sys.path
    from bench.bench_core import WORDS, note_fields, write_log
    from tests.support.notes import COMMON
else:
    from bench_core import WORDS, note_fields, write_log

    from tests.support.notes import COMMON


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


TOOLS = ("noop", "brain_remember", "brain_search", "brain_get", "brain_list")
COMMON_CALLS = ("noop", "brain_search", "REST search", "/api/health")


async def measure(url: str, token: str, calls: int, notes: int, common: bool) -> dict[str, list[float]]:
    rnd = random.Random(11)
    times: dict[str, list[float]] = {name: [] for name in (COMMON_CALLS if common else TOOLS)}
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
        client = Client(
            streamable_http_client(f"{url}/mcp", http_client=http),
            client_info=Implementation(name="bench", version="1"),
            mode="legacy",
        )
        async with client:
            for _ in range(20):  # warm-up
                await client.call_tool("noop", {})
            if common:
                for _ in range(calls):
                    words = " ".join(rnd.sample(COMMON, rnd.randint(1, 3)))
                    for name in COMMON_CALLS:
                        t = time.perf_counter()
                        if name == "noop":
                            assert not (await client.call_tool("noop", {})).is_error
                        elif name == "brain_search":
                            assert not (await client.call_tool("brain_search", {"query": words})).is_error
                        else:
                            typed = name == "REST search"
                            answer = await http.get(
                                f"{url}{'/api/notes' if typed else name}", params={"q": words} if typed else None
                            )
                            assert answer.status_code == 200, answer.text
                        times[name].append(time.perf_counter() - t)
                return times
            for _ in range(calls):
                fields = note_fields(rnd)
                for name, args in (
                    ("noop", {}),
                    ("brain_remember", dict(fields)),
                    ("brain_search", {"query": rnd.choice(WORDS)}),
                    ("brain_get", {"id": f"01SEED{rnd.randint(1, notes):020d}"}),
                    ("brain_list", {}),
                ):
                    t = time.perf_counter()
                    result = await client.call_tool(name, args)
                    times[name].append(time.perf_counter() - t)
                    assert not result.is_error, result
    return times


def run(notes: int, calls: int, common: bool = False) -> dict[str, list[float]]:
    """Seconds per call of each tool, on a fresh server over `notes` notes."""
    data = Path(tempfile.mkdtemp(prefix="hivenote-bench-http-")) / "data"
    write_log(data, notes, words=COMMON) if common else write_log(data, notes)
    sock = bind("127.0.0.1", 0)
    settings = replace(Settings(data_dir=data), port=sock.getsockname()[1])
    with Store(data) as store:
        refresh_note_index(store.state)  # as the server's warm-up does shortly after start
        app = create_app(settings, store)

        def noop() -> str:
            """Does nothing: the cost of one MCP tool call over HTTP on this server."""
            return "ok"

        app.state.notebook_mcp.add_tool(noop, name="noop")
        server = ServerThread(app, settings, sock)
        server.start()
        while not server.started:
            time.sleep(0.01)
        try:
            token = app.state.services.tokens.default()
            url = f"http://127.0.0.1:{server.port}"
            client = [sys.executable, __file__, "--calls", str(calls), "--notes", str(notes), "--client", url, token]
            client += ["--common"] if common else []
            times: dict[str, list[float]] = json.loads(
                subprocess.run(client, capture_output=True, encoding="utf-8", check=True).stdout
            )
        finally:
            server.stop()
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--notes", default="10000,100000")
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--common", action="store_true", help="a notebook of common words, searched for them")
    parser.add_argument("--client", nargs=2, metavar=("URL", "TOKEN"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:  # the measuring side, in its own process
        times = anyio.run(measure, args.client[0], args.client[1], args.calls, int(args.notes), args.common)
        print(json.dumps(times))
        return
    for notes in (int(n) for n in args.notes.split(",")):
        times = run(notes, args.calls, args.common)
        floor50, floor99 = pct(times["noop"], 0.5), pct(times["noop"], 0.99)
        health = pct(times["/api/health"], 0.5) if args.common else 0.0
        print(f"MCP over HTTP at {notes:,} notes, {args.calls} calls each, interleaved in one session (ms)")
        print(f"{'tool':<16}{'p50':>8}{'p99':>8}{'p50 / no-op':>13}{'p99 / no-op':>13}", end="")
        print(f"{'p50 / health':>14}" if args.common else "")
        for name, values in times.items():
            p50, p99 = pct(values, 0.5), pct(values, 0.99)
            print(f"{name:<16}{p50 * 1e3:>8.2f}{p99 * 1e3:>8.2f}{p50 / floor50:>12.2f}x{p99 / floor99:>12.2f}x", end="")
            print(f"{p50 / health:>13.2f}x" if args.common else "")
        print()


if __name__ == "__main__":
    main()
