"""The dashboard's logic under Node's own test runner (tests/dashboard/js/, `node --test`, no bundler, no framework):
the helpers, the API client against a real HTTP server on 127.0.0.1, the first requests, the clipboard's ways and
the views' pure parts. It runs in the fast lane, so the fast lane needs Node.js (the README says so)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

from hivenote.server.agents import AGENT_NAMES

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests" / "dashboard" / "js"
OLDEST = (20, 6)  # module.register, which loads the one dashboard module the server makes (hooks.mjs)
INSTALL = (
    "install Node.js 20.6 or newer: your distribution's `nodejs` package if it is that new, else https://nodejs.org"
)


def node() -> str:
    found = shutil.which("node")
    assert found, f"the dashboard's JavaScript tests need Node.js, which is not on PATH: {INSTALL}"
    version = subprocess.run([found, "--version"], capture_output=True, text=True, encoding="utf-8", check=True)
    major, minor = (int(part) for part in version.stdout.strip().lstrip("v").split(".")[:2])
    assert (major, minor) >= OLDEST, f"Node.js {version.stdout.strip()} is too old for the dashboard's tests: {INSTALL}"
    return found


def test_the_dashboards_javascript_passes_its_node_tests() -> None:
    run = subprocess.run(
        [node(), "--test", "--test-reporter=spec", str(TESTS.relative_to(ROOT)) + "/"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=300,
    )
    output = f"{run.stdout[-20000:]}\n{run.stderr[-5000:]}"
    assert run.returncode == 0, f"`node --test tests/dashboard/js/` failed:\n{output}"
    counts = dict(re.findall(r"^\N{INFORMATION SOURCE} (tests|pass|fail) (\d+)$", run.stdout, re.MULTILINE))
    assert int(counts["tests"]) > 0 and counts["fail"] == "0" and counts["pass"] == counts["tests"], output


def test_the_stand_in_for_the_served_agent_names_holds_real_names() -> None:
    """Under Node, js/agent-names.js (made by the server at start) is hooks.mjs's stand-in: each of its names is
    the one the server serves."""
    source = (TESTS / "hooks.mjs").read_text(encoding="utf-8")
    found = re.search(r"^export const AGENT_NAMES = (\{.*\});$", source, re.MULTILINE)
    assert found, "hooks.mjs declares AGENT_NAMES on one line, as JSON"
    stand_in = json.loads(found.group(1))
    assert stand_in and all(AGENT_NAMES.get(agent) == name for agent, name in stand_in.items()), stand_in
