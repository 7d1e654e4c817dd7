"""Floods from one credential against a real `hivenote serve` (issue 33 finding 3), and the probe that measures what
everyone else sees meanwhile: request bodies sent one byte every two seconds, MCP sessions each holding its SSE
stream open, plain sessions; the probe asks the server something every half second on a new connection, as an agent
starting a request does. tests/security/test_credential_budgets.py runs it small and asserts; bench/bench_flood.py
runs it full size and prints the figures."""

from __future__ import annotations

import asyncio
import contextlib
import json
import resource
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.live import PROTOCOL_VERSION, free_port, health, initialize
from tests.support.system import SERVE, needs
from tests.support.wait import wait_started

START_S = 60
DRIP_S = 2.0  # a slow body sends one byte this often
DEFAULT_PROTOCOL = PROTOCOL_VERSION


@dataclass
class Held:
    """What one part of a flood got: connections the server took and kept open, and what refused the rest."""

    kept: list[asyncio.StreamWriter] = field(default_factory=list)
    readers: list[asyncio.StreamReader] = field(default_factory=list)  # each kept connection's, in the same order
    refused: Counter[str] = field(default_factory=Counter)  # "429 too_many_streams", "closed", ...
    said: dict[str, str] = field(default_factory=dict)  # a refusal's first message, by kind

    def refuse(self, kind: str, message: str = "") -> None:
        self.refused[kind] += 1
        self.said.setdefault(kind, message)

    def close(self) -> None:
        for writer in self.kept:
            writer.close()
        self.kept.clear()
        self.readers.clear()


@dataclass
class Probe:
    """What a caller outside the flood saw: each request's time, and what went wrong."""

    times: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def percentile(self, q: float) -> float:
        ordered = sorted(self.times)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def _limit(open_files: int) -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, open_files))


@needs(SERVE)
@contextlib.contextmanager
def serving(data_dir: Path, log: Path, open_files: int | None = None) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """A real `hivenote serve` on 127.0.0.1 (its open-file limit set, which sets its bound on connections)."""
    port = free_port()
    argv = [sys.executable, "-m", "hivenote.desktop", "--data-dir", str(data_dir), "serve", "--port", str(port)]
    limit = None if open_files is None else (lambda: _limit(open_files))
    with log.open("ab") as sink:
        process = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT, preexec_fn=limit)
    try:
        wait_started(process, lambda: health(port) == 200, START_S, log)
        yield process, port
    finally:
        process.terminate()
        process.wait(30)


def _head(method: str, path: str, token: str, extra: dict[str, str], length: int | None = None) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", f"Authorization: Bearer {token}"]
    lines += [f"{k}: {v}" for k, v in extra.items()]
    if length is not None:
        lines.append(f"Content-Length: {length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


async def _read_head(reader: asyncio.StreamReader, seconds: float) -> tuple[int, dict[str, str]] | None:
    """The status and headers of an answer, or None when the server closed the connection first."""
    try:
        raw = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), seconds)
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    first, *rest = raw.decode("latin-1").split("\r\n")
    headers = {}
    for line in rest:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    return int(first.split()[1]), headers


async def _read_body(reader: asyncio.StreamReader, headers: dict[str, str], seconds: float) -> bytes:
    if "content-length" in headers:
        return await asyncio.wait_for(reader.readexactly(int(headers["content-length"])), seconds)
    body = b""
    while True:  # chunked
        size = int((await asyncio.wait_for(reader.readuntil(b"\r\n"), seconds)).strip(), 16)
        chunk = await asyncio.wait_for(reader.readexactly(size + 2), seconds)
        if size == 0:
            return body
        body += chunk[:-2]


def _refusal(status: int, body: bytes) -> tuple[str, str]:
    try:
        error = json.loads(body)["error"]
        return f"{status} {error['code']}", str(error["message"])
    except (ValueError, KeyError, TypeError):
        return str(status), body[:300].decode("utf-8", "replace")


async def _connect(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
    try:
        return await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 10)
    except (OSError, TimeoutError):
        return None


async def open_session(port: int, token: str, path: str, held: Held) -> str | None:
    """A new MCP session at `path` (its id), on a connection of its own that is closed afterwards."""
    pair = await _connect(port)
    if pair is None:
        held.refuse("no connection")
        return None
    reader, writer = pair
    try:
        body = json.dumps(initialize("flood")).encode()
        extra = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        writer.write(_head("POST", path, token, extra, len(body)) + body)
        head = await _read_head(reader, 30)
        if head is None:
            held.refuse("closed")
            return None
        status, headers = head
        answer = await _read_body(reader, headers, 30)
        if status != 200:
            held.refuse(*_refusal(status, answer))
            return None
        return headers.get("mcp-session-id")
    except (OSError, asyncio.IncompleteReadError, TimeoutError):
        held.refuse("closed")
        return None
    finally:
        writer.close()


async def hold_stream(port: int, token: str, path: str, session: str, held: Held) -> None:
    """Open the session's SSE stream (GET) and keep it open in `held`."""
    pair = await _connect(port)
    if pair is None:
        held.refuse("no connection")
        return
    reader, writer = pair
    extra = {"Accept": "text/event-stream", "Mcp-Session-Id": session, "Mcp-Protocol-Version": DEFAULT_PROTOCOL}
    writer.write(_head("GET", path, token, extra))
    head = await _read_head(reader, 30)
    if head is None:
        held.refuse("closed")
        writer.close()
    elif head[0] == 200 and head[1].get("content-type", "").startswith("text/event-stream"):
        held.kept.append(writer)
        held.readers.append(reader)
    else:
        with contextlib.suppress(Exception):
            held.refuse(*_refusal(head[0], await _read_body(reader, head[1], 5)))
        writer.close()


async def streams(port: int, token: str, count: int, *, at_once: int = 16) -> Held:
    """`count` MCP sessions from `token`, half on /mcp and half on /mcp/graph, each holding its SSE stream open."""
    held = Held()
    gate = asyncio.Semaphore(at_once)

    async def one(i: int) -> None:
        path = "/mcp" if i % 2 else "/mcp/graph"
        async with gate:
            session = await open_session(port, token, path, held)
            if session is not None:
                await hold_stream(port, token, path, session, held)

    await asyncio.gather(*(one(i) for i in range(count)))
    return held


async def sessions(port: int, token: str, count: int, *, at_once: int = 16) -> Held:
    """`count` MCP sessions from `token` (alternating endpoints), opened and left idle."""
    held = Held()
    gate = asyncio.Semaphore(at_once)

    async def one(i: int) -> None:
        async with gate:
            await open_session(port, token, "/mcp" if i % 2 else "/mcp/graph", held)

    await asyncio.gather(*(one(i) for i in range(count)))
    return held


async def slow_bodies(port: int, token: str, count: int) -> Held:
    """`count` requests from `token` whose bodies then come one byte every DRIP_S (see `drip`): a refusal the
    server sends at once is read within a second."""
    held = Held()
    size = 100_000  # never finishes in the body deadline at this pace

    async def one() -> None:
        pair = await _connect(port)
        if pair is None:
            held.refuse("no connection")
            return
        reader, writer = pair
        writer.write(_head("POST", "/api/notes", token, {"Content-Type": "application/json"}, size) + b"{")
        try:
            head = await _read_head(reader, 1.0)
        except TimeoutError:  # nothing said: the server waits for the body
            held.kept.append(writer)
            held.readers.append(reader)
            return
        if head is None:
            held.refuse("closed")
        else:
            with contextlib.suppress(Exception):
                held.refuse(*_refusal(head[0], await _read_body(reader, head[1], 5)))
        writer.close()

    await asyncio.gather(*(one() for _ in range(count)))
    return held


async def drip(held: Held, until: threading.Event) -> None:
    """One more byte on each kept slow body every DRIP_S, until `until` is set."""
    while not until.is_set():
        for writer in held.kept:
            if writer.is_closing():
                continue
            with contextlib.suppress(OSError):
                writer.write(b" ")
        await asyncio.sleep(DRIP_S)


async def sort_out(held: Held) -> None:
    """Move the kept connections the server has since answered or closed (a refusal that came after the first
    second's wait, under load) to `refused`. An event on a stream (its keep-alive comment) is not an answer."""

    async def said(reader: asyncio.StreamReader) -> bytes | None:
        try:
            return await asyncio.wait_for(reader.read(4096), 0.1)
        except TimeoutError:
            return None
        except OSError:
            return b""

    answers = [
        None if a is not None and a and not a.startswith(b"HTTP/") else a
        for a in await asyncio.gather(*(said(r) for r in held.readers))
    ]
    kept = [(w, r) for (w, r), a in zip(zip(held.kept, held.readers, strict=True), answers, strict=True) if a is None]
    for writer, answer in zip(held.kept, answers, strict=True):
        if answer is None:
            continue
        writer.close()
        head, _, body = answer.partition(b"\r\n\r\n")
        status = head.split(b" ")[1].decode() if head.startswith(b"HTTP/") else ""
        held.refuse(*(_refusal(int(status), body) if status else ("closed", "")))
    held.kept = [w for w, _ in kept]
    held.readers = [r for _, r in kept]


def probe(port: int, token: str, seconds: float, every: float = 0.5, timeout: float = 5.0) -> Probe:
    """GET /api/notes?limit=1 with `token` every `every` s for `seconds`, each on a new connection (urllib's): how
    long each took, and every answer that was not a 200 or did not come within `timeout`."""
    seen = Probe()
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/api/notes?limit=1", headers={"Authorization": f"Bearer {token}"}
    )
    end = time.monotonic() + seconds
    while (began := time.monotonic()) < end:
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                response.read()
                if response.status != 200:
                    seen.failures.append(f"status {response.status}")
        except urllib.error.HTTPError as error:
            with error:
                seen.failures.append(f"{error.code}: {error.read()[:200]!r}")
        except OSError as error:
            seen.failures.append(repr(error))
        seen.times.append(time.monotonic() - began)
        next_at = began + every
        while (now := time.monotonic()) < next_at:  # the pace of the probe itself, not a synchronisation
            time.sleep(next_at - now)
    return seen
