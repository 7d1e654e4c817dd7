"""The `hivenote` launcher where the desktop parts are not installed (`pip install hivenote`, no `[desktop]`): the
server's commands never import them, the desktop commands say what is missing and how to install it (exit code 6),
and `doctor` says so. Here the desktop packages' imports fail as they do where they are not installed;
tests/packaging/test_headless_install.py does the same with a real install in a fresh venv."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hivenote.desktop import parts
from tests.support.headless import (
    BLOCKED_LAUNCHER,
    MISSING_ON_LINUX,
    TRIED,
    assert_refused_without_desktop_parts,
    home_env,
    run,
    serve_and_use,
)

pytestmark = pytest.mark.system  # Hivenote's commands and servers as processes


@pytest.mark.parametrize(
    "args",
    [[], ["tray"], ["tray", "--port", "7999"], ["autostart"], ["autostart", "on"], ["install-desktop"]],
    ids=lambda args: " ".join(args) or "no command",
)
def test_a_desktop_command_says_what_is_missing_and_the_command_that_installs_it(
    tmp_path: Path, args: list[str]
) -> None:
    done = run(BLOCKED_LAUNCHER, home_env(tmp_path), *args)
    assert_refused_without_desktop_parts(done, parts.install_command())
    assert not (tmp_path / ".config").exists() and not (tmp_path / ".local").exists()  # no entry, no icon written


def test_the_window_process_says_so_too(tmp_path: Path) -> None:
    done = run(BLOCKED_LAUNCHER, home_env(tmp_path), "--window", "http://127.0.0.1:7788/")
    assert_refused_without_desktop_parts(done, parts.install_command())


def test_json_output_gets_a_json_error(tmp_path: Path) -> None:
    done = run(BLOCKED_LAUNCHER, home_env(tmp_path), "--json", "tray")
    assert (done.returncode, done.stdout) == (6, "")
    error = json.loads(done.stderr)["error"]
    assert error["code"] == "desktop_not_installed" and MISSING_ON_LINUX in error["message"]


def test_doctor_says_the_desktop_parts_are_not_installed_and_how_to_get_them(tmp_path: Path) -> None:
    env = home_env(tmp_path)
    done = run(BLOCKED_LAUNCHER, env, "doctor")
    assert done.returncode == 0 and TRIED not in done.stderr, done.stderr
    assert f"desktop parts: not installed ({MISSING_ON_LINUX})" in done.stdout
    assert parts.install_command() in done.stdout
    report = json.loads(run(BLOCKED_LAUNCHER, env, "--json", "doctor").stdout)
    assert report["desktop"] == {
        "installed": False,
        "missing": ["pystray", "pywebview", "pillow", "pyperclip", "PyGObject", "python-xlib"],
        "install": parts.install_command(),
    }


def test_the_notebook_commands_work_without_the_desktop_parts(tmp_path: Path) -> None:
    env = home_env(tmp_path)
    for args in (
        ["remember", "--kind", "fact", "--title", "No tray needed"],
        ["search", "tray"],
        ["list"],
        ["status"],
        ["connect", "cursor"],
        ["quit"],  # no tray app runs: says so
        ["uninstall-desktop"],  # nothing to remove, and Pillow is not needed to find that out
    ):
        done = run(BLOCKED_LAUNCHER, env, *args)
        assert done.returncode == 0 and "Traceback" not in done.stderr and TRIED not in done.stderr, (args, done.stderr)
    assert "No tray needed" in run(BLOCKED_LAUNCHER, env, "list").stdout
    assert run(BLOCKED_LAUNCHER, env, "uninstall-desktop").stdout == "Nothing to remove.\n"


def test_serve_and_stdio_work_without_the_desktop_parts(tmp_path: Path) -> None:
    serve_and_use(BLOCKED_LAUNCHER, home_env(tmp_path), tmp_path / "serve.log")
