"""The `/sync` endpoints other Hivenote servers pull shard bytes from (peer.py is the puller), and the shard
summaries both sides compare. Read-only; every request needs a bearer token (the guard protects /sync).

    GET /sync/shards
        200 {"node": <this node>, "shards": {<node>: {"size": <bytes of complete lines>, "head": <sha256 hex of the
             first line>, "seq": <seq of the last line, or null>}}, "peers": [<known peer URLs, never tokens>],
             "skipped": {<shard>: <why it is not offered: unreadable, or ends in a line longer than any op>}}
    GET /sync/shards/{node}?offset=N[&limit=M][&head=H&tail=T]
        200 application/octet-stream: complete lines from byte N, at most M bytes (default and cap 4 MiB) but at
            least one line; headers X-Shard-Size, X-Shard-Head, X-Shard-Seq describe the whole shard, and
            X-Shard-Prefix is the sha256 of its bytes before N (the puller checks it too: a server that does not
            check the proof cannot make it splice).
        From N > 0 the puller proves its copy holds the very same bytes: P = the sha256 (hex) of every byte of its
        copy before N (`prefix=P`). A mismatch is 409 `shard_replaced` (the owner compacted it, or it is another
        history of the node: a fork): fetch it again from 0. N may equal the size: an empty answer then confirms
        the puller's copy is this one. (Older Hivenotes sent head/tail, a proof of 64 bytes: refused with 400.)
        400 a bad node name or parameter, or an N where no line ends (a truncated copy); 404 no such shard;
        416 N beyond the shard's size; 422 `damaged`: the line at N is longer than any op can be (nothing past it is
        offered); 503 the file cannot be read now. Errors are `{"error": {"code", "message"}}`.

Shards are named as files are (replica.SHARD_NAME): a node, `<node>~<12 hex>` (another history of the node kept
where a fork was found) or `<node>.sync-conflict-...` (a sync tool's copy); each is offered if its first line names
that node. This node's own shard is offered only up to what its writer has fsynced (acknowledged), so a peer never
holds an op this node could still lose in a crash.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from ..core.model import MAX_LINE_BYTES
from ..storage.shards import NO_FOLDER, is_shard_file
from .peerbook import announced_peers
from .replica import NO_FOLLOW, NODE_NAME, SHARD_NAME, writer_of

if TYPE_CHECKING:
    from ..web.services import Services

MAX_LIMIT = 4 << 20  # bytes per range response
LINE_SCAN = MAX_LINE_BYTES  # longest first/last line looked at (no op is longer)
MAX_LISTED = 10_000  # shards offered in one listing (and taken from a peer's)
HEADERS = ("x-shard-size", "x-shard-head", "x-shard-seq", "x-shard-prefix")
NODE_HEADER = "x-hivenote-node"  # the asking peer's node id (a puller names itself)


@dataclass(frozen=True)
class Summary:
    """What a shard is, cheaply: complete-line bytes, its generation (the first line's hash) and its last seq."""

    size: int
    head: str
    seq: int | None

    def to_json(self) -> dict[str, Any]:
        return {"size": self.size, "head": self.head, "seq": self.seq}

    @classmethod
    def from_json(cls, raw: Any) -> Summary:
        """Raises ValueError for anything that is not a summary."""
        if not isinstance(raw, dict):
            raise ValueError("a shard summary is an object")
        size, head, seq = raw.get("size"), raw.get("head"), raw.get("seq")
        if type(size) is not int or size < 0 or not isinstance(head, str) or len(head) > 64:
            raise ValueError("a shard summary needs a size (bytes) and a head (sha256 hex)")
        if seq is not None and (type(seq) is not int or seq < 1):
            raise ValueError("a shard's seq is a positive integer or null")
        return cls(size, head, seq)


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def valid_node(node: str) -> bool:
    """A shard's name: a node, or a branch or conflict copy of one."""
    return bool(SHARD_NAME.fullmatch(node)) and ".." not in node and bool(NODE_NAME.fullmatch(writer_of(node)))


def _first_line(fh: IO[bytes], size: int) -> bytes:
    fh.seek(0)
    line = fh.readline(min(size, LINE_SCAN))
    return line if line.endswith(b"\n") else b""


def _last_line(fh: IO[bytes], size: int) -> bytes:
    start = max(0, size - LINE_SCAN)
    fh.seek(start)
    block = fh.read(size - start)
    cut = block.rfind(b"\n", 0, len(block) - 1) + 1
    return block[cut:] if cut or start == 0 else b""


def _field(line: bytes, name: str) -> Any:
    try:
        doc = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return doc.get(name) if isinstance(doc, dict) else None


def _line_ends_before(fh: IO[bytes], offset: int) -> bool:
    fh.seek(offset - 1)
    return fh.read(1) == b"\n"


def summarize_open(fh: IO[bytes], size: int) -> Summary:
    if size == 0:
        return Summary(0, "", None)
    seq = _field(_last_line(fh, size), "seq")
    return Summary(size, digest(_first_line(fh, size)), seq if type(seq) is int and seq > 0 else None)


class Damaged(Exception):
    """A shard whose lines cannot all be offered: a line longer than any op can be (damage, not a write in progress)."""


def complete_bytes(fh: IO[bytes]) -> int:
    """Bytes of an open shard up to and including its last newline. Looks back at most one line's worth
    (MAX_LINE_BYTES): a longer unfinished tail is no write in progress but damage (Damaged), so no request scans a
    file backwards whole."""
    end = fh.seek(0, os.SEEK_END)
    floor = max(0, end - MAX_LINE_BYTES - 1)
    while end > floor:
        start = max(floor, end - 65536)
        fh.seek(start)
        newline = fh.read(end - start).rfind(b"\n")
        if newline >= 0:
            return start + newline + 1
        end = start
    if floor:
        raise Damaged(f"it ends in more than {MAX_LINE_BYTES} bytes without a newline (no op is that long)")
    return 0


def read_lines(fh: IO[bytes], offset: int, end: int, limit: int) -> bytes:
    """Complete lines from `offset` (< end) up to about `limit` bytes, at least one line (one longer than `limit` is
    sent whole up to MAX_LINE_BYTES; a longer one is damage: Damaged)."""
    fh.seek(offset)
    data = fh.read(min(end - offset, limit))
    if offset + len(data) < end:
        cut = data.rfind(b"\n") + 1
        if cut:
            return data[:cut]
        fh.seek(offset)
        line = fh.readline(min(end - offset, MAX_LINE_BYTES + 1))  # one line longer than the limit: sent whole
        if not line.endswith(b"\n"):
            raise Damaged(f"the line at byte {offset} is longer than any op ({MAX_LINE_BYTES} bytes): damage")
        return line
    return data


class ShardServer:
    """Answers `/sync` from the log folder. The own shard is capped at what the store has acknowledged."""

    def __init__(self, services: Services) -> None:
        from ..responses import error_response

        self.services = services
        self.error = error_response
        self.replicas = services.replicas

    def _size(self, node: str, fh: IO[bytes]) -> int:
        size = complete_bytes(fh)
        store = self.services.store
        if node == store.node:
            with store.lock:  # the writer's cursor moves past a batch only after its fsync
                cursor = store.shards.cursors.get(f"{node}.jsonl")
                size = min(size, cursor.offset if cursor is not None else 0)
        return size

    def listing(self) -> dict[str, Any]:
        """Every shard's summary; a file that cannot be read or ends in damage is skipped and said (`skipped`), never
        an error for the whole listing."""
        shards: dict[str, Any] = {}
        skipped: dict[str, str] = {}
        log_dir = self.replicas.log_dir
        try:
            names = sorted(
                e.name for e in os.scandir(log_dir) if e.is_file(follow_symlinks=False) and is_shard_file(e.name)
            )
        except NO_FOLDER:
            names = []
        for name in names:
            node = name.removesuffix(".jsonl")
            if not valid_node(node):
                continue
            if len(shards) >= MAX_LISTED:
                skipped[node] = f"over {MAX_LISTED} shards in the log folder: offered once others are gone"
                break
            path = log_dir / name
            try:
                with open(path, "rb") as fh:
                    size = self._size(node, fh)
                    writer = _field(_first_line(fh, size), "node") if size else None
                    if writer not in (None, writer_of(node)):
                        continue  # a stray file: its lines are not the named node's
                    shards[node] = summarize_open(fh, size).to_json()
            except FileNotFoundError:
                continue
            except Damaged as exc:
                skipped[node] = str(exc)
            except OSError as exc:  # its mode, an I/O error: this file only
                skipped[node] = f"cannot be read: {exc.strerror or exc}"
        data_dir = self.services.settings.data_dir
        answer = {"node": self.services.store.node, "shards": shards, "peers": announced_peers(data_dir)}
        return answer | ({"skipped": skipped} if skipped else {})

    async def list_shards(self, request: Request) -> Response:
        asking = request.headers.get(NODE_HEADER, "")
        if valid_node(asking):  # a peer that reaches us is up: a pull from it backing off is tried again now
            self.services.sync.heard_from(asking)
        return JSONResponse(await anyio.to_thread.run_sync(self.listing))

    async def get_range(self, request: Request) -> Response:
        node: str = request.path_params["node"]
        if not valid_node(node):
            return self.error("invalid", f"{node[:100]!r} is not a node name (letters, digits, '.', '_', '-')")
        q = request.query_params
        if "tail" in q and "prefix" not in q:
            return self.error(
                "invalid",
                "this peer runs a newer Hivenote, which proves a copy by a digest of all its bytes (prefix=), not "
                "64 of them: update Hivenote on the machine that asked",
            )
        unknown = sorted(set(q) - {"offset", "limit", "prefix"})
        if unknown:
            return self.error("invalid", f"unknown parameter {unknown[0]!r}; use offset, limit and prefix")
        try:
            offset = int(q.get("offset", "0"))
            limit = int(q.get("limit", str(MAX_LIMIT)))
        except ValueError:
            return self.error("invalid", "offset and limit are whole numbers of bytes")
        if offset < 0:
            return self.error("invalid", f"offset must be 0 or more (got {offset})")
        if not 1 <= limit <= MAX_LIMIT:
            return self.error("invalid", f"limit must be between 1 and {MAX_LIMIT} bytes (got {limit})")
        prefix = q.get("prefix")
        if offset > 0 and prefix is None:
            return self.error(
                "invalid",
                "from an offset past 0, send prefix (the sha256 of every byte of your copy before the offset) so a "
                "replaced or forked shard is noticed",
            )
        return await anyio.to_thread.run_sync(self._range, node, offset, limit, prefix or "")

    def _range(self, node: str, offset: int, limit: int, prefix: str) -> Response:
        path = self.replicas.path(node)
        try:
            # One handle, so a rename cannot mix generations; never a link (it could point anywhere on this disk).
            fh = os.fdopen(os.open(path, os.O_RDONLY | NO_FOLLOW), "rb")
        except OSError as exc:
            if path.exists() and not path.is_symlink():
                return self.error("unreadable", f"{node}'s shard cannot be read here now: {exc.strerror or exc}")
            return self.error("not_found", f"no shard of {node} here; GET /sync/shards lists them")
        try:
            return self._range_open(node, fh, offset, limit, prefix)
        except Damaged as exc:
            return self.error("damaged", f"{node}'s shard here: {exc}; nothing past it is offered")
        except OSError as exc:
            return self.error("unreadable", f"{node}'s shard cannot be read here now: {exc.strerror or exc}")

    def _range_open(self, node: str, fh: IO[bytes], offset: int, limit: int, prefix: str) -> Response:
        with fh:
            size = self._size(node, fh)
            summary = summarize_open(fh, size)
            if offset > size:
                return self.error(
                    "out_of_range",
                    f"offset {offset} is beyond {node}'s shard ({size} bytes here); "
                    "fetch from a smaller offset, or from 0 if your copy is longer",
                )
            held = self.replicas.digests.hexdigest(fh, offset)  # of the bytes before the offset (also said back)
            if offset > 0 and prefix != held:
                return self.error(
                    "shard_replaced",
                    f"your copy of {node}'s shard does not match this one before byte {offset} "
                    "(it was compacted, or it is another history of the node): fetch it again from offset 0",
                )
            if offset > 0 and not _line_ends_before(fh, offset):
                return self.error(
                    "invalid",
                    f"offset {offset} is not where a line of {node}'s shard ends: a range starts at 0 "
                    "or right after a newline (a copy holds complete lines only)",
                )
            data = read_lines(fh, offset, size, limit) if offset < size else b""
            self.replicas.digests.served(fh, offset, data)
        values = (str(summary.size), summary.head, "" if summary.seq is None else str(summary.seq), held)
        return Response(data, media_type="application/octet-stream", headers=dict(zip(HEADERS, values, strict=True)))


def sync_routes(services: Services) -> list[BaseRoute]:
    server = ShardServer(services)
    handlers: list[tuple[str, Callable[[Request], Any]]] = [
        ("/sync/shards", server.list_shards),
        ("/sync/shards/{node}", server.get_range),
    ]
    return [Route(path, handler, methods=["GET"]) for path, handler in handlers]
