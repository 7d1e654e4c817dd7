"""CLI commands on the data dir as a whole: `status`, `import`, `export`, `compact`, `doctor`."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import __version__, meaning
from ..core.errors import InvalidInput
from ..core.hlc import wall_ms
from ..core.model import Author
from ..graph import Graph
from ..notebook import Notebook
from ..render import ago
from ..settings import load_settings
from ..storage import statefile
from ..storage.layout import Layout
from ..storage.serverfile import running_server
from ..storage.store import lock_holder
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
            _report_import(ctx, path, fmt, notebook.import_file(text.encode("utf-8"), fmt, a.skip_bad, path.name))
            return 0
        summary = ImportSummary(fmt, rejected=list(bad))
        by = Author(agent="import", client=f"hivenote import {path.name}")
        progress = _progress(ctx, "importing")
        # The notes keep their recorded times and authors; each op says who imported it (the CLI), when, from where.
        import_notes(notebook, notes, summary, by=notebook.author, source=path.name, progress=progress)
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


def _served_meaning(url: str, data_dir: Path) -> dict[str, Any] | None:
    """The running server's meaning status (which model answers, the sentence index's progress), or None."""
    import httpx2

    from ..tokens import Tokens

    try:
        answer = httpx2.get(
            f"{url}/api/status", headers={"Authorization": f"Bearer {Tokens(data_dir / 'tokens.json').default()}"}
        )
        answer.raise_for_status()
        served: dict[str, Any] = answer.json()["meaning"]
    except (httpx2.HTTPError, KeyError, ValueError):
        return None
    return served


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
    token_set = Layout(ctx.data_dir).tokens.is_file()
    url = running_server(ctx.data_dir)
    meaning_on, meaning_why = meaning.why(settings.meaning)
    sentence = meaning.sentence_here(settings.model_dir, settings.model_download) if meaning_on else ""
    serving = _served_meaning(url, ctx.data_dir) if meaning_on and url else None
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
        "meaning": {"on": meaning_on, "why": meaning_why, "sentence_model": sentence, "server": serving},
        "shards": {
            name: {
                "ops": h.ops,
                "bad_lines": h.bad,
                "unknown_ops": h.unknown,
                "torn_tail_bytes": h.torn_tail_bytes,
                "unreadable": h.unreadable or None,
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
        *([f"sentence model: {sentence}"] if sentence else []),
        *([f"search by meaning now: {serving['summary']}"] if serving else []),
    ]
    for name, h in health.items():
        state = "ok" if not (h.bad or h.unknown) else f"{h.bad} unreadable, {h.unknown} from a newer version"
        if h.unreadable:
            state = f"cannot be read ({h.unreadable}): skipped until it can; {state}"
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


REINDEX_POLL_S = 0.5  # how often `reindex` asks a running server how far its index is


def cmd_reindex(ctx: Context) -> int:
    """Build the derived indexes in the foreground with a progress bar, and exit when they cover the notebook: the
    running server's (followed through /api/status), or, with none running, here (their cache files are what the
    server and `hivenote search` start from)."""
    settings = load_settings(data_dir=ctx.data_dir)
    on, why = meaning.why(settings.meaning)
    if not on:
        raise InvalidInput(f"meaning search is {why}")
    bar = Progress(ctx.err)
    url = running_server(ctx.data_dir)
    if url is not None:
        return _follow_server(ctx, url, bar)
    from ..core.search import refresh_note_index
    from ..meaning import sources

    with ctx.store(write=False) as store:
        with store.reading() as state:
            refresh_note_index(state)
        index = meaning.open_index(ctx.data_dir, True, meaning.model_settings(settings))
        assert index is not None
        while not index.static.refresh(store):
            pass
        sentence = index.sentence
        assert sentence is not None and index.loader is not None
        if index.loader.settings.download and sources.locate(settings.model_dir) is None:
            ctx.err.write(f"downloading {sources.NAME} from {sources.HUB} (once)\n")
            sources.download(lambda done, total: bar.show("downloading", done / 1e6, total / 1e6, "MB"))
            bar.end()
        sentence.refresh(store, 0)  # loads the model, takes what the cache file has, queues the rest
        if sentence.problem is not None:
            raise InvalidInput(f"the sentence model cannot run here: {sentence.problem}")
        total = sentence.indexed + sentence.pending
        while not sentence.refresh(store):
            bar.show("indexing", sentence.indexed, total, "notes")
        bar.show("indexing", total, total, "notes")
        bar.end()
        index.save()
    ctx.emit({"notes": total, "model": sentence.status()["model"]}, f"Indexed {total:,} notes by meaning.")
    return 0


def _follow_server(ctx: Context, url: str, bar: Progress) -> int:
    while True:
        served = _served_meaning(url, ctx.data_dir)
        if served is None:
            raise InvalidInput(f"the server at {url} did not answer its status; is it still running?")
        sentence = served.get("sentence") or {}
        phase = sentence.get("phase")
        if phase == "ready":
            bar.end()
            ctx.emit({"notes": sentence.get("notes"), "model": sentence.get("model")}, str(served["summary"]))
            return 0
        if phase == "off" or not sentence:
            bar.end()
            raise InvalidInput(f"the server searches {served['summary']}")
        if phase == "downloading":
            bar.show("downloading", sentence["downloaded"] / 1e6, sentence["download_bytes"] / 1e6, "MB")
        else:
            notes = int(sentence.get("notes", 0))
            bar.show("indexing", notes, notes + int(sentence.get("pending", 0)), "notes")
        time.sleep(REINDEX_POLL_S)  # the server's own pace: this only shows it


class Progress:
    """A progress bar on standard error: redrawn in place on a terminal, a line at each tenth elsewhere."""

    WIDTH = 30

    def __init__(self, out: Any) -> None:
        self.out = out
        self.tty = bool(getattr(out, "isatty", lambda: False)())
        self.shown = -1

    def show(self, what: str, done: float, total: float, unit: str) -> None:
        share = done / total if total else 1.0
        tenth = int(share * 10)
        if not self.tty and tenth == self.shown:
            return
        self.shown = tenth
        filled = int(share * self.WIDTH)
        line = f"{what} [{'#' * filled}{'.' * (self.WIDTH - filled)}] {done:,.0f} / {total:,.0f} {unit}"
        self.out.write(f"\r{line}" if self.tty else f"{line}\n")
        self.out.flush()

    def end(self) -> None:
        if self.tty and self.shown >= 0:
            self.out.write("\n")
        self.shown = -1
