"""No definition in the shipped code that the shipped code refers to nowhere: what only tests need lives in
tests/support (tests/support/internals.py reads private state), and what vulture cannot see used (a protocol's
signature, another library's attribute) is named, with why, in pyproject.toml's [tool.vulture]."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_definition_in_the_shipped_code_is_used_by_it() -> None:
    found = subprocess.run(
        [sys.executable, "-m", "vulture"], cwd=ROOT, capture_output=True, encoding="utf-8", check=False
    )
    assert found.returncode == 0 and not found.stdout, (
        "definitions nothing in server/ or desktop/ uses (remove them, or move what only tests use to "
        f"tests/support):\n{found.stdout}{found.stderr}"
    )
