"""The official memory server's wire format, byte for byte: its recorded tool list (plus Hivenote's paging extras on
`read_graph` / `search_nodes`), its argument checks with zod's messages, and its answer text, `JSON.stringify(x, null,
2)`. Pure functions; graph.py serves them."""

from __future__ import annotations

import copy
import importlib.resources
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from json.encoder import encode_basestring as _quote  # C; the escapes of json.dumps(ensure_ascii=False)
from typing import Any, AnyStr, Final

from ..core.model import Entity, Relation

TOOLS_FILE: Final = "official_memory_tools.json"
EXTRA_INPUTS: Final[dict[str, dict[str, Any]]] = {
    "limit": {
        "type": "integer",
        "minimum": 1,
        "description": "Return at most this many entities (with the relations touching them) and the total count",
    },
    "offset": {"type": "integer", "minimum": 0, "description": "Skip this many entities first, to page through"},
    "namesOnly": {"type": "boolean", "description": "Return entity names instead of whole entities"},
}
PAGED_TOOLS: Final = ("read_graph", "search_nodes")


def official_tools() -> list[dict[str, Any]]:
    """The official `tools/list` result's tools, as recorded from the real server (shipped as package data)."""
    assert __package__, "imported as hivenote.server.mcp.wire"
    text = importlib.resources.files(__package__).joinpath(TOOLS_FILE).read_text(encoding="utf-8")
    tools: list[dict[str, Any]] = json.loads(text)["tools"]
    return tools


def with_paging(tool: dict[str, Any]) -> dict[str, Any]:
    """`read_graph` / `search_nodes` taking `limit`, `offset`, `namesOnly`, and answering with a `total`."""
    tool = copy.deepcopy(tool)
    tool["inputSchema"]["properties"].update(copy.deepcopy(EXTRA_INPUTS))
    output = tool["outputSchema"]
    output["properties"]["names"] = {"type": "array", "items": {"type": "string"}}
    output["properties"]["total"] = {"type": "integer"}
    output["required"] = ["relations"]  # a names-only page has `names` instead of `entities`
    return tool


# -- arguments: the official server's zod checks, message for message -------------------------------------------------

_MISSING: Final = object()


def _received(value: object) -> str:
    """zod's name for the type of a JSON value."""
    if value is _MISSING:
        return "undefined"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _at(path: tuple[str | int, ...]) -> str:
    """The TypeScript SDK's issue path: ` at entities[0].entityType` (nothing for the arguments object itself)."""
    if not path:
        return ""
    out = str(path[0])
    for part in path[1:]:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return f" at {out}"


def schema_issues(value: object, schema: Mapping[str, Any], path: tuple[str | int, ...] = ()) -> list[str]:
    """What zod reports for `value` against the JSON Schema it generated (objects, arrays, strings, plus the
    integers and booleans of the paging extras), in schema order, one line per issue."""
    kind = schema.get("type")
    if kind == "object":
        if not isinstance(value, dict):
            return [f"Invalid input: expected object, received {_received(value)}{_at(path)}"]
        required = set(schema.get("required", ()))
        issues: list[str] = []
        for key, sub in schema.get("properties", {}).items():
            item = value.get(key, _MISSING)
            if item is not _MISSING or key in required:
                issues += schema_issues(item, sub, (*path, key))
        return issues  # unknown keys are dropped, not reported, as zod does
    if kind == "array":
        if not isinstance(value, list):
            return [f"Invalid input: expected array, received {_received(value)}{_at(path)}"]
        return [issue for i, item in enumerate(value) for issue in schema_issues(item, schema["items"], (*path, i))]
    if kind == "integer":
        if _received(value) != "number":
            return [f"Invalid input: expected number, received {_received(value)}{_at(path)}"]
        assert isinstance(value, int | float)
        if isinstance(value, float) and not value.is_integer():  # not float(value): a huge int overflows it
            return [f"Invalid input: expected int, received number{_at(path)}"]
        if "minimum" in schema and value < schema["minimum"]:
            return [f"Too small: expected number to be >={schema['minimum']}{_at(path)}"]
        return []
    if kind in ("string", "boolean") and _received(value) != kind:
        return [f"Invalid input: expected {kind}, received {_received(value)}{_at(path)}"]
    return []


def js_stringify(value: Any) -> str:
    """JavaScript's `JSON.stringify(value, null, 2)`, which the official server puts in `content[0].text`: the text of
    `json.dumps(value, indent=2, ensure_ascii=False)`, made without its pure-Python indenting encoder (most of a big
    read_graph's time went there)."""
    out: list[str] = []
    _indented(value, "\n", out)
    return "".join(out)


def _indented(value: Any, newline: str, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(_quote(value))
    elif isinstance(value, dict):
        if not value:
            out.append("{}")
            return
        inner = newline + "  "
        if all(type(item) is str for item in value.values()):  # a relation: one join
            out.append("{" + inner + ("," + inner).join(_quote(k) + ": " + _quote(v) for k, v in value.items()))
        else:
            sep = "{" + inner
            for key, item in value.items():
                out.append(sep + _quote(key) + ": ")
                _indented(item, inner, out)
                sep = "," + inner
        out.append(newline + "}")
    elif isinstance(value, list | tuple):
        if not value:
            out.append("[]")
            return
        inner = newline + "  "
        if all(type(item) is str for item in value):  # observations: one join
            out.append("[" + inner + ("," + inner).join(map(_quote, value)))
        else:
            sep = "[" + inner
            for item in value:
                out.append(sep)
                _indented(item, inner, out)
                sep = "," + inner
        out.append(newline + "]")
    else:  # numbers, booleans, null
        out.append(json.dumps(value))


def entity_text(e: Entity) -> str:
    """One entity of a graph answer's text, indented as it sits in the `entities` array."""
    observations = (
        "[\n        " + ",\n        ".join(map(_quote, e.observations)) + "\n      ]" if e.observations else "[]"
    )
    return (
        f'{{\n      "name": {_quote(e.name)},\n      "entityType": {_quote(e.entityType)},\n      "observations": '
        f"{observations}\n    }}"
    )


def relation_text(r: Relation) -> str:
    """One relation of a graph answer's text, indented as it sits in the `relations` array."""
    return (
        f'{{\n      "from": {_quote(r.from_)},\n      "to": {_quote(r.to)},\n      '
        f'"relationType": {_quote(r.relationType)}\n    }}'
    )


def array_layout(items: Sequence[AnyStr], literal: Callable[[str], AnyStr]) -> AnyStr:
    """A graph answer's `entities` or `relations` array around its items' texts. `literal` turns the layout's own
    pieces into the items' kind: `str` for the text itself, or an encoder when the items are already encoded (as a
    JSON string's bytes: escaping goes character by character, so escaped pieces joined are the joined text escaped)."""
    if not items:
        return literal("[]")
    return literal("").join((literal("[\n    "), literal(",\n    ").join(items), literal("\n  ]")))


def graph_layout(entities: AnyStr, relations: AnyStr, literal: Callable[[str], AnyStr]) -> AnyStr:
    """A graph answer's text around its two arrays (`array_layout`)."""
    # One join: the arrays can be megabytes, and each `+` would copy them again.
    return literal("").join(
        (literal('{\n  "entities": '), entities, literal(',\n  "relations": '), relations, literal("\n}"))
    )


def graph_text(entities: Iterable[Entity], relations: Iterable[Relation]) -> str:
    """`js_stringify(graph_json(entities, relations))` written straight from the objects: a graph is the biggest
    answer there is (read_graph), and this is four times quicker than walking its JSON value."""
    ents = array_layout([entity_text(e) for e in entities], str)
    return graph_layout(ents, array_layout([relation_text(r) for r in relations], str), str)
