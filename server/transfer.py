"""Formats at the edges: the official memory server's `memory.jsonl` (both ways, byte-compatible) and the
notebook as one JSON document. Imports validate the whole file before writing anything and are idempotent.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from .core.errors import ImportRejected, InvalidInput
from .core.fold import State
from .core.model import Author, Entity, Imported, Relation
from .graph import Graph, entity_issue, relation_issue
from .notebook import Notebook, check_body, check_kind, check_project, check_tags, check_title
from .storage.store import Dated, Payload

NOTEBOOK_FORMAT: Final = "hivenote-notebook"
BATCH = 500  # items per write, so a big import never holds the store for long
Progress = Callable[[int, int], None]  # (done, total)


@dataclass
class ImportSummary:
    format: str
    added: Counter[str] = field(default_factory=Counter)  # notes, entities, observations, relations
    skipped: Counter[str] = field(default_factory=Counter)  # already present
    rejected: list[tuple[int, str]] = field(default_factory=list)  # (line or item number, reason)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "added": dict(self.added),
            "skipped": dict(self.skipped),
            "rejected": [{"line": line, "reason": reason} for line, reason in self.rejected],
        }


def _dumps(value: Any) -> str:
    """JSON exactly as JavaScript's JSON.stringify writes it (compact, non-ASCII kept)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# -- memory.jsonl -----------------------------------------------------------------------------------


def export_memory_jsonl(entities: Iterable[Entity], relations: Iterable[Relation]) -> str:
    """The official file: entity lines first, then relations, official key order, no trailing newline."""
    lines = [
        _dumps(
            {
                "type": "entity",
                "name": e.name,
                "entityType": e.entityType,
                "observations": list(e.observations),
            }
        )
        for e in entities
    ]
    lines += [
        _dumps({"type": "relation", "from": r.from_, "to": r.to, "relationType": r.relationType}) for r in relations
    ]
    return "\n".join(lines)


def _text(value: Any) -> bool:
    """A JSON string Hivenote can store: lone surrogate escapes (valid JSON) cannot be written as UTF-8."""
    if type(value) is not str:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(
            "contains an unpaired surrogate escape (\\ud800-\\udfff), which is not storable text"
        ) from None
    return True


def _graph_item(item: Any, kind: Any) -> Entity | Relation:
    if kind == "entity":
        name, etype, obs = item.get("name"), item.get("entityType"), item.get("observations")
        if not _text(name) or not _text(etype):
            raise ValueError("an entity needs string 'name' and 'entityType'")
        if not isinstance(obs, list) or not all(_text(o) for o in obs):
            raise ValueError("an entity's 'observations' must be a list of strings")
        entity = Entity(name, etype, tuple(obs))
        if issue := entity_issue(entity):  # the graph tools' limits: an import is no way around them
            raise ValueError(issue)
        return entity
    if kind == "relation":
        f, t, rtype = item.get("from"), item.get("to"), item.get("relationType")
        if not (_text(f) and _text(t) and _text(rtype)):
            raise ValueError("a relation needs string 'from', 'to' and 'relationType'")
        relation = Relation(f, t, rtype)
        if issue := relation_issue(relation):
            raise ValueError(issue)
        return relation
    raise ValueError(f'\'type\' must be "entity" or "relation" (got {kind!r})')


def _parse_memory_line(raw: str) -> Entity | Relation:
    try:
        item = json.loads(raw)
    except (ValueError, RecursionError) as exc:  # nested past Python's stack: a hostile file, refused like bad JSON
        raise ValueError(f"not valid JSON ({exc})") from None
    if not isinstance(item, dict):
        raise ValueError("not a JSON object")
    return _graph_item(item, item.get("type"))


def parse_memory_jsonl(
    text: str, *, skip_bad: bool = False
) -> tuple[list[Entity], list[Relation], list[tuple[int, str]]]:
    """Parse a memory.jsonl. A bad line raises `ImportRejected` (with its number) unless `skip_bad`."""
    entities: list[Entity] = []
    relations: list[Relation] = []
    bad: list[tuple[int, str]] = []
    for number, raw in enumerate(text.split("\n"), start=1):
        if not raw.strip():
            continue
        try:
            item = _parse_memory_line(raw)
        except ValueError as exc:
            if not skip_bad:
                raise ImportRejected(number, str(exc)) from None
            bad.append((number, str(exc)))
            continue
        (entities if isinstance(item, Entity) else relations).append(item)  # type: ignore[arg-type]
    return entities, relations, bad


def _ordinals(items: list[Any]) -> list[int]:
    """For each item, how many equal items came before it in the file (0 for the first copy)."""
    seen: Counter[Any] = Counter()
    out = []
    for item in items:
        key = item.name if isinstance(item, Entity) else item
        out.append(seen[key])
        seen[key] += 1
    return out


def import_graph(
    graph: Graph,
    entities: list[Entity],
    relations: list[Relation],
    summary: ImportSummary,
    *,
    by: Author,
    progress: Progress | None = None,
) -> None:
    """Merge entities and relations idempotently: the i-th copy of a name (or relation) in the file maps to
    the i-th live copy in the graph, so in-file duplicates round-trip and a second import adds nothing;
    missing observations are added to entities that exist."""
    total = len(entities) + len(relations)
    done = 0
    for items, merge in ((entities, _merge_entities), (relations, _merge_relations)):
        numbered = list(zip(items, _ordinals(items), strict=True))
        for start in range(0, len(numbered), BATCH):
            chunk = numbered[start : start + BATCH]

            def decide(state: State, chunk: list[tuple[Any, int]] = chunk, merge: Any = merge) -> list[Payload]:
                payloads: list[Payload] = merge(state, chunk, summary)
                return payloads

            graph.store.write(decide, by)
            done += len(chunk)
            if progress:
                progress(done, total)


def _count(counter: Counter[str], key: str, n: int = 1) -> None:
    if n:
        counter[key] += n


def _merge_entities(state: State, chunk: list[tuple[Entity, int]], summary: ImportSummary) -> list[Payload]:
    payloads: list[Payload] = []
    taken: dict[str, set[int]] = {}  # occurrence keys given to new entities of this chunk
    for entity, nth in chunk:
        name = entity.name
        occs = state.occurrences(name)
        if nth < len(occs):
            k = occs[nth][1]
            _count(summary.skipped, "entities")
            have = Counter(state.observations(occs[nth]))
        else:
            busy = taken.setdefault(name, set())
            busy.update(occ[1] for occ in occs)
            k = 0
            while k in busy:
                k += 1
            busy.add(k)
            payloads.append(("entity.add", {"name": name, "type": entity.entityType, **({"k": k} if k else {})}))
            _count(summary.added, "entities")
            have = Counter()
        wanted = Counter(entity.observations)
        for text in entity.observations:
            if have[text] >= wanted[text]:
                continue
            j = have[text]
            have[text] += 1
            data: dict[str, Any] = {"entity": name, "text": text}
            if k:
                data["k"] = k
            if j:
                data["j"] = j
            data["since"] = state.entity_epoch(name)
            payloads.append(("obs.add", data))
            _count(summary.added, "observations")
    return payloads


def _merge_relations(state: State, chunk: list[tuple[Relation, int]], summary: ImportSummary) -> list[Payload]:
    payloads: list[Payload] = []
    taken: dict[Relation, set[int]] = {}
    for rel, nth in chunk:
        live = state.relation_keys(rel.from_, rel.to, rel.relationType)
        if nth < len(live):
            _count(summary.skipped, "relations")
            continue
        busy = taken.setdefault(rel, {key[3] for key in live})
        j = 0
        while j in busy:
            j += 1
        busy.add(j)
        data: dict[str, Any] = {"from": rel.from_, "to": rel.to, "type": rel.relationType}
        if j:
            data["j"] = j
        payloads.append(("rel.add", data))
        _count(summary.added, "relations")
    return payloads


# -- notebook JSON ----------------------------------------------------------------------------------


def export_notebook(state: State, *, node: str, now_ms: int) -> dict[str, Any]:
    """Every note (trashed ones too) with fields, provenance and timestamps, plus the knowledge graph."""
    notes = sorted(state.iter_notes(), key=lambda n: n.id)
    entities, relations = state.graph()
    return {
        "format": NOTEBOOK_FORMAT,
        "version": 1,
        "exported_at": now_ms,
        "node": node,
        "notes": [n.to_json() for n in notes],
        "graph": {"entities": [e.to_json() for e in entities], "relations": [r.to_json() for r in relations]},
    }


def _parse_note(item: Any) -> dict[str, Any]:
    if not isinstance(item, dict):
        raise InvalidInput("a note must be a JSON object")
    note_id = item.get("id")
    if not isinstance(note_id, str) or not note_id or len(note_id) > 64 or not note_id.isprintable():
        raise InvalidInput("a note needs an 'id' (up to 64 printable characters)")
    fields = {
        "kind": check_kind(item.get("kind")),
        "title": check_title(item.get("title")),
        "body": check_body(item.get("body", "")),
        "tags": check_tags(item.get("tags", [])),
        "project": check_project(item.get("project")),
    }
    replaces = item.get("replaces")
    if replaces is not None:  # the note this one replaces (it may come later in the same file)
        if not isinstance(replaces, str) or not replaces or len(replaces) > 64 or not replaces.isprintable():
            raise InvalidInput("'replaces' must be a note id")
        fields["replaces"] = replaces
    created, updated = _wall(item, "created"), _wall(item, "updated")
    if created is not None and updated is not None and updated < created:
        raise InvalidInput("a note's 'updated' must not be before its 'created'")
    return {
        "id": note_id,
        "fields": fields,
        "trashed": item.get("trashed") is True,
        "created": created,
        "updated": updated,
        "created_by": _writer(item, "created_by"),
        "updated_by": _writer(item, "updated_by"),
    }


def _wall(item: dict[str, Any], key: str) -> int | None:
    """A note's `created` or `updated` in an export (epoch ms), None when the file has none."""
    value = item.get(key)
    if value is None:
        return None
    if type(value) is not int or value < 0:
        raise InvalidInput(f"a note's {key!r} must be a time in epoch milliseconds (got {_shown(value)})")
    return value


def _writer(item: dict[str, Any], key: str) -> tuple[str, str, str] | None:
    """A note's `created_by` or `updated_by` in an export (agent, client, person), None when the file has none."""
    value = item.get(key)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise InvalidInput(f"a note's {key!r} must be an object with agent, client and person")
    parts = tuple(value.get(name, "") for name in ("agent", "client", "person"))
    for part in parts:
        if not _text(part) or len(part) > 200 or not part.isprintable():
            raise InvalidInput(f"a note's {key!r} must hold agent, client and person as short printable text")
    return parts[0], parts[1], parts[2]


def _shown(value: Any) -> str:
    shown = repr(value)
    return shown if len(shown) <= 40 else shown[:37] + "..."


def parse_notebook(
    text: str, *, skip_bad: bool = False
) -> tuple[list[dict[str, Any]], list[Entity], list[Relation], list[tuple[int, str]]]:
    """Parse a notebook export. A bad note raises `ImportRejected` (numbered from 1) unless `skip_bad`."""
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ImportRejected(getattr(exc, "lineno", 1), f"not valid JSON ({exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != NOTEBOOK_FORMAT:
        raise ImportRejected(1, f'not a Hivenote notebook export (expected "format": "{NOTEBOOK_FORMAT}")')
    raw_notes = doc.get("notes", [])
    graph_doc = doc.get("graph") or {}
    if not isinstance(raw_notes, list):
        raise ImportRejected(1, "'notes' must be a list")
    if not isinstance(graph_doc, dict):
        raise ImportRejected(1, "'graph' must be an object with 'entities' and 'relations'")
    notes: list[dict[str, Any]] = []
    entities: list[Entity] = []
    relations: list[Relation] = []
    bad: list[tuple[int, str]] = []

    def reject(unit: str, number: int, reason: str) -> None:
        if not skip_bad:
            raise ImportRejected(number, reason, unit=unit)
        bad.append((number, f"{unit} {number}: {reason}"))

    for number, item in enumerate(raw_notes, start=1):
        try:
            notes.append(_parse_note(item))
        except InvalidInput as exc:
            reject("note", number, str(exc))
    for unit, key, out in (("entity", "entities", entities), ("relation", "relations", relations)):
        items = graph_doc.get(key, [])
        if not isinstance(items, list):
            raise ImportRejected(1, f"'graph.{key}' must be a list")
        for number, item in enumerate(items, start=1):
            try:
                if not isinstance(item, dict):
                    raise ValueError("not a JSON object")
                out.append(_graph_item(item, unit))  # type: ignore[arg-type]
            except ValueError as exc:
                reject(unit, number, str(exc))
    return notes, entities, relations, bad


def import_notes(
    notebook: Notebook,
    notes: list[dict[str, Any]],
    summary: ImportSummary,
    *,
    by: Author,
    source: str = "",
    progress: Progress | None = None,
) -> None:
    """Bring in the notes of an export with their own times and authors: each op is stamped with the export's
    `created` or `updated` and written as its `created_by` or `updated_by`, and carries the import (`by`, now, the
    file `source`) for the note's history. A note not here yet is created (with its trash state); one here already
    keeps its own version when that is as new as the export's or newer, and takes the export's changes otherwise.
    Importing the same file again changes nothing."""
    source = "".join(ch for ch in source if ch.isprintable())[:200]  # a name a client sent: one short line
    imported = Imported(by.agent, by.client, by.person, notebook.store.now_ms(), source)
    for start in range(0, len(notes), BATCH):
        chunk = notes[start : start + BATCH]

        def decide(state: State, chunk: list[dict[str, Any]] = chunk) -> list[Dated]:
            dated: list[Dated] = []
            for item in chunk:
                made = _note_ops(state, item, by, imported)
                if made is None:
                    _count(summary.skipped, "notes")
                    continue
                dated += made[1]
                _count(summary.added, made[0])
            return dated

        notebook.store.write_dated(decide)
        if progress:
            progress(min(start + BATCH, len(notes)), len(notes))


def _note_ops(
    state: State, item: dict[str, Any], importer: Author, imported: Imported
) -> tuple[str, list[Dated]] | None:
    """The ops that bring one exported note in, and what they do ("notes": a new one, "updated": a newer version of
    one here); None when the note here is as new as the export's or newer."""
    note_id, fields = item["id"], item["fields"]
    created, updated = item["created"], item["updated"]
    created_by = _author(item["created_by"], importer, imported)
    updated_by = _author(item["updated_by"] or item["created_by"], importer, imported)
    if updated is None:
        updated = created
    note = state.note(note_id)
    if note is not None:
        if updated is None or note.updated >= updated:
            return None
        current = note.to_json()
        changed = {name: value for name, value in fields.items() if current.get(name) != value}
        if changed.keys() == {"replaces"}:
            changed["kind"] = note.kind  # a line carries a field every reader knows (OPLOG.md `replaces`)
        record = state.notes[note_id]
        purge = record.purge
        since = purge and (purge.wall, purge.counter, purge.node, purge.seq)
        ops: list[Dated] = []
        if changed:
            ops.append(("note.set", {"id": note_id, "fields": changed, "since": since or None}, updated, updated_by))
        if item["trashed"] != note.trashed:
            ops.append(("note.trash" if item["trashed"] else "note.restore", {"id": note_id}, updated, updated_by))
        return ("updated", ops) if ops else None
    gone = state.notes.get(note_id)
    purge = gone.purge if gone is not None else None
    # The purge this import comes after (it re-creates the note); a purge made meanwhile elsewhere wins. Such a note
    # starts again now: its recorded times are before the purge, which ended everything before it.
    since = purge and (purge.wall, purge.counter, purge.node, purge.seq)
    if purge is not None:
        created = updated = None
    if created is None or (updated == created and updated_by == created_by):
        ops = [("note.set", {"id": note_id, "fields": fields, "since": since or None}, created, created_by)]
    else:  # made by one writer, last changed by another or later: the note as the export holds it is the later one's
        first = {"id": note_id, "fields": {"kind": fields["kind"]}, "since": since or None}
        ops = [("note.set", first, created, created_by)]
        ops.append(("note.set", {"id": note_id, "fields": fields, "since": since or None}, updated, updated_by))
    if item["trashed"]:
        ops.append(("note.trash", {"id": note_id}, updated, updated_by))
    return "notes", ops


def _author(writer: tuple[str, str, str] | None, importer: Author, imported: Imported) -> Author:
    """An exported note's writer, with the import that brings the op in (the importer when the file names none)."""
    agent, client, person = writer or (importer.agent, importer.client, importer.person)
    return Author(agent, client, person, imported)


def detect_format(text: str) -> str:
    """`memory-jsonl` or `notebook`, from the content (a bad first line still reads as JSON lines, so the
    error names the line)."""
    stripped = text.lstrip()
    if not stripped:
        return "memory-jsonl"
    try:
        doc = json.loads(stripped)
    except (ValueError, RecursionError):
        first = stripped.split("\n", 1)[0].strip()
        if first == "{":  # a pretty-printed JSON document, broken somewhere: a notebook export
            return "notebook"
        if first.startswith("{"):
            return "memory-jsonl"
    else:
        if isinstance(doc, dict) and "format" in doc:
            return "notebook"
        if isinstance(doc, dict):
            return "memory-jsonl"  # a one-line memory.jsonl
    raise InvalidInput(
        "cannot tell the file's format: it is neither a memory.jsonl (one JSON object per line with a "
        '"type") nor a Hivenote notebook export; pass --format notebook or --format memory-jsonl'
    )
