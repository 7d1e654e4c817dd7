"""The `hivenote` command line: the notebook for people and scripts (`--json` for machine output).

Reads open the data dir read-only (they work while a Hivenote server runs); writes take the shard lock.
Exit codes: 0 ok, 1 invalid input or failed operation, 2 usage, 3 not found, 4 data dir in use, 5 storage error.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

from . import __version__
from .client import RemoteNotebook, running_server
from .errors import HivenoteError, InvalidInput, NotFound
from .graph import Graph, graph_json
from .model import NOTE_KINDS, Author
from .notebook import UNSET, Notebook
from .provenance import acting_as
from .render import ago, note_line, note_text
from .search import Filters
from .settings import load_settings, resolve_data_dir
from .store import ShardLocked, Store, StoreError, lock_holder
from .transfer import (
    ImportSummary,
    detect_format,
    export_memory_jsonl,
    export_notebook,
    import_graph,
    import_notes,
    parse_memory_jsonl,
    parse_notebook,
)

EXIT_INVALID, EXIT_USAGE, EXIT_NOT_FOUND, EXIT_LOCKED, EXIT_STORE = 1, 2, 3, 4, 5
LOCK_WAIT_S = 5.0  # another CLI command may hold the data dir for a moment
EXIT_CODES = (
    (ShardLocked, EXIT_LOCKED),
    (NotFound, EXIT_NOT_FOUND),
    (StoreError, EXIT_STORE),
    (HivenoteError, EXIT_INVALID),
)
CLI_AUTHOR = Author(agent="cli", client=f"hivenote-cli {__version__}")


class Context:
    """What a command runs with: the data dir, output streams, and the store opened as the command needs."""

    def __init__(self, args: argparse.Namespace, out: TextIO, err: TextIO) -> None:
        self.args = args
        self.out = out
        self.err = err
        self.data_dir = resolve_data_dir(getattr(args, "data_dir", None))
        self.json = bool(getattr(args, "json", False))

    def store(self, *, write: bool) -> Store:
        return Store(self.data_dir, readonly=not write, lock_timeout=LOCK_WAIT_S)  # opened by `with`

    @contextlib.contextmanager
    def notebook(self) -> Iterator[Notebook | RemoteNotebook]:
        """Where the notebook's writes go: the running server when one holds the data dir, else the store."""
        url = running_server(self.data_dir)
        if url is not None:
            from .auth import Tokens

            remote = RemoteNotebook(url, Tokens(self.data_dir / "tokens.json").default())
            try:
                yield remote
            finally:
                remote.close()
            return
        with self.store(write=True) as store:
            yield Notebook(store)

    def emit(self, value: Any, text: str) -> None:
        if self.json:
            json.dump(value, self.out, ensure_ascii=False, indent=2)
            self.out.write("\n")
        elif text:
            self.out.write(text + "\n")


def _now() -> int:
    return time.time_ns() // 1_000_000


def _filters(args: argparse.Namespace, *, trashed: bool = False) -> Filters:
    return Filters(
        kind=args.kind,
        project=args.project,
        tag=getattr(args, "tag", None),
        agent=getattr(args, "agent", None),
        trashed=trashed,
    )


def _read_body(args: argparse.Namespace) -> str | None:
    if getattr(args, "body_file", None):
        source = args.body_file
        return sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    body: str | None = args.body
    return body


# -- commands ---------------------------------------------------------------------------------------


def cmd_status(ctx: Context) -> int:
    with ctx.store(write=False) as store:
        counts = Notebook(store).counts()
    holder = lock_holder(ctx.data_dir)
    running = f"a Hivenote server is running (pid {holder})" if holder else "no Hivenote server is running"
    ctx.emit(
        {"data_dir": str(ctx.data_dir), "running_pid": holder, **counts},
        f"Hivenote {__version__} — data in {ctx.data_dir}\n"
        f"{counts['notes']} notes ({counts['trashed']} in the trash), {counts['entities']} entities, "
        f"{counts['relations']} relations; {running}.\n"
        "Run `hivenote --help` for commands.",
    )
    return 0


def cmd_remember(ctx: Context) -> int:
    a = ctx.args
    with ctx.notebook() as notebook:
        result = notebook.remember(
            kind=a.kind, title=a.title, body=_read_body(a) or "", tags=a.tag or [], project=a.project
        )
    lines = [f"Remembered {note_line(result.note, _now())}"]
    lines += [
        f"Looks like {n.id} {n.title!r}; if the new note replaces it, update that one instead "
        f"(hivenote update {n.id} ...) and forget this one."
        for n in result.similar
    ]
    ctx.emit({"note": result.note.to_json(), "similar": [n.to_json() for n in result.similar]}, "\n".join(lines))
    return 0


def cmd_search(ctx: Context) -> int:
    a = ctx.args
    with ctx.store(write=False) as store:
        result = Notebook(store).search(a.query, _filters(a, trashed=a.trash), a.limit)
    now = _now()
    if result.hits:
        more = (
            f"\n({len(result.hits)} of {result.total} shown; use --limit for more)"
            if result.total > len(result.hits)
            else ""
        )
        text = "\n".join(note_line(n, now) for n in result.hits) + more
    else:
        text = "No matching notes."
        if result.near:
            text += " Closest partial matches:\n" + "\n".join(note_line(n, now) for n in result.near)
    ctx.emit(
        {
            "results": [n.to_json() for n in result.hits],
            "near": [n.to_json() for n in result.near],
            "total": result.total,
        },
        text,
    )
    return 0


def cmd_list(ctx: Context) -> int:
    a = ctx.args
    with ctx.store(write=False) as store:
        notes, total = Notebook(store).list(_filters(a, trashed=a.trash), limit=a.limit, offset=a.offset)
    now = _now()
    text = "\n".join(note_line(n, now) for n in notes) or ("The trash is empty." if a.trash else "No notes yet.")
    if total > a.offset + len(notes):
        text += f"\n({len(notes)} of {total} shown; use --limit/--offset for more)"
    ctx.emit({"results": [n.to_json() for n in notes], "total": total}, text)
    return 0


def cmd_get(ctx: Context) -> int:
    with ctx.store(write=False) as store:
        note = Notebook(store).get(ctx.args.id)
    ctx.emit(note.to_json(), note_text(note, _now()))
    return 0


def cmd_update(ctx: Context) -> int:
    a = ctx.args
    body = _read_body(a)
    tags: Any = UNSET
    if a.no_tags:
        tags = []
    elif a.tag is not None:
        tags = a.tag
    with ctx.notebook() as notebook:
        note = notebook.update(
            a.id,
            kind=a.kind if a.kind is not None else UNSET,
            title=a.title if a.title is not None else UNSET,
            body=body if body is not None else UNSET,
            tags=tags,
            project=a.project if a.project is not None else UNSET,
        )
    ctx.emit(note.to_json(), f"Updated {note_line(note, _now())}")
    return 0


def _flag_command(verb: str, done: str) -> Callable[[Context], int]:
    def run(ctx: Context) -> int:
        with ctx.notebook() as notebook:
            note = getattr(notebook, verb)(ctx.args.id)
        ctx.emit(note.to_json(), f"{done} {note_line(note, _now())}")
        return 0

    return run


def cmd_purge(ctx: Context) -> int:
    with ctx.notebook() as notebook:
        note_id = notebook.purge(ctx.args.id)
    ctx.emit({"purged": note_id}, f"Purged {note_id} for good.")
    return 0


def cmd_history(ctx: Context) -> int:
    with ctx.store(write=False) as store:
        versions = Notebook(store).history(ctx.args.id)
    now = _now()
    lines = []
    for v in versions:
        who = " · ".join(x for x in (v.by.agent, v.by.person, v.node) if x)
        changed = ", ".join(f"{k}={json.dumps(val, ensure_ascii=False)[:60]}" for k, val in v.fields.items())
        lines.append(f"{ago(v.at, now):>16}  {v.action:<8} {who}  {changed}")
    ctx.emit([v.to_json() for v in versions], "\n".join(lines))
    return 0


def _progress(ctx: Context, label: str) -> Callable[[int, int], None] | None:
    if ctx.json:
        return None

    def show(done: int, total: int) -> None:
        if total > 1000:
            end = "\n" if done >= total else "\r"
            ctx.err.write(f"{label}: {done}/{total} ({done * 100 // total}%){end}")
            ctx.err.flush()

    return show


def cmd_import(ctx: Context) -> int:
    a = ctx.args
    path = Path(a.file)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise InvalidInput(f"cannot read {path}: {exc.strerror}") from None
    fmt = a.format or detect_format(text)
    url = running_server(ctx.data_dir)
    if url is not None:  # the server owns the data dir: it imports (and validates) the file itself
        from .auth import Tokens

        remote = RemoteNotebook(url, Tokens(ctx.data_dir / "tokens.json").default())
        try:
            answer = remote.import_file(text.encode("utf-8"), fmt, a.skip_bad)
        finally:
            remote.close()
        _report_import(ctx, path, fmt, answer)
        return 0
    summary = ImportSummary(fmt)
    by = Author(agent="import", client=f"hivenote import {path.name}")
    progress = _progress(ctx, "importing")
    if fmt == "memory-jsonl":
        entities, relations, bad = parse_memory_jsonl(text, skip_bad=a.skip_bad)
        notes: list[dict[str, Any]] = []
    else:
        notes, entities, relations, bad = parse_notebook(text, skip_bad=a.skip_bad)
    summary.rejected.extend(bad)
    with ctx.store(write=True) as store, acting_as(by):
        import_notes(Notebook(store), notes, summary, by=by, progress=progress)
        import_graph(Graph(store), entities, relations, summary, by=by, progress=progress)
    _report_import(ctx, path, fmt, summary.to_json())
    return 0


def _report_import(ctx: Context, path: Path, fmt: str, summary: dict[str, Any]) -> None:
    added = ", ".join(f"{n} {k}" for k, n in summary["added"].items() if n) or "nothing new"
    skipped = ", ".join(f"{n} {k}" for k, n in summary["skipped"].items() if n)
    text_out = f"Imported {path.name} ({fmt}): added {added}" + (f"; already present: {skipped}" if skipped else "")
    text_out += "".join(f"\nskipped line {r['line']}: {r['reason']}" for r in summary["rejected"])
    ctx.emit(summary, text_out)


def cmd_export(ctx: Context) -> int:
    a = ctx.args
    fmt = a.format or ("memory-jsonl" if a.file.endswith(".jsonl") else "notebook")
    with ctx.store(write=False) as store, store.reading() as state:
        if fmt == "memory-jsonl":
            entities, relations = state.graph()
            data = export_memory_jsonl(entities, relations)
            counted = f"{len(entities)} entities, {len(relations)} relations"
        else:
            doc = export_notebook(state, node=store.node, now_ms=_now())
            data = json.dumps(doc, ensure_ascii=False, indent=2) + "\n"
            counted = f"{len(doc['notes'])} notes, {len(doc['graph']['entities'])} entities"
    if a.file == "-":
        ctx.out.write(data)
        return 0
    target = Path(a.file)
    tmp = target.with_name(f".{target.name}.tmp")
    try:
        tmp.write_text(data, encoding="utf-8", newline="")
        tmp.replace(target)
    except OSError as exc:
        raise InvalidInput(f"cannot write {target}: {exc.strerror}") from None
    ctx.emit({"file": str(target), "format": fmt}, f"Exported {counted} to {target} ({fmt}).")
    return 0


def cmd_compact(ctx: Context) -> int:
    with ctx.store(write=True) as store:
        before, after = store.compact()
    ctx.emit({"before": before, "after": after}, f"Compacted this node's shard: {before} → {after} lines.")
    return 0


def cmd_doctor(ctx: Context) -> int:
    holder = lock_holder(ctx.data_dir)
    with ctx.store(write=False) as store:
        health = store.health()
        counts = Notebook(store).counts()
        skew = dict(store.clock.skew.ahead_ms)
        nodes = {n: {"ops": s.ops, "last_op": s.last_wall} for n, s in store.state.nodes.items()}
        node = store.node
    report = {
        "data_dir": str(ctx.data_dir),
        "node": node,
        "running_pid": holder,
        "counts": counts,
        "nodes": nodes,
        "clock_skew_ms": skew,
        "shards": {
            name: {
                "ops": h.ops,
                "bad_lines": h.bad,
                "unknown_ops": h.unknown,
                "torn_tail_bytes": h.torn_tail_bytes,
                "problems": [{"line": b.line, "reason": b.reason} for b in h.bad_lines],
            }
            for name, h in health.items()
        },
    }
    lines = [
        f"data dir: {ctx.data_dir}",
        f"this node: {node or '(none yet: nothing written here)'}",
        f"server: {'running, pid ' + str(holder) if holder else 'not running'}",
        f"notes: {counts['notes']} live, {counts['trashed']} in the trash; graph: {counts['entities']} entities",
    ]
    for name, h in health.items():
        state = "ok" if not (h.bad or h.unknown) else f"{h.bad} unreadable, {h.unknown} from a newer version"
        tail = f", {h.torn_tail_bytes} bytes of an unfinished last line" if h.torn_tail_bytes else ""
        lines.append(f"shard {name}: {h.ops} ops, {state}{tail}")
        lines += [f"  line {b.line}: {b.reason}" for b in h.bad_lines]
    now = _now()
    for other, ahead in skew.items():
        lines.append(f"clock skew: {other} writes stamps {ahead // 1000} s ahead of this machine's clock")
    for other, s in nodes.items():
        lines.append(f"node {other}: {s['ops']} ops, last {ago(s['last_op'], now)}")
    if any(h.bad for h in health.values()):
        lines.append("Unreadable lines are skipped and kept in place; nothing is deleted.")
    ctx.emit(report, "\n".join(lines))
    return 0


def cmd_graph(ctx: Context) -> int:
    a = ctx.args
    with ctx.store(write=False) as store:
        graph = Graph(store)
        if a.graph_command == "open":
            entities, relations = graph.open_nodes(a.names)
            ctx.emit(graph_json(entities, relations), json.dumps(graph_json(entities, relations), indent=2))
            return 0
        page = graph.page(
            a.query if a.graph_command == "search" else None,
            limit=a.limit,
            offset=a.offset,
            names_only=a.names_only,
        )
    doc = page.to_json()
    if a.names_only:
        text = "\n".join(doc["names"]) + f"\n({len(doc['names'])} of {page.total_entities} entities)"
    else:
        text = json.dumps(doc, ensure_ascii=False, indent=2)
    ctx.emit(doc, text)
    return 0


def cmd_serve(ctx: Context) -> int:
    from .app import create_app  # the server's dependencies load only for the commands that need them
    from .serve import ServerThread, bind

    a = ctx.args
    settings = load_settings(
        {"host": a.host, "port": a.port, "auth": False if a.no_auth else None}, data_dir=ctx.data_dir
    )
    if not settings.auth:
        ctx.err.write(
            "WARNING: --no-auth: any program on this machine can read and change the notebook without a token.\n"
        )
    sock = bind(settings.host, settings.port)
    with Store(settings.data_dir) as store:
        server = ServerThread(create_app(settings, store), settings, sock)
        stop = threading.Event()
        previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
        try:
            server.start()
            while not server.started and server.thread.is_alive():
                server.thread.join(0.05)
            if not server.started:
                raise HivenoteError(f"the server did not start: {server.error}")
            url = f"http://{settings.base_url.removeprefix('http://')}"
            ctx.out.write(f"Hivenote {__version__} serving {settings.data_dir} on {url}\n")
            ctx.out.write(f"  MCP (notebook): {url}/mcp\n  MCP (memory graph): {url}/mcp/graph\n")
            ctx.out.write("  `hivenote connect <client>` prints a ready config. Ctrl-C stops.\n")
            ctx.out.flush()
            while server.thread.is_alive() and not stop.wait(0.25):
                pass
        except KeyboardInterrupt:
            pass
        finally:
            signal.signal(signal.SIGTERM, previous)
            server.stop()
    return 0


def cmd_token(ctx: Context) -> int:
    from .auth import Tokens

    a = ctx.args
    tokens = Tokens(ctx.data_dir / "tokens.json")
    if a.token_command == "show":
        token = tokens.default()
        ctx.emit({"token": token}, token)
    elif a.token_command == "add":
        token = tokens.add(a.name)
        ctx.emit(
            {"name": a.name, "token": token},
            f"{token}\nThe token for {a.name}; it is shown only this once. Notes they write carry their name.",
        )
    elif a.token_command == "revoke":
        tokens.revoke(a.name)
        ctx.emit({"revoked": a.name}, f"Revoked the token of {a.name}.")
    else:
        people = tokens.people()
        ctx.emit(
            [{"name": p.name, "created": p.created} for p in people],
            "\n".join(f"{p.name}  (since {ago(p.created, _now())})" for p in people) or "No personal tokens yet.",
        )
    return 0


def cmd_connect(ctx: Context) -> int:
    from .auth import Tokens
    from .connect import CLIENTS, snippet

    a = ctx.args
    if not a.client:
        ctx.emit(list(CLIENTS), "Clients: " + ", ".join(CLIENTS) + "\nRun `hivenote connect <client>` for its config.")
        return 0
    settings = load_settings(data_dir=ctx.data_dir)
    token = Tokens(ctx.data_dir / "tokens.json").default() if settings.auth else None
    url = f"{settings.base_url}/mcp/graph" if a.graph else f"{settings.base_url}/mcp"
    found = snippet(a.client, url=url, token=token, graph=a.graph)
    where = "\n".join(f"  {system}: {path}" for system, path in found.where.items())
    steps = "\n".join(f"  - {step}" for step in found.steps)
    ctx.emit(found.to_json(), f"{found.title} ({found.format}):\n\n{found.text}\n\nWhere:\n{where}\n\nSteps:\n{steps}")
    return 0


def cmd_stdio(ctx: Context) -> int:
    from .auth import Tokens
    from .bridge import ensure_server, run_bridge

    a = ctx.args
    settings = load_settings({"port": a.port}, data_dir=ctx.data_dir)
    base = settings.base_url
    ensure_server(base, ctx.data_dir, settings.port)
    token = Tokens(ctx.data_dir / "tokens.json").default()
    run_bridge(f"{base}/mcp/graph" if a.graph else f"{base}/mcp", token)
    return 0


# -- parser -----------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    # SUPPRESS: an option given before the subcommand is not reset by the subcommand's own default.
    common.add_argument(
        "--data-dir",
        default=argparse.SUPPRESS,
        help="notebook folder (default: $HIVENOTE_DATA_DIR or the user data dir)",
    )
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="machine-readable output")

    parser = argparse.ArgumentParser(
        prog="hivenote", description="One shared notebook for all your AI agents.", parents=[common]
    )
    parser.add_argument("--version", action="version", version=f"hivenote {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def add(name: str, help_text: str, func: Callable[[Context], int]) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text, parents=[common])
        p.set_defaults(func=func)
        return p

    def filters(p: argparse.ArgumentParser) -> None:
        p.add_argument("--kind", choices=NOTE_KINDS)
        p.add_argument("--project", help="the codebase's name, e.g. shop-api")
        p.add_argument("--tag")
        p.add_argument("--agent", help="written by this agent (cursor, claude-code, codex, ...)")
        p.add_argument("--trash", action="store_true", help="look in the trash instead")

    p = add("remember", "store a note", cmd_remember)
    p.add_argument("--kind", required=True, choices=NOTE_KINDS)
    p.add_argument("--title", required=True)
    p.add_argument("--body")
    p.add_argument("--body-file", help="read the body from a file ('-' for stdin)")
    p.add_argument("--project", help="the codebase's name, e.g. shop-api (not a path)")
    p.add_argument("--tag", action="append", help="repeat for several tags")

    p = add("search", "find notes: every word must match", cmd_search)
    p.add_argument("query")
    filters(p)
    p.add_argument("--limit", type=int)

    p = add("list", "recent notes first", cmd_list)
    filters(p)
    p.add_argument("--limit", type=int, default=20)
    p.add_argument("--offset", type=int, default=0)

    add("get", "show one note", cmd_get).add_argument("id")

    p = add("update", "change some fields of a note", cmd_update)
    p.add_argument("id")
    p.add_argument("--kind", choices=NOTE_KINDS)
    p.add_argument("--title")
    p.add_argument("--body")
    p.add_argument("--body-file")
    p.add_argument("--project", help="new project name ('' to clear)")
    p.add_argument("--tag", action="append", help="replaces all tags; repeat for several")
    p.add_argument("--no-tags", action="store_true", help="remove all tags")

    add("forget", "move a note to the trash", _flag_command("forget", "Moved to the trash:")).add_argument("id")
    add("restore", "bring a note back from the trash", _flag_command("restore", "Restored")).add_argument("id")
    add("purge", "delete a trashed note for good", cmd_purge).add_argument("id")
    add("history", "every version of a note, with who and when", cmd_history).add_argument("id")

    p = add("import", "import a memory.jsonl or a notebook export (idempotent)", cmd_import)
    p.add_argument("file")
    p.add_argument("--format", choices=("notebook", "memory-jsonl"))
    p.add_argument("--skip-bad", action="store_true", help="import every good line, report the bad ones")

    p = add("export", "export the notebook or the graph as memory.jsonl", cmd_export)
    p.add_argument("file", help="target file, or - for stdout")
    p.add_argument("--format", choices=("notebook", "memory-jsonl"))

    add("compact", "shrink this machine's log shard (drops old history)", cmd_compact)
    add("doctor", "check the data dir, the log and the clock", cmd_doctor)

    p = add("serve", "run the Hivenote server headless (MCP, REST)", cmd_serve)
    p.add_argument("--host", help="address to listen on (default 127.0.0.1; beyond loopback needs a token)")
    p.add_argument("--port", type=int, help="port (default 7788)")
    p.add_argument("--no-auth", action="store_true", help="no token needed (loopback only)")

    p = add("connect", "print a ready config for an agent (Cursor, Claude, Codex, ...)", cmd_connect)
    p.add_argument("client", nargs="?", help="cursor, claude-desktop, claude-code, codex, gemini-cli, vscode, ...")
    p.add_argument("--graph", action="store_true", help="the official memory tools endpoint instead")

    p = add("stdio", "MCP over stdin/stdout for stdio-only clients (starts the server if needed)", cmd_stdio)
    p.add_argument("--graph", action="store_true", help="the official memory tools (drop-in for server-memory)")
    p.add_argument("--port", type=int, help="port of the local server (default 7788)")

    p = add("token", "show the token, or manage per-person tokens", cmd_token)
    tsub = p.add_subparsers(dest="token_command", required=True, metavar="show|add|list|revoke")
    tsub.add_parser("show", parents=[common], help="print the default token")
    tsub.add_parser("list", parents=[common], help="list per-person tokens")
    tsub.add_parser("add", parents=[common], help="issue a token for a person").add_argument("name")
    tsub.add_parser("revoke", parents=[common], help="revoke a person's token").add_argument("name")

    p = add("graph", "read the knowledge graph (paged)", cmd_graph)
    gsub = p.add_subparsers(dest="graph_command", required=True, metavar="read|search|open")
    for name in ("read", "search"):
        g = gsub.add_parser(name, parents=[common])
        if name == "search":
            g.add_argument("query")
        g.add_argument("--limit", type=int)
        g.add_argument("--offset", type=int, default=0)
        g.add_argument("--names-only", action="store_true")
    gsub.add_parser("open", parents=[common]).add_argument("names", nargs="+")
    return parser


def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    parser = build_parser()
    args = parser.parse_args(argv)
    ctx = Context(args, out, err)
    func: Callable[[Context], int] = getattr(args, "func", cmd_status)
    try:
        with acting_as(CLI_AUTHOR):
            return func(ctx)
    except HivenoteError as exc:
        if ctx.json:
            err.write(json.dumps({"error": {"code": exc.code, "message": str(exc)}}, ensure_ascii=False) + "\n")
        else:
            err.write(f"hivenote: {exc}\n")
        return next(code for kind, code in EXIT_CODES if isinstance(exc, kind))
    except BrokenPipeError:  # `hivenote list | head`: the reader left; not an error
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
