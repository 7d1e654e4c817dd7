"""Hostile files at the import door (REST, as the dashboard and the CLI send them) and what an export names itself:
nesting past Python's stack, hostile ids, oversized files. Each is refused with a reason and writes nothing."""

from __future__ import annotations

import contextlib
import http.client
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.live import Running, fetch, serve

DEEP = 100_000  # far past Python's recursion limit


@pytest.fixture
def running(tmp_path: Path) -> Iterator[Running]:
    with serve(tmp_path / "data", max_import_bytes=1 << 20) as server:
        yield server


def shard_size(running: Running) -> int:
    path = running.store.shard_path
    return path.stat().st_size if path is not None and path.exists() else 0


def import_file(running: Running, raw: bytes, query: str = "") -> tuple[int, dict[str, str]]:
    headers = {"Authorization": f"Bearer {running.token}", "Content-Type": "application/octet-stream"}
    status, _, body = fetch(f"{running.url}/api/import{query}", headers, raw)
    return status, body.get("error", {}) if isinstance(body, dict) else {}


ENTITY = json.dumps({"type": "entity", "name": "a", "entityType": "t", "observations": []})
NESTED = {
    "a whole file of brackets": "[" * DEEP + "]" * DEEP,
    "a notebook export with deep notes": '{"format": "hivenote-notebook", "notes": ' + "[" * DEEP + "]" * DEEP + "}",
    "a memory.jsonl with one deep line": ENTITY + "\n" + '{"type": "entity", "name": ' + "[" * DEEP + "]" * DEEP + "}",
}


@pytest.mark.parametrize("shape", NESTED)
def test_json_nested_past_the_stack_is_refused_as_bad_json_and_writes_nothing(running: Running, shape: str) -> None:
    before = shard_size(running)
    status, error = import_file(running, NESTED[shape].encode())
    assert status == 400, (shape, error)
    assert error["code"] == "invalid"
    assert "not valid JSON" in error["message"] or "cannot tell the file's format" in error["message"]
    assert shard_size(running) == before


def test_a_deep_line_is_skipped_with_its_number_when_asked_and_the_good_lines_come_in(running: Running) -> None:
    status, _, body = fetch(
        f"{running.url}/api/import?skip_bad=true&format=memory-jsonl",
        {"Authorization": f"Bearer {running.token}"},
        NESTED["a memory.jsonl with one deep line"].encode(),
    )
    assert status == 200, body
    assert body["added"] == {"entities": 1}
    assert [r["line"] for r in body["rejected"]] == [2]


@pytest.mark.parametrize(
    "note_id",
    ["", "x" * 65, "line\nbreak", "nul\x00byte", "bell\x07", 7, None],
)
def test_a_hostile_note_id_is_refused_with_the_whole_file(running: Running, note_id: object) -> None:
    doc = {"format": "hivenote-notebook", "notes": [{"id": note_id, "kind": "fact", "title": "t"}]}
    before = shard_size(running)
    status, error = import_file(running, json.dumps(doc).encode())
    assert status == 400 and "note 1" in error["message"] and "'id'" in error["message"], error
    assert shard_size(running) == before


def test_a_file_over_the_import_limit_is_refused_before_it_is_read(running: Running) -> None:
    before = shard_size(running)
    host, port = running.url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        connection.putrequest("POST", "/api/import")
        connection.putheader("Authorization", f"Bearer {running.token}")
        connection.putheader("Content-Length", str((1 << 20) + 1))
        connection.endheaders()
        with contextlib.suppress(OSError):  # the server may close once it has answered
            connection.send(b"\n" * ((1 << 20) + 1))
        response = connection.getresponse()
        assert (response.status, json.loads(response.read())["error"]["code"]) == (413, "too_large")
    finally:
        connection.close()
    assert shard_size(running) == before


def test_an_export_names_its_own_file_whatever_the_notes_say(running: Running) -> None:
    """The download's name never comes from note text, so no note can make the browser save `../../.bashrc`."""
    headers = {"Authorization": f"Bearer {running.token}", "Content-Type": "application/json"}
    note = {"kind": "fact", "title": '../../.bashrc"; filename="evil.sh', "tags": ["../../x"]}
    assert fetch(f"{running.url}/api/notes", headers, json.dumps(note).encode())[0] == 201
    for query, name in (("", "notebook.json"), ("?format=memory-jsonl", "memory.jsonl")):
        status, got, _ = fetch(f"{running.url}/api/export{query}", {"Authorization": f"Bearer {running.token}"})
        assert status == 200
        assert got["content-disposition"] == f'attachment; filename="{name}"'
