"""SECURITY.md names the tests that prove each finding and protection: every name it gives must be a real test."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_test_security_md_names_exists() -> None:
    text = (ROOT / "SECURITY.md").read_text(encoding="utf-8")
    named = set(re.findall(r"\b(test_[a-z0-9_]+)\b", text))
    files = {p.stem for p in (ROOT / "tests").rglob("test_*.py")}
    defined = {
        m
        for p in (ROOT / "tests").rglob("test_*.py")
        if "node_modules" not in p.parts
        for m in re.findall(r"^(?:async )?def (test_[a-z0-9_]+)", p.read_text(encoding="utf-8"), re.MULTILINE)
    }
    missing = sorted(n for n in named if n not in defined and n not in files)
    assert len(named) > 40 and missing == []
