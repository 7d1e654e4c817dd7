"""CLI commands around the notebook: status, import/export, compaction, doctor, and the server side (`serve`,
`stdio`, `connect`, `token`)."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from .. import __version__, meaning
from ..core.errors import HivenoteError, InvalidInput
from ..core.hlc import wall_ms
from ..core.model import Author
from ..graph import Graph
from ..notebook import Notebook
from ..render import ago
from ..settings import load_settings
from ..storage import statefile
from ..storage.serverfile import running_server
from ..storage.store import Store, lock_holder
from ..transfer import (
    ImportSummary,
    detect_format,
    export_memory_jsonl,
    export_notebook,
    import_graph,
    import_notes,
    parse_memory_jsonl,
    parse_notebook,
)
from .remote import RemoteNotebook

if TYPE_CHECKING:
    from .context import Context


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
    # Checked here first, whoever imports: a bad line is reported (with the CLI's own hints) before anything opens.
    if fmt == "memory-jsonl":
        entities, relations, bad = parse_memory_jsonl(text, skip_bad=a.skip_bad)
        notes: list[dict[str, Any]] = []
    else:
        notes, entities, relations, bad = parse_notebook(text, skip_bad=a.skip_bad)
    with ctx.notebook() as notebook:
        if isinstance(notebook, RemoteNotebook):  # the server owns the data dir: it imports the file itself
            _report_import(ctx, path, fmt, notebook.import_file(text.encode("utf-8"), fmt, a.skip_bad))
            return 0
        summary = ImportSummary(fmt, rejected=list(bad))
        by = Author(agent="import", client=f"hivenote import {path.name}")
        progress = _progress(ctx, "importing")
        import_notes(notebook, notes, summary, by=by, progress=progress)
        import_graph(Graph(notebook.store), entities, relations, summary, by=by, progress=progress)
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
            doc = export_notebook(state, node=store.node, now_ms=wall_ms())
            data = json.dumps(doc, ensure_ascii=False, indent=2) + "\n"
            counted = f"{len(doc['notes'])} notes, {len(doc['graph']['entities'])} entities"
    if a.file == "-":
        ctx.out.write(data)
        return 0
    target = Path(a.file)
    try:
        # A temp file made exclusively (never through a link planted at its name), fsynced, renamed over the target;
        # 0600: the export holds the whole notebook.
        statefile.write_bytes(target, data.encode("utf-8"))
    except statefile.StateFileUnwritable as exc:
        raise InvalidInput(f"cannot write {target}: {exc.error.strerror or exc.error}") from None
    ctx.emit({"file": str(target), "format": fmt}, f"Exported {counted} to {target} ({fmt}).")
    return 0


def cmd_compact(ctx: Context) -> int:
    settings = load_settings(data_dir=ctx.data_dir)
    published = ""
    with ctx.store(write=True) as store:
        before, after = store.compact()
        if settings.s3_bucket and not settings.log_dir:  # the bucket gets the new generation now
            from ..sync.bucket import BucketError
            from ..sync.s3 import after_compaction

            try:
                published = after_compaction(settings, store)
            except BucketError as exc:
                ctx.err.write(f"warning: compacted here, but the bucket was not updated: {exc}\n")
    text = f"Compacted this node's shard: {before} → {after} lines." + (f"\n{published}" if published else "")
    ctx.emit({"before": before, "after": after}, text)
    return 0


def cmd_doctor(ctx: Context) -> int:
    holder = lock_holder(ctx.data_dir)
    with ctx.store(write=False) as store:
        health = store.health()
        counts = Notebook(store).counts()
        skew = dict(store.clock.skew.ahead_ms)
        nodes = {n: {"ops": s.ops, "last_op": s.last_wall} for n, s in store.state.nodes.items()}
        node = store.node
        lead = max(0, store.clock.wall - wall_ms())
        lead = lead if lead > store.clock.max_offset_ms else 0
        forks = [fork.to_json() for fork in store.state.forks.values()]
    settings = load_settings(data_dir=ctx.data_dir)
    token_set = (ctx.data_dir / "tokens.json").is_file()
    url = running_server(ctx.data_dir)
    meaning_on, meaning_why = meaning.why(settings.meaning)
    report = {
        "data_dir": str(ctx.data_dir),
        "node": node,
        "running_pid": holder,
        "url": url,
        "listen": {"host": settings.host, "port": settings.port, "auth": settings.auth},
        "token_set": token_set,
        "counts": counts,
        "nodes": nodes,
        "clock_skew_ms": skew,
        "own_clock_behind_log_ms": lead,
        "forks": forks,
        "meaning": {"on": meaning_on, "why": meaning_why},
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
        f"server: {f'running, pid {holder}' + (f', {url}' if url else '') if holder else 'not running'}",
        f"listens on: {url.removeprefix('http://') if url else f'{settings.host}:{settings.port}'}"
        + ("" if settings.loopback else " (shared beyond this machine)")
        + (", token required" if settings.auth else ", NO token required (--no-auth)"),
        f"token: {'set (hivenote token show)' if token_set else 'not created yet (made on first use)'}",
        f"notes: {counts['notes']} live, {counts['trashed']} in the trash; graph: {counts['entities']} entities",
        f"meaning search: {meaning_why}",
    ]
    for name, h in health.items():
        state = "ok" if not (h.bad or h.unknown) else f"{h.bad} unreadable, {h.unknown} from a newer version"
        tail = f", {h.torn_tail_bytes} bytes of an unfinished last line" if h.torn_tail_bytes else ""
        lines.append(f"shard {name}: {h.ops} ops, {state}{tail}")
        lines += [f"  line {b.line}: {b.reason}" for b in h.bad_lines]
    now = wall_ms()
    for other, ahead in skew.items():
        lines.append(f"clock skew: {other} writes stamps {ahead // 1000} s ahead of this machine's clock")
    if lead:
        lines.append(
            f"clock skew: this machine wrote stamps {lead // 1000} s ahead of its clock now (its clock was ahead then, "
            "or is behind now); set it right (network time: timedatectl set-ntp true)"
        )
    for fork in forks:
        lines.append(
            f"fork: two histories of {fork['node']} from seq {fork['first_seq']} ({fork['positions']} positions), both "
            "kept: a copied data dir or a cloned machine wrote as one node (hivenote sync status)"
        )
    for other, s in nodes.items():
        lines.append(f"node {other}: {s['ops']} ops, last {ago(s['last_op'], now)}")
    if any(h.bad for h in health.values()):
        lines.append("Unreadable lines are skipped and kept in place; nothing is deleted.")
    for check in ctx.doctor_checks:
        key, value, more = check(ctx)
        report[key] = value
        lines += more
    ctx.emit(report, "\n".join(lines))
    return 0


def cmd_serve(ctx: Context) -> int:
    from ..web.app import create_app  # the server's dependencies load only for the commands that need them
    from ..web.serve import ServerThread, bind, run_until_stopped

    a = ctx.args
    settings = load_settings(
        {"host": a.host, "port": a.port, "auth": False if a.no_auth else None}, data_dir=ctx.data_dir
    )
    if not settings.auth:
        ctx.err.write(
            "WARNING: --no-auth: any program on this machine can read and change the notebook without a token.\n"
        )
    sock = bind(settings.host, settings.port)
    with Store(settings.data_dir, log_dir=settings.log_path) as store:
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
            run_until_stopped(server, stop)  # raises when the server ends by itself: a non-zero exit
        except KeyboardInterrupt:
            pass
        finally:
            signal.signal(signal.SIGTERM, previous)
            server.stop()
    return 0


STOP_WAIT_S = 30.0


def cmd_stop(ctx: Context) -> int:
    """Stop whichever Hivenote server holds this data dir: the tray's, `hivenote serve`, or one `hivenote stdio`
    started in the background (nothing else stops that one)."""
    holder = lock_holder(ctx.data_dir)
    if not holder:
        ctx.emit({"running": False}, f"No Hivenote server is running for {ctx.data_dir}.")
        return 0
    url = running_server(ctx.data_dir)
    if url is None:  # the lock is held by a command (an import, a compaction), not a server
        raise InvalidInput(
            f"pid {holder} holds {ctx.data_dir} but is not a Hivenote server (a command still running?); wait for it "
            "to finish, then try again"
        )
    try:
        os.kill(holder, signal.SIGTERM)
    except ProcessLookupError:
        pass  # it just ended by itself
    except PermissionError:
        raise InvalidInput(
            f"pid {holder} serves {ctx.data_dir} but belongs to another account; stop it there"
        ) from None
    deadline = time.monotonic() + STOP_WAIT_S
    while lock_holder(ctx.data_dir):
        if time.monotonic() > deadline:
            raise HivenoteError(
                f"pid {holder} did not stop within {STOP_WAIT_S:.0f} s; end it yourself (kill {holder})"
            )
        time.sleep(0.05)
    ctx.emit({"running": False, "stopped": holder, "url": url}, f"Stopped the Hivenote server at {url} (pid {holder}).")
    return 0


def cmd_token(ctx: Context) -> int:
    from ..tokens import Tokens

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
            "\n".join(f"{p.name}  (since {ago(p.created, wall_ms())})" for p in people) or "No personal tokens yet.",
        )
    return 0


def cmd_connect(ctx: Context) -> int:
    from ..connect import CLIENTS, snippet, stdio_command
    from ..tokens import Tokens

    a = ctx.args
    if not a.client:
        ctx.emit(list(CLIENTS), "Clients: " + ", ".join(CLIENTS) + "\nRun `hivenote connect <client>` for its config.")
        return 0
    settings = load_settings(data_dir=ctx.data_dir)
    token = Tokens(ctx.data_dir / "tokens.json").default() if settings.auth else None
    base = running_server(ctx.data_dir) or settings.base_url  # the server running for this data dir, if any
    url = f"{base}/mcp/graph" if a.graph else f"{base}/mcp"
    port = urlsplit(base).port or settings.port
    found = snippet(a.client, url=url, token=token, graph=a.graph, stdio_command=stdio_command(ctx.data_dir, port))
    where = "\n".join(f"  {system}: {path}" for system, path in found.where.items())
    steps = "\n".join(f"  - {step}" for step in found.steps)
    ctx.emit(found.to_json(), f"{found.title} ({found.format}):\n\n{found.text}\n\nWhere:\n{where}\n\nSteps:\n{steps}")
    return 0


def cmd_stdio(ctx: Context) -> int:
    from ..mcp.stdio import NotOurServer, ensure_server, refuse_all, run_bridge
    from ..tokens import Tokens

    a = ctx.args
    settings = load_settings({"port": a.port}, data_dir=ctx.data_dir)
    # The server for this data dir may run on another port (`serve --port`): it says where in server.json.
    base = (None if a.port else running_server(ctx.data_dir)) or settings.base_url
    token = Tokens(ctx.data_dir / "tokens.json").default()
    try:
        ensure_server(base, ctx.data_dir, settings.port, token)  # the token goes only to this data dir's server
    except NotOurServer as exc:
        ctx.err.write(f"hivenote: {exc}\n")
        ctx.err.flush()
        refuse_all(str(exc), sys.stdin.buffer, sys.stdout.buffer)  # the client is told too, request by request
        return 1
    run_bridge(f"{base}/mcp/graph" if a.graph else f"{base}/mcp", token, ctx.data_dir)
    return 0
