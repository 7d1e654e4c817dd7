"""The servers' own cost per graph call, without a client SDK in the way: raw JSON-RPC lines over stdio to the official
`@modelcontextprotocol/server-memory` and to `hivenote stdio --graph` (the bridge and the server behind it), on the same
seeded graph, interleaved. bench_graph.py measures what an SDK client sees; there, a Python client validating a whole
graph against its output schema takes most of a read_graph's time on both sides, which hides the servers' difference.

    python bench/bench_graph_raw.py [--size 1000] [--rounds 40]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:  # run as a script, the project root is put on sys.path
    from bench.bench_graph import HIVENOTE, OFFICIAL, entity_name, hivenote_server, pct, write_seed
else:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from bench.bench_graph import HIVENOTE, OFFICIAL, entity_name, hivenote_server, pct, write_seed

PROTOCOL = "2025-06-18"


class Raw:
    """One stdio MCP server driven by hand: a request line out, lines in until the answer with its id."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self.stdin: IO[bytes] = self.process.stdin
        self.stdout: IO[bytes] = self.process.stdout
        self.next_id = 0
        info = {"name": "bench-raw", "version": "1"}
        self.call("initialize", {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": info})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message: dict[str, Any]) -> None:
        self.stdin.write(json.dumps(message).encode() + b"\n")
        self.stdin.flush()

    def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        while True:
            line = self.stdout.readline()
            if not line:
                raise RuntimeError(f"the server ended while answering {method}")
            answer: dict[str, Any] = json.loads(line)
            if answer.get("id") == self.next_id:
                if "result" not in answer or answer["result"].get("isError"):
                    raise RuntimeError(f"{method} failed: {str(answer)[:300]}")
                return answer

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


def run(size: int, rounds: int) -> dict[str, dict[str, list[float]]]:
    work = Path(tempfile.mkdtemp(prefix=f"hivenote-bench-raw-{size}-"))
    times: dict[str, dict[str, list[float]]] = {"official": {}, "hivenote": {}}
    try:
        seed = work / "memory.jsonl"
        write_seed(seed, size)
        shutil.copyfile(seed, work / "official.jsonl")
        data_dir = work / "data"
        with hivenote_server(data_dir, seed) as port:
            servers = {
                "official": Raw(
                    ["node", str(OFFICIAL)], {**os.environ, "MEMORY_FILE_PATH": str(work / "official.jsonl")}
                ),
                "hivenote": Raw(
                    [*HIVENOTE, "--data-dir", str(data_dir), "stdio", "--graph", "--port", str(port)], {**os.environ}
                ),
            }
            try:
                for round_ in range(-5, rounds):  # five warm-up rounds, not kept
                    entity = {"name": f"raw-{round_}", "entityType": "bench", "observations": ["measured"]}
                    calls: tuple[tuple[str, dict[str, Any]], ...] = (
                        ("create_entities", {"entities": [entity]}),
                        ("read_graph (after a write)", {}),
                        ("read_graph", {}),
                        ("search_nodes", {"query": entity_name(round_ + 10)}),
                        ("open_nodes", {"names": [entity_name(round_ + 10), entity_name(round_ + 20)]}),
                    )
                    for label, args in calls:
                        for target, server in servers.items():
                            start = time.perf_counter()
                            server.call("tools/call", {"name": label.split(" ")[0], "arguments": args})
                            if round_ >= 0:
                                times[target].setdefault(label, []).append(time.perf_counter() - start)
            finally:
                for server in servers.values():
                    server.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=1000, help="entities in the seeded graph")
    parser.add_argument("--rounds", type=int, default=40, help="measured calls per tool and server")
    args = parser.parse_args()
    times = run(args.size, args.rounds)
    print(f"Raw JSON-RPC over stdio at {args.size:,} entities, {args.rounds} calls each, interleaved (ms)")
    print(f"{'tool':<28}{'official p50/p99':>18}{'hivenote p50/p99':>18}{'off/hn p50':>12}")
    for label, official in times["official"].items():
        ours = times["hivenote"][label]
        ratio = pct(official, 0.5) / pct(ours, 0.5)
        off, hn = (f"{pct(t, 0.5) * 1e3:.2f} / {pct(t, 0.99) * 1e3:.2f}" for t in (official, ours))
        print(f"{label:<28}{off:>18}{hn:>18}{ratio:>11.2f}x")


if __name__ == "__main__":
    main()
