"""The README's promises hold: its two set-up commands exist, CI runs the test command verbatim, and the fast lane
is the test command's pytest with the `system` tests deselected."""

from __future__ import annotations

import re
from pathlib import Path

from hivenote.server.core.hlc import DEFAULT_MAX_OFFSET_MS

ROOT = Path(__file__).resolve().parent.parent


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Get started", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.+?)\n```", section)


def test_the_readme_has_exactly_two_setup_commands_and_the_fast_lane() -> None:
    commands = readme_commands()
    assert len(commands) == 3
    install, test, _ = commands
    assert 'pip install ".[desktop]"' in install and install.endswith("hivenote")  # the tray app, one command
    assert "[test]" in test and "pytest" in test


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert readme_commands()[1] in ci.splitlines()


def test_the_fast_lane_is_the_test_command_without_the_system_tests() -> None:
    import tomllib

    test, fast = readme_commands()[1:]
    pytest_run = test.rsplit(" && ", 1)[1]  # the interpreter and its flags, as CI runs it
    assert fast == f'{pytest_run} -m "not system" --no-cov'
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pytest"]["ini_options"]
    assert any(marker.startswith("system:") for marker in config["markers"])
    assert "--strict-markers" in config["addopts"]


def test_every_cli_command_appears_in_the_readme() -> None:
    from hivenote.desktop.main import desktop_commands
    from hivenote.server.cli.main import build_parser

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    parser = build_parser(desktop_commands)  # the `hivenote` launcher's whole command line
    sub = next(a for a in parser._actions if a.dest == "command")
    for name in sub.choices:  # type: ignore[union-attr]
        assert f"hivenote {name}" in readme, f"`hivenote {name}` is not documented in the README"


def test_every_connect_client_is_in_the_readme() -> None:
    from hivenote.server.connect import CLIENTS

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for client in CLIENTS:
        assert f"`hivenote connect {client}`" in readme, f"{client} has no row in the README's client table"


def test_the_oplog_names_the_clock_s_skew_bound_as_the_code_has_it() -> None:
    text = (ROOT / "docs" / "OPLOG.md").read_text(encoding="utf-8")
    stated = re.search(r"more than (\d+) h ahead of this machine's clock: `hlc\.DEFAULT_MAX_OFFSET_MS`", text)
    assert stated is not None, "docs/OPLOG.md no longer says how far ahead a remote stamp is taken for skew"
    assert int(stated.group(1)) * 3_600_000 == DEFAULT_MAX_OFFSET_MS
