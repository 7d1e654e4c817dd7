"""The official memory server's recorded transcript as data, and the Graph API answering the way that server's tools
answer, so tests compare Hivenote with the real `@modelcontextprotocol/server-memory` byte for byte.

The transcript (raw JSON-RPC, `>>> ` request / `<<< ` response) is the reference: nothing here restates its outputs.
"""

from __future__ import annotations

import ast
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hivenote.server.core.model import Entity, Relation
from hivenote.server.graph import Graph, graph_json

REFERENCE = Path(__file__).parent / "reference"  # recorded from the real server: its transcript and its tool list
TRANSCRIPT_NAME = "official-memory-transcript.txt"
_CANDIDATES = (
    REFERENCE / TRANSCRIPT_NAME,  # vendored: recorded from the real server
)

# Requests answered by the MCP layer (not built yet), never by a graph operation, with why they are not replayed.
PROTOCOL_ONLY = {
    "initialize": "MCP handshake",
    "tools/list": "tool listing (MCP layer)",
    "resources/list": "resource listing (MCP layer)",
    "resources/templates/list": "resource listing (MCP layer)",
    "resources/subscribe": "subscriptions (MCP layer)",
    "resources/unsubscribe": "subscriptions (MCP layer)",
}
SCHEMA_ERROR_PREFIX = "MCP error -32602: "


def transcript_path() -> Path:
    """Where the recorded transcript is: `$HIVENOTE_OFFICIAL_TRANSCRIPT`, beside the tests, or the shared folder."""
    override = os.environ.get("HIVENOTE_OFFICIAL_TRANSCRIPT")
    if override:
        return Path(override)
    for candidate in _CANDIDATES:
        if candidate.exists():
            return candidate
    raise FileNotFoundError(f"the official transcript is missing; looked in {', '.join(map(str, _CANDIDATES))}")


@dataclass(frozen=True, slots=True)
class Exchange:
    """One replayable request and the official server's JSON-RPC `result` for it."""

    id: int
    section: str
    method: str  # "tools/call" or "resources/read"
    tool: str  # the tool's name; "" for resources/read
    arguments: dict[str, Any]
    result: dict[str, Any]

    @property
    def is_error(self) -> bool:
        return self.result.get("isError") is True

    @property
    def text(self) -> str:
        """`content[0].text` (tools) or `contents[0].text` (resources) exactly as the server sent it."""
        items = self.result["content"] if self.method == "tools/call" else self.result["contents"]
        text = items[0]["text"]
        assert isinstance(text, str)
        return text


@dataclass(frozen=True, slots=True)
class FileContents:
    """The official `MEMORY_FILE_PATH` as dumped between two exchanges; None when the file did not exist yet."""

    label: str
    content: str | None


@dataclass(frozen=True, slots=True)
class Skipped:
    id: int
    what: str
    reason: str


@dataclass
class AppendixCase:
    """A separate run whose requests were not recorded: only its title and responses (JSON-RPC id -> message)."""

    title: str
    responses: dict[int, dict[str, Any]] = field(default_factory=dict)


@dataclass
class Transcript:
    steps: list[Exchange | FileContents] = field(default_factory=list)  # the main run, in order
    skipped: list[Skipped] = field(default_factory=list)
    appendix: list[AppendixCase] = field(default_factory=list)

    @property
    def exchanges(self) -> list[Exchange]:
        return [s for s in self.steps if isinstance(s, Exchange)]

    @property
    def files(self) -> list[FileContents]:
        return [s for s in self.steps if isinstance(s, FileContents)]


def parse_transcript(text: str) -> Transcript:
    """The main run as exchanges and file dumps in order, what is not replayed (and why), and the appendix runs."""
    out = Transcript()
    section = ""
    appendix = False
    pending: dict[int, dict[str, Any]] = {}
    lines = iter(text.split("\n"))
    for line in lines:
        if line.startswith("## APPENDIX"):
            appendix = True
        elif appendix and line.startswith("### "):
            out.appendix.append(AppendixCase(line[4:]))
        elif appendix and line.startswith("{"):
            message = json.loads(line)
            out.appendix[-1].responses[message["id"]] = message
        elif line.startswith("## "):
            section = line[3:]
        elif line.startswith("--- ") and "contents of MEMORY_FILE_PATH" in line:
            dumped = next(lines)
            label = line[4:].split(":", 1)[0]
            content = None if dumped == "(file does not exist)" else ast.literal_eval(dumped)
            assert content is None or isinstance(content, str), dumped
            out.steps.append(FileContents(label, content))
        elif line.startswith(">>> "):
            request = json.loads(line[4:])
            if "id" in request:  # notifications (no id) get no answer
                pending[request["id"]] = request
        elif line.startswith("<<< "):
            message = json.loads(line[4:])
            if "id" not in message:
                continue  # notifications/resources/updated: sent by the MCP layer before each mutation's answer
            request = pending.pop(message["id"])
            _add_exchange(out, section, request, message["result"])
        # Anything else is a comment or the pretty-printed copy of a raw line above it.
    if pending:
        raise ValueError(f"requests without a response in the transcript: {sorted(pending)}")
    return out


def _add_exchange(out: Transcript, section: str, request: dict[str, Any], result: dict[str, Any]) -> None:
    method, params, rid = request["method"], request.get("params", {}), request["id"]
    if method in PROTOCOL_ONLY:
        out.skipped.append(Skipped(rid, method, PROTOCOL_ONLY[method]))
        return
    if method == "tools/call":
        tool = params["name"]
        if result.get("isError") and result["content"][0]["text"].startswith(SCHEMA_ERROR_PREFIX):
            # Arguments that fail the tool's input schema, and unknown tool names, are answered by the MCP SDK
            # before any tool code runs: they belong to the MCP layer's tests, not to the graph's.
            out.skipped.append(Skipped(rid, tool, "answered by the MCP layer (input schema / unknown tool)"))
            return
        out.steps.append(Exchange(rid, section, method, tool, params.get("arguments", {}), result))
        return
    if method == "resources/read":
        out.steps.append(Exchange(rid, section, method, "", params, result))
        return
    raise ValueError(f"the transcript has a request this parser does not know: {method}")


def load_transcript() -> Transcript:
    return parse_transcript(transcript_path().read_text(encoding="utf-8"))


# -- Hivenote answering like the official tools ------------------------------------------------------


def js_stringify(value: Any) -> str:
    """JavaScript's `JSON.stringify(value, null, 2)`."""
    return json.dumps(value, indent=2, ensure_ascii=False)


def compact(value: Any) -> str:
    """JSON as it travels on the wire (compact, keys in their order), to compare key order too."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _relations(items: list[dict[str, str]]) -> list[Relation]:
    return [Relation(r["from"], r["to"], r["relationType"]) for r in items]


def _deleted(what: str) -> tuple[str, dict[str, Any]]:
    message = f"{what} deleted successfully"
    return message, {"success": True, "message": message}


def call_tool(graph: Graph, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Run the official tool `tool` through the Graph API and shape the answer as its `tools/call` result.

    Errors (EntityNotFound) propagate: turning them into `isError` results is the MCP layer's job.
    """
    text: str
    structured: dict[str, Any]
    if tool == "create_entities":
        entities = [Entity(e["name"], e["entityType"], tuple(e["observations"])) for e in arguments["entities"]]
        added = [e.to_json() for e in graph.create_entities(entities)]
        text, structured = js_stringify(added), {"entities": added}
    elif tool == "create_relations":
        new = [r.to_json() for r in graph.create_relations(_relations(arguments["relations"]))]
        text, structured = js_stringify(new), {"relations": new}
    elif tool == "add_observations":
        pairs = [(o["entityName"], list(o["contents"])) for o in arguments["observations"]]
        results = [{"entityName": n, "addedObservations": a} for n, a in graph.add_observations(pairs)]
        text, structured = js_stringify(results), {"results": results}
    elif tool == "delete_entities":
        graph.delete_entities(list(arguments["entityNames"]))
        text, structured = _deleted("Entities")
    elif tool == "delete_observations":
        graph.delete_observations([(d["entityName"], list(d["observations"])) for d in arguments["deletions"]])
        text, structured = _deleted("Observations")
    elif tool == "delete_relations":
        graph.delete_relations(_relations(arguments["relations"]))
        text, structured = _deleted("Relations")
    elif tool in ("read_graph", "search_nodes", "open_nodes"):
        if tool == "read_graph":
            entities, relations = graph.read_graph()
        elif tool == "search_nodes":
            entities, relations = graph.search_nodes(arguments["query"])
        else:
            entities, relations = graph.open_nodes(list(arguments["names"]))
        structured = graph_json(entities, relations)
        text = js_stringify(structured)
    else:
        raise ValueError(f"not an official memory tool: {tool}")
    return {"content": [{"type": "text", "text": text}], "structuredContent": structured}


def read_resource(graph: Graph, uri: str) -> dict[str, Any]:
    """`resources/read` of `memory://knowledge-graph`: the whole graph as pretty JSON."""
    assert uri == "memory://knowledge-graph", uri
    text = js_stringify(graph_json(*graph.read_graph()))
    return {"contents": [{"uri": uri, "mimeType": "application/json", "text": text}]}


def answer(graph: Graph, exchange: Exchange) -> dict[str, Any]:
    if exchange.method == "resources/read":
        return read_resource(graph, exchange.arguments["uri"])
    return call_tool(graph, exchange.tool, exchange.arguments)
