"""Where one knowledge-graph tool call's time goes at the small end (1,000 entities), as layers peeled off one at a
time, every layer measured interleaved on the same calls:

- `sdk stdio`: the Python MCP SDK as a client over stdio (what bench_graph.py measures: client, bridge, server, tool);
- `raw stdio`: the same JSON-RPC lines over stdio without the SDK client (its validation and machinery gone);
- `raw http`: the same request POSTed to /mcp/graph on a kept-alive connection (the bridge gone);
- `tool`: the use-case itself (Graph), in this process over its own copy of the graph (HTTP and the SDK server gone).

The official server (`@modelcontextprotocol/server-memory`) is measured as `sdk stdio` and `raw stdio` beside it.

    python bench/footprint_graphcall.py [--size 1000] [--rounds 60] [--baseline <folder>]

`--baseline` adds the same three Hivenote layers (`base sdk stdio`, `base raw stdio`, `base raw http`) for another
Hivenote imported from `<folder>` first on PYTHONPATH (see bench_graph.py), measured interleaved: before/after.

Needs `npm ci --prefix tests/tools`.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import Implementation

from hivenote.server.core.model import Entity
from hivenote.server.graph import Graph
from hivenote.server.storage.store import Store

if TYPE_CHECKING:  # run as a script, the project root is put on sys.path
    from bench.bench_graph import HIVENOTE, OFFICIAL, baseline_env, entity_name, hivenote_server, pct, write_seed
    from bench.bench_graph_raw import PROTOCOL, Raw
else:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from bench.bench_graph import HIVENOTE, OFFICIAL, baseline_env, entity_name, hivenote_server, pct, write_seed
    from bench.bench_graph_raw import PROTOCOL, Raw

TOOLS = ("create_entities", "add_observations", "search_nodes", "open_nodes", "delete_entities")
LAYERS = ("official sdk", "official raw", "hn sdk stdio", "hn raw stdio", "hn raw http", "hn tool")
BASE_LAYERS = ("base sdk stdio", "base raw stdio", "base raw http")


class RawHttp:
    """JSON-RPC POSTed to /mcp/graph on one kept-alive connection, as the bridge does."""

    def __init__(self, port: int, token: str) -> None:
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.headers = {
            "Authorization": f"Bearer {token}",
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
        }
        self.next_id = 0
        info = {"name": "bench-http", "version": "1"}
        _, headers = self._post(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": info},
            }
        )
        self.headers["mcp-session-id"] = headers["mcp-session-id"]
        self.headers["mcp-protocol-version"] = PROTOCOL
        self._post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def _post(self, message: dict[str, Any]) -> tuple[bytes, dict[str, str]]:
        self.connection.request("POST", "/mcp/graph", json.dumps(message).encode(), self.headers)
        response = self.connection.getresponse()
        body = response.read()
        if response.status >= 400:
            raise RuntimeError(f"{response.status}: {body[:300]!r}")
        return body, {k.lower(): v for k, v in response.getheaders()}

    def call(self, name: str, arguments: dict[str, Any]) -> None:
        self.next_id += 1
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": "tools/call"}
        body, _ = self._post({**message, "params": {"name": name, "arguments": arguments}})
        if b'"isError":true' in body:
            raise RuntimeError(body[:300].decode())


def tool_calls(graph: Graph) -> dict[str, Callable[[dict[str, Any]], Any]]:
    return {
        "create_entities": lambda a: graph.create_entities(
            [Entity(e["name"], e["entityType"], tuple(e["observations"])) for e in a["entities"]]
        ),
        "add_observations": lambda a: graph.add_observations(
            [(o["entityName"], o["contents"]) for o in a["observations"]]
        ),
        "search_nodes": lambda a: graph.search_nodes(a["query"]),
        "open_nodes": lambda a: graph.open_nodes(a["names"]),
        "delete_entities": lambda a: graph.delete_entities(a["entityNames"]),
    }


def round_calls(round_: int) -> list[tuple[str, dict[str, Any]]]:
    name = f"call-{round_}"
    return [
        ("create_entities", {"entities": [{"name": name, "entityType": "bench", "observations": ["fresh"]}]}),
        ("add_observations", {"observations": [{"entityName": name, "contents": [f"more {round_}"]}]}),
        ("search_nodes", {"query": entity_name(round_ + 10)}),
        ("open_nodes", {"names": [entity_name(round_ + 10), entity_name(round_ + 20)]}),
        ("delete_entities", {"entityNames": [name]}),
    ]


def token_of(data: Path) -> str:
    token: str = json.loads((data / "tokens.json").read_text(encoding="utf-8"))["default"]
    return token


async def measure(
    work: Path, data: Path, port: int, own: Graph, rounds: int, base: tuple[Path, int, dict[str, str]] | None = None
) -> dict[str, dict[str, list[float]]]:
    layers = (*LAYERS, *(BASE_LAYERS if base else ()))
    times: dict[str, dict[str, list[float]]] = {layer: {} for layer in layers}
    token = token_of(data)
    official_env = {**os.environ, "MEMORY_FILE_PATH": str(work / "official.jsonl")}
    raw_official_env = {**os.environ, "MEMORY_FILE_PATH": str(work / "official-raw.jsonl")}
    bridge_argv = [*HIVENOTE, "--data-dir", str(data), "stdio", "--graph", "--port", str(port)]
    client_info = Implementation(name="bench", version="1")
    async with AsyncExitStack() as stack:
        errors = stack.enter_context((work / "stderr.log").open("w", encoding="utf-8"))
        official = StdioServerParameters(command="node", args=[str(OFFICIAL)], env=official_env)
        bridge = StdioServerParameters(command=bridge_argv[0], args=bridge_argv[1:], env={**os.environ})
        sdk = {}
        for label, params in (("official sdk", official), ("hn sdk stdio", bridge)):
            client = Client(stdio_client(params, errlog=errors), client_info=client_info, mode="legacy")
            sdk[label] = await stack.enter_async_context(client)
        raws = {"official raw": Raw(["node", str(OFFICIAL)], raw_official_env), "hn raw stdio": Raw(bridge_argv, {})}
        https = {"hn raw http": RawHttp(port, token)}
        if base is not None:
            base_data, base_port, base_env = base
            base_argv = [*HIVENOTE, "--data-dir", str(base_data), "stdio", "--graph", "--port", str(base_port)]
            params = StdioServerParameters(command=base_argv[0], args=base_argv[1:], env=base_env)
            client = Client(stdio_client(params, errlog=errors), client_info=client_info, mode="legacy")
            sdk["base sdk stdio"] = await stack.enter_async_context(client)
            raws["base raw stdio"] = Raw(base_argv, base_env)
            https["base raw http"] = RawHttp(base_port, token_of(base_data))
        direct = tool_calls(own)
        try:
            for round_ in range(-5, rounds):
                for tool, args in round_calls(round_):
                    for layer in layers:
                        # each layer its own entity names, so every layer's writes do the same work
                        named = json.loads(json.dumps(args).replace("call-", f"{layer.replace(' ', '')}-"))
                        start = time.perf_counter()
                        if layer in sdk:
                            result = await sdk[layer].call_tool(tool, named)
                            assert not result.is_error, (layer, tool, result)
                        elif layer in raws:
                            raws[layer].call("tools/call", {"name": tool, "arguments": named})
                        elif layer in https:
                            https[layer].call(tool, named)
                        else:
                            direct[tool](named)
                        if round_ >= 0:
                            times[layer].setdefault(tool, []).append(time.perf_counter() - start)
        finally:
            for raw in raws.values():
                raw.close()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--baseline", help="a folder to import another Hivenote from, measured as the base layers")
    args = parser.parse_args()
    if not OFFICIAL.exists():
        sys.exit(f"{OFFICIAL} is missing: run `npm ci --prefix tests/tools` first")
    work = Path(tempfile.mkdtemp(prefix="hivenote-graphcall-"))
    try:
        seed = work / "memory.jsonl"
        write_seed(seed, args.size)
        for copy in ("official.jsonl", "official-raw.jsonl"):
            shutil.copyfile(seed, work / copy)
        own_dir = work / "own"
        subprocess.run([*HIVENOTE, "--data-dir", str(own_dir), "import", str(seed)], check=True, capture_output=True)
        with contextlib.ExitStack() as servers:
            store = servers.enter_context(Store(own_dir))
            port = servers.enter_context(hivenote_server(work / "data", seed))
            base = None
            if args.baseline is not None:
                env = baseline_env(args.baseline)
                base = (work / "base", servers.enter_context(hivenote_server(work / "base", seed, env)), env)
            times = anyio.run(measure, work, work / "data", port, Graph(store), args.rounds, base)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"One graph tool call at {args.size:,} entities, p50 ms ({args.rounds} calls each, interleaved)")
    shown = [layer for layer in (*LAYERS, *BASE_LAYERS) if layer in times]
    compared = [layer for layer in ("hn sdk stdio", "base sdk stdio") if layer in times]
    head = "".join(f"{layer:>15}" for layer in shown) + "".join(
        f"{'off/' + c.split()[0] + ' sdk':>13}" for c in compared
    )
    print(f"{'tool':<18}{head}")
    for tool in TOOLS:
        cells = "".join(f"{pct(times[layer][tool], 0.5) * 1e3:>15.2f}" for layer in shown)
        official = pct(times["official sdk"][tool], 0.5)
        ratios = "".join(f"{official / pct(times[c][tool], 0.5):>12.2f}x" for c in compared)
        print(f"{tool:<18}{cells}{ratios}")
    print(f"load average {os.getloadavg()[0]:.1f} / {os.getloadavg()[1]:.1f} / {os.getloadavg()[2]:.1f}")


if __name__ == "__main__":
    main()
