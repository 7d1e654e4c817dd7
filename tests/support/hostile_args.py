"""Hostile arguments for MCP tools (Hypothesis): values shaped by a tool's inputSchema with hostile text where text
goes, or broken on purpose (a field gone, one too many, a value of the wrong type or size somewhere inside)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from hypothesis import strategies as st

Json = Any

HUGE = st.sampled_from([201, 64 * 1024 + 1, 300_000]).map(lambda n: "é" * n)  # past each limit
ODD_TEXT = st.sampled_from(
    ["", " ", "\x00", "a\x00b", "\ud800", "x\udfffy", "\u202e", "\ufeff", "../etc/passwd", "C:\\repo", "~/x", "%s%n"]
)
ANY_TEXT = st.text(st.characters(exclude_categories=()), max_size=30)  # every code point: NUL, lone surrogates, ...
NUMBERS = st.one_of(
    st.integers(-(2**70), 2**70),
    st.sampled_from([0, -1, 2**63, 10**400, -(10**400)]),
    st.floats(allow_nan=True, allow_infinity=True),
)
SCALARS = st.one_of(st.none(), st.booleans(), NUMBERS, ANY_TEXT, ODD_TEXT)
# The SDK's client cannot serialize a lone surrogate in an object key (and over HTTP the SDK refuses one anywhere as a
# parse error: test_json_the_parser_refuses_...), so keys are valid Unicode; values still carry surrogates.
KEY = st.text(max_size=12)
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEY, inner, max_size=3))


def nested(depth: int) -> Json:
    value: Json = "deep"
    for i in range(depth):
        value = [value] if i % 2 else {"x": value}
    return value


# The SDK's client refuses to serialize past about 250 levels; deeper bodies over HTTP: test_json_the_parser_refuses_...
DEEP = st.integers(20, 150).map(nested)
WRONG = st.one_of(JSON, DEEP, NUMBERS, HUGE, ODD_TEXT)


def shaped(schema: dict[str, Any], known: list[str]) -> st.SearchStrategy[Json]:
    """Values of the schema's shape (the subset the tools use), with hostile text where text goes."""
    if "anyOf" in schema:
        return st.one_of([shaped(option, known) for option in schema["anyOf"]])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema.get("type")
    if kind == "object":
        props: dict[str, Any] = schema.get("properties", {})
        required = set(schema.get("required", ()))
        return st.fixed_dictionaries(
            {k: shaped(s, known) for k, s in props.items() if k in required},
            optional={k: shaped(s, known) for k, s in props.items() if k not in required},
        )
    if kind == "array":
        return st.lists(shaped(schema["items"], known), max_size=4)
    if kind == "string":
        return st.one_of(st.sampled_from(known), st.text(max_size=20), ANY_TEXT, ODD_TEXT, HUGE)
    if kind == "integer":
        low, high = schema.get("minimum"), schema.get("maximum")
        edges = [n for n in (-1, 0, 1, 2**63, 10**400) if (low is None or low <= n) and (high is None or n <= high)]
        return st.integers(low, high) | st.sampled_from(edges)
    if kind == "boolean":
        return st.booleans()
    assert kind == "null", schema
    return st.none()


def paths(value: Json, at: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every place in `value` that can be replaced (not the root)."""
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        yield (*at, key)
        yield from paths(item, (*at, key))


def replaced(value: Json, at: tuple[Any, ...], new: Json) -> Json:
    if not at:
        return new
    copy = dict(value) if isinstance(value, dict) else list(value)
    copy[at[0]] = replaced(value[at[0]], at[1:], new)
    return copy


@st.composite
def broken(draw: st.DrawFn, schema: dict[str, Any], known: list[str]) -> dict[str, Json]:
    """A shaped call with one thing wrong: a field gone, a field too many, a value of the wrong type or size
    somewhere inside, or arguments of another shape altogether."""
    args: dict[str, Json] = draw(shaped(schema, known))
    how = draw(st.sampled_from(["drop", "extra", "retype", "whole"]))
    if how == "drop" and args:
        del args[draw(st.sampled_from(sorted(args)))]
    elif how == "extra":
        args[draw(KEY)] = draw(WRONG)
    elif how == "retype" and (places := list(paths(args))):
        args = replaced(args, draw(st.sampled_from(places)), draw(WRONG))
    else:
        args = draw(st.dictionaries(KEY, WRONG, max_size=4))
    return args
