"""A soak driver: the tray app doing what a day of ordinary use does, round after round, with its memory sampled after
each round (RSS and PSS of the tray process; the dashboard window is a process of its own and ends when closed).
tests/desktop/test_soak.py runs it for a few rounds and asserts the tray stays flat; bench/bench_soak.py runs it for
as long as asked and prints the curve.

One round: agents connect over MCP (real SDK clients, each named as a product names itself), remember, search,
list and leave; one connects through `hivenote stdio` (a stdio-only client) and leaves; the dashboard window is
opened and closed; a connect snippet is copied from the menu; the server is stopped and started from the menu;
another machine's ops arrive through the synced log folder (as a sync tool brings them). It runs under a private
Xvfb + session bus with a StatusNotifier host (tests/support/harness.py), so the icon, menu and status ticker run as
on a desktop.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio

from tests.support.harness import Desktop, TrayItem, start_desktop
from tests.support.live import INITIALIZED, free_port, health, initialize, mcp_session
from tests.support.wait import eventually


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text(encoding="utf-8").splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


WAIT_S = 60
WINDOW = "^Hivenote$"
AGENTS = ("cursor-vscode", "claude-code", "codex", "gemini-cli", "windsurf", "zed")
PEER = "laptop-peer-0001"


def pss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text(encoding="utf-8").splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no Pss")


def title(item: TrayItem) -> str:
    return str(item.prop("Title"))


def offers(item: TrayItem, label: str) -> bool:
    """The tray's menu has an enabled item `label` at its top level now."""
    item.about_to_show(0)
    return any(entry.label == label and entry.enabled and entry.visible for entry in item.menu())


def token_of(data: Path) -> str:
    token = json.loads((data / "tokens.json").read_text(encoding="utf-8"))["default"]
    assert isinstance(token, str)
    return token


class Peer:
    """Another machine's shard in the synced folder, growing as a sync tool would bring it (whole lines)."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / f"{PEER}.jsonl"
        self.seq = 0

    def bring(self, count: int) -> None:
        lines = []
        for _ in range(count):
            self.seq += 1
            op = {
                "v": 1,
                "node": PEER,
                "seq": self.seq,
                "hlc": [1_760_000_000_000 + self.seq, 0],
                "op": "note.set",
                "id": f"01PEER{self.seq:020d}",
                "fields": {"kind": "fact", "title": f"peer note {self.seq}", "body": "brought by the sync tool"},
                "by": {"agent": "cursor"},
            }
            lines.append(json.dumps(op, separators=(",", ":")) + "\n")
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write("".join(lines))


async def agents_visit(port: int, token: str, names: list[str], round_: int) -> None:
    async def one(name: str) -> None:
        async with mcp_session(f"http://127.0.0.1:{port}/mcp", token, name) as client:
            await client.call_tool(
                "brain_remember",
                {"kind": "fact", "title": f"soak {name} {round_}", "body": "what an agent writes in a day"},
            )
            await client.call_tool("brain_search", {"query": "soak"})
            await client.call_tool("brain_list", {})

    async with anyio.create_task_group() as tasks:
        for name in names:
            tasks.start_soon(one, name)


def stdio_visit(data: Path, port: int) -> None:
    """A stdio-only client: initialize, one tool call, gone."""
    argv = [sys.executable, "-m", "hivenote.server.cli", "--data-dir", str(data), "stdio", "--port", str(port)]
    messages: list[dict[str, Any]] = [
        initialize("claude-ai"),
        INITIALIZED,
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "brain_search", "arguments": {"query": "soak"}},
        },
    ]
    with subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        for message in messages:
            proc.stdin.write(json.dumps(message).encode() + b"\n")
            proc.stdin.flush()
            if "id" in message:
                proc.stdout.readline()
        proc.stdin.close()
        proc.wait(WAIT_S)


def one_round(desktop: Desktop, item: TrayItem, data: Path, port: int, peer: Peer, agents: list[str], n: int) -> None:
    token = token_of(data)
    anyio.run(agents_visit, port, token, agents, n)
    stdio_visit(data, port)
    item.click("Open dashboard")
    window = desktop.find_window(WINDOW, WAIT_S)
    if window is None:
        raise RuntimeError(f"no dashboard window\n{desktop.output('tray')}")
    time.sleep(1.0)  # let it load the dashboard (it polls the tray's server)
    desktop.xdotool("windowclose", window)
    if not eventually(lambda: not desktop.window_visible(WINDOW), WAIT_S):
        raise RuntimeError("the window did not close")
    item.click("Copy connect snippet", "Claude Code")
    item.click("Stop server")
    item.wait_for(lambda i: title(i) == "Hivenote — stopped", timeout=WAIT_S, what="stopped")
    # The title can change before the menu is rebuilt (its items still "Stop server"): click once it offers Start.
    item.wait_for(lambda i: offers(i, "Start server"), timeout=WAIT_S, what="the menu offering Start server")
    item.click("Start server")
    item.wait_for(lambda i: title(i).startswith("Hivenote — running"), timeout=WAIT_S, what="running again")
    peer.bring(20)
    if not eventually(lambda: health(port) == 200, WAIT_S):
        raise RuntimeError("the server did not come back")


def soak(
    root: Path,
    rounds: int | None,
    minutes: float,
    agents: int,
    pause: float,
    *,
    meaning: bool = True,
    fresh_rounds: int = 0,
) -> list[dict[str, float]]:
    """Rounds for `rounds` or `minutes`, a sample after each. With `fresh_rounds`, the tray is then quit and a fresh
    one started on the same notebook runs that many rounds, sampled with `"fresh": 1`: what the soaked tray holds
    beyond them is what the hours of use left behind, not the notebook they wrote (which a soak grows far faster
    than a day of use does). With meaning on, a third tray follows with the notebook's meaning index deleted
    (`"fresh": 2`): it embeds every note again, as the soaked tray did, so the model's bounded caches are as full
    as the soaked tray's and what is left beyond that tray is what use left beyond the notebook and those caches."""
    data = root / "data"
    folder = root / "synced"
    folder.mkdir(parents=True)
    if not meaning:  # the notebook alone: meaning search loads its embedding table at every server start
        data.mkdir(parents=True)
        (data / "settings.json").write_text(json.dumps({"meaning": False}), encoding="utf-8")
    subprocess.run(
        [sys.executable, "-m", "hivenote.server.cli", "--data-dir", str(data), "sync", "folder", str(folder)],
        check=True,
        capture_output=True,
    )
    desktop = start_desktop(root)
    samples: list[dict[str, float]] = []
    try:
        port = free_port()
        argv = [sys.executable, "-m", "hivenote.desktop", "--data-dir", str(data), "tray", "--port", str(port)]
        peer = Peer(folder)
        started = time.monotonic()
        n = 0
        phases = [0, 1, 2] if fresh_rounds and meaning else [0, 1] if fresh_rounds else [0]
        for fresh in phases:
            if fresh == 2:
                (data / "cache" / "meaning.bin").unlink(missing_ok=True)
            process = desktop.spawn(("tray", "tray-fresh", "tray-reindexed")[fresh], argv)
            item = desktop.tray_item(WAIT_S)
            item.wait_for(lambda i: title(i).startswith("Hivenote — running"), timeout=WAIT_S, what="running")
            end = n + fresh_rounds if fresh else rounds
            while (end is not None and n < end) or (end is None and time.monotonic() - started < minutes * 60):
                names = [AGENTS[(n + i) % len(AGENTS)] for i in range(agents)]
                one_round(desktop, item, data, port, peer, names, n)
                time.sleep(pause)
                sample = {"round": n, "minute": (time.monotonic() - started) / 60, "rss": rss_mb(process.pid)}
                sample["pss"] = pss_mb(process.pid)
                if fresh:
                    sample["fresh"] = fresh
                samples.append(sample)
                print(
                    f"round {n:>4}  {sample['minute']:6.1f} min  RSS {sample['rss']:6.1f} MB  "
                    f"PSS {sample['pss']:6.1f} MB{FRESH[fresh]}",
                    flush=True,
                )
                n += 1
            item.click("Quit Hivenote")
            process.wait(WAIT_S)
    finally:
        desktop.close()
    return samples


FRESH = ("", "  (a fresh tray, same notebook)", "  (a fresh tray, meaning index built again)")


def growth(samples: list[dict[str, float]], warmup: int) -> dict[str, Any]:
    """RSS after the warm-up rounds, at the end (median of the last three rounds, against the first three after the
    warm-up: single samples are noisy) and the largest seen; with a fresh tray's rounds, its RSS (the median of its
    rounds after the same warm-up, when it ran more rounds than that) and how much more the soaked tray held at its
    end; the same for the tray whose meaning index was built again."""

    def warm(phase: int) -> list[float]:
        rss = [s["rss"] for s in samples if s.get("fresh") == phase]
        return rss[warmup:] if len(rss) > warmup else rss

    fresh, reindexed = warm(1), warm(2)
    kept = [s for s in samples if not s.get("fresh")][warmup:]
    out: dict[str, Any] = {"max": max((s["rss"] for s in samples), default=0)}
    if len(kept) < 2:
        return {"after_warmup": None, "end": None, "growth": None, **out}
    k = min(3, len(kept) // 2)
    first = statistics.median(s["rss"] for s in kept[:k])
    last = statistics.median(s["rss"] for s in kept[-k:])
    out.update(after_warmup=first, end=last, growth=last - first)
    if fresh:
        out.update(fresh=statistics.median(fresh), over_fresh=last - statistics.median(fresh))
    if reindexed:
        out.update(reindexed=statistics.median(reindexed), over_reindexed=last - statistics.median(reindexed))
    return out
