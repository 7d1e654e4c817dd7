"""Floods from teammates' tokens against a real `hivenote serve` (issue 33 finding 3), while the owner's agent and
another teammate each ask something every half second on a new connection. Not a test: prints what the probes saw
(failures, p50, p99, max) and what the floods were told (tests/security/test_credential_budgets.py runs the same
driver, tests/support/flood.py, smaller, and asserts).

    python bench/bench_flood.py [--slow-bodies 1500] [--streams 1000] [--sessions 1500] [--seconds 20]

Three waves, each measured apart: slow bodies from one token (one byte every 2 s); SSE streams from three tokens;
idle MCP sessions from one token. The server runs with its default bound on connections (1,000).
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

if TYPE_CHECKING:  # run as a script, the project root is put on sys.path
    from hivenote.server.tokens import Tokens
    from tests.support.flood import Held, Probe, drip, probe, serving, sessions, slow_bodies, sort_out, streams
else:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from hivenote.server.tokens import Tokens
    from tests.support.flood import Held, Probe, drip, probe, serving, sessions, slow_bodies, sort_out, streams


def line(name: str, seen: Probe) -> str:
    ms = [t * 1e3 for t in seen.times]
    return (
        f"  {name:<6} {len(seen.failures):>3} of {len(seen.times):>3} failed   p50 {seen.percentile(0.5) * 1e3:7.1f} ms"
        f"   p99 {seen.percentile(0.99) * 1e3:7.1f} ms   max {max(ms or [0]):7.1f} ms"
    )


def report(title: str, held: list[Held], probes: dict[str, Probe]) -> None:
    kept = sum(len(h.kept) for h in held)
    print(f"{title}: the flood holds {kept} connections (at the end of the probes)")
    for h in held:
        for kind, count in h.refused.most_common():
            print(f"  refused {count} x {kind}: {h.said.get(kind, '')[:160]}")
    for name, seen in probes.items():
        print(line(name, seen))
        for failure in seen.failures[:3]:
            print(f"    {failure[:200]}")
        slow = [f"{i * 0.5:.1f} s: {t:.2f} s" for i, t in enumerate(seen.times) if t > 1.0]
        if slow:
            print(f"    over 1 s (when, into the wave: how long): {', '.join(slow[:10])}")


async def wave(port: int, tokens: dict[str, str], seconds: float, make: Callable[[], Awaitable[list[Held]]]) -> None:
    began = time.monotonic()
    held = await make()
    print(f"{make.__name__.replace('_', ' ')}: the flood took {time.monotonic() - began:.1f} s to open")
    stop = threading.Event()
    seen: dict[str, Probe] = {}

    def probe_as(name: str) -> None:
        seen[name] = probe(port, tokens[name], seconds)

    async with anyio.create_task_group() as tasks:
        for h in held:
            tasks.start_soon(drip, h, stop)

        async def probes() -> None:
            async with anyio.create_task_group() as both:
                both.start_soon(anyio.to_thread.run_sync, probe_as, "owner")
                both.start_soon(anyio.to_thread.run_sync, probe_as, "bob")
            stop.set()

        tasks.start_soon(probes)
    for h in held:
        await sort_out(h)
    report(make.__name__.replace("_", " "), held, {name: seen[name] for name in ("owner", "bob")})
    for h in held:
        h.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slow-bodies", type=int, default=1500)
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--sessions", type=int, default=1500)
    parser.add_argument("--seconds", type=float, default=20, help="probing per wave (slow bodies end after 30 s)")
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, 8192)), hard))
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        store = Tokens(data / "tokens.json")
        tokens = {"owner": store.default(), **{name: store.add(name) for name in ("bob", "mallory", "eve", "trent")}}
        with serving(data, Path(tmp) / "serve.log") as (_, port):

            async def slow_bodies_from_one_token() -> list[Held]:
                return [await slow_bodies(port, tokens["mallory"], args.slow_bodies)]

            async def sse_streams_from_three_tokens() -> list[Held]:
                each = args.streams // 3
                found = await asyncio.gather(*(streams(port, tokens[n], each) for n in ("mallory", "eve", "trent")))
                return list(found)

            async def mcp_sessions_from_one_token() -> list[Held]:
                return [await sessions(port, tokens["mallory"], args.sessions)]

            for make in (slow_bodies_from_one_token, sse_streams_from_three_tokens, mcp_sessions_from_one_token):
                asyncio.run(wave(port, tokens, args.seconds, make))


if __name__ == "__main__":
    main()
