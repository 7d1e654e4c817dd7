"""Hostile files in the log folder never crash the fold: huge lines, invalid UTF-8, deeply nested JSON, NUL bytes,
valid JSON of the wrong shape, ops with absurd values, and arbitrary bytes (Hypothesis). Good lines around them are
folded; bad ones are counted and kept, never deleted."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hivenote.server.notebook import Notebook
from hivenote.server.storage.store import Store


def good_line(node: str, seq: int, title: str) -> bytes:
    op = {
        "v": 1,
        "node": node,
        "seq": seq,
        "hlc": [1_800_000_000_000 + seq, 0],
        "op": "note.set",
        "id": f"01JDX5H2{seq:018d}",
        "fields": {"kind": "fact", "title": title},
        "by": {"agent": "cursor", "client": "x", "person": ""},
    }
    return json.dumps(op).encode() + b"\n"


HOSTILE = [
    b"x" * (8 << 20) + b"\n",  # an 8 MiB line
    b"\xff\xfe\xfa not utf-8 \xc3\x28\n",
    b"[" * 100_000 + b"]" * 100_000 + b"\n",  # nesting far past the parser's recursion limit
    b'{"v": 1, "op": "note.set", "node": "other-1", "seq": 1, "hlc": [1, 0], "id": "\x00"}\n',
    b"null\n",
    b'{"v": 1}\n',
    b'{"v": 1, "op": "note.set", "node": "other-1", "seq": -5, "hlc": [1, 0]}\n',
    b'{"v": 1, "op": "note.set", "node": "other-1", "seq": 2, "hlc": ["a", {}], "id": 7, "fields": []}\n',
    b'{"v": 1, "op": "note.set", "node": "other-1", "seq": 3, "hlc": [1e308, 0], "id": "x", "fields": {}}\n',
    b'{"v": 99, "op": "future.thing", "node": "other-1", "seq": 4, "hlc": [1, 0]}\n',
    b"\n\n\r\n",
    b"\x00" * 1000 + b"\n",
]


def test_hostile_lines_are_skipped_counted_and_kept(tmp_path: Path) -> None:
    log = tmp_path / "data" / "log"
    log.mkdir(parents=True)
    shard = log / "other-1.jsonl"
    content = good_line("other-1", 10, "before") + b"".join(HOSTILE) + good_line("other-1", 11, "after")
    shard.write_bytes(content)
    with Store(tmp_path / "data") as store:
        titles = sorted(n.title for n in Notebook(store).list(limit=10)[0])
        health = store.health()["other-1.jsonl"]
    assert titles == ["after", "before"]
    assert health.bad + health.unknown >= len(HOSTILE) - 1  # the blank-lines entry may count as skipped lines
    assert health.unknown >= 1  # the op from a newer version is reported as such
    assert shard.read_bytes() == content  # nothing deleted or rewritten


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(noise=st.lists(st.binary(max_size=300), max_size=20))
def test_arbitrary_bytes_never_crash_the_fold(tmp_path: Path, noise: list[bytes]) -> None:
    data = Path(tempfile.mkdtemp(dir=tmp_path))  # a fresh data dir per example
    log = data / "log"
    log.mkdir()
    (log / "other-2.jsonl").write_bytes(b"\n".join(noise) + b"\n" + good_line("other-2", 1, "survivor"))
    with Store(data) as store:
        assert [n.title for n in Notebook(store).list(limit=10)[0]] == ["survivor"]
