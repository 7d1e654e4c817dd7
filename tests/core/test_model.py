"""Log lines: anything a file can hold decodes to an op or a clear CorruptLine, never a crash."""

from __future__ import annotations

import contextlib
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hivenote.server.core.model import CorruptLine, UnknownOp, decode_op
from hivenote.server.render import ago, machine

VALID = {"v": 1, "node": "n-0001", "seq": 1, "hlc": [5, 0], "op": "note.set", "id": "N", "fields": {"title": "t"}}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=10,
)


@given(st.binary(max_size=200))
def test_arbitrary_bytes_never_crash_the_decoder(line: bytes) -> None:
    with contextlib.suppress(CorruptLine):
        decode_op(line)


@given(st.sampled_from(sorted(VALID)), json_values)
def test_a_valid_op_with_one_field_replaced_decodes_or_is_refused_cleanly(key: str, value: object) -> None:
    try:
        op = decode_op(json.dumps({**VALID, key: value}))
    except CorruptLine:
        return
    assert op.node and op.seq >= 1


@pytest.mark.parametrize(
    "line",
    [
        b"[" * 100_000 + b"]" * 100_000,  # deep nesting
        b'{"v":1,"op":"note.set","node":"n","seq":1,"hlc":[1,0],"id":"x","fields":{"title":"\xff"}}',  # bad UTF-8
        b'{"v":1,"op":"note.set","node":"n","seq":0,"hlc":[1,0],"id":"x","fields":{"title":"t"}}',
        b'{"v":1,"op":"note.set","node":"n","seq":1,"hlc":[1],"id":"x","fields":{"title":"t"}}',
        b'{"v":1,"op":"note.set","node":"n","seq":1,"hlc":[1,0],"id":"x","fields":{"colour":"red"}}',
        b'{"v":1,"op":"obs.add","node":"n","seq":1,"hlc":[1,0],"entity":"e","text":"t","j":-1}',
        b'{"v":1,"op":"note.set","node":"n","seq":1,"hlc":[1,0],"id":"x","fields":{"title":"t"},"by":"me"}',
        b'{"v":true,"op":"note.set"}',
    ],
)
def test_hostile_lines_are_refused_with_a_reason(line: bytes) -> None:
    with pytest.raises(CorruptLine) as refused:
        decode_op(line)
    assert str(refused.value)


def test_lines_from_a_newer_version_are_unknown_not_corrupt() -> None:
    with pytest.raises(UnknownOp, match="newer than this Hivenote"):
        decode_op(json.dumps({**VALID, "v": 2}))
    with pytest.raises(UnknownOp):
        decode_op(json.dumps({**VALID, "op": "note.pin"}))


def test_relative_times_read_naturally() -> None:
    now = 10_000_000_000
    assert ago(now, now) == "just now"
    assert ago(now - 61_000, now) == "1 minute ago"
    assert ago(now - 3 * 86_400_000, now) == "3 days ago"
    assert ago(now + 50_000, now) == "just now"  # a skewed clock never says "in the future"


def test_machine_is_the_hostname_part_of_a_node_id() -> None:
    assert machine("laptop-7f3a") == "laptop"
    assert machine("build-box-01ab") == "build-box"
    assert machine("odd") == "odd"
