"""desktop/parts.py: which desktop parts are missing, and the command that installs them for each way Hivenote can
have been installed (PEP 610's direct_url.json record, or none for the package index; pip or pipx)."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from hivenote.desktop import parts

PYTHON = "/home/ada/.venvs/hivenote/bin/python"


def command(tmp_path: Path, direct_url: str, *, pipx: bool = False) -> str:
    if pipx:
        (tmp_path / "pipx_metadata.json").write_text("{}", encoding="utf-8")
    return parts.install_command(executable=PYTHON, prefix=tmp_path, direct_url=direct_url)


@pytest.mark.parametrize(
    ("record", "expected"),
    [
        ("", f"{PYTHON} -m pip install 'hivenote[desktop]'"),  # from the package index: no record
        (
            json.dumps({"url": "file:///home/ada/src/hive%20note", "dir_info": {}}),
            f"{PYTHON} -m pip install '/home/ada/src/hive note[desktop]'",
        ),
        (
            json.dumps({"url": "file:///home/ada/src/hivenote", "dir_info": {"editable": True}}),
            f"{PYTHON} -m pip install --editable '/home/ada/src/hivenote[desktop]'",
        ),
        (
            json.dumps(
                {
                    "url": "https://example.org/hivenote.git",
                    "vcs_info": {"vcs": "git", "requested_revision": "v0.1.0", "commit_id": "a" * 40},
                }
            ),
            f"{PYTHON} -m pip install 'hivenote[desktop] @ git+https://example.org/hivenote.git@v0.1.0'",
        ),
        (
            json.dumps({"url": "https://example.org/hivenote-0.1.0-py3-none-any.whl", "archive_info": {}}),
            f"{PYTHON} -m pip install 'hivenote[desktop] @ https://example.org/hivenote-0.1.0-py3-none-any.whl'",
        ),
    ],
)
def test_the_install_command_adds_the_extra_to_this_very_installation(
    tmp_path: Path, record: str, expected: str
) -> None:
    assert command(tmp_path, record) == expected


def test_a_pipx_install_is_reinstalled_by_pipx_with_the_extra(tmp_path: Path) -> None:
    assert command(tmp_path, "", pipx=True) == "pipx install --force 'hivenote[desktop]'"
    editable = json.dumps({"url": "file:///home/ada/src/hivenote", "dir_info": {"editable": True}})
    assert command(tmp_path, editable, pipx=True) == "pipx install --force --editable '/home/ada/src/hivenote[desktop]'"


def test_the_install_command_of_this_test_environment_runs_its_own_python() -> None:
    # CI and the README install the checkout editable: the command installs the extra from this same checkout.
    words = shlex.split(parts.install_command())
    assert words[:4] == [sys.executable, "-m", "pip", "install"]
    assert words[-1].endswith("[desktop]")


def test_every_desktop_part_is_found_here_and_a_blocked_one_is_reported_missing() -> None:
    assert parts.missing() == []  # the test environment has the [desktop] extra
    # A fresh interpreter in which Pillow's import fails as it does where it is not installed.
    code = "import sys; sys.modules['PIL'] = None\nfrom hivenote.desktop import parts\nprint(parts.missing())"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, encoding="utf-8", check=True)
    assert done.stdout.strip() == "['pillow']"


def test_each_platform_names_its_own_parts() -> None:
    assert set(parts.modules("linux").values()) == {
        "pystray",
        "pywebview",
        "pillow",
        "pyperclip",
        "PyGObject",
        "python-xlib",
    }
    assert set(parts.modules("win32").values()) == {"pystray", "pywebview", "pillow", "pyperclip"}
    assert "pyobjc-core" in parts.modules("darwin").values()


def test_the_message_says_what_is_missing_what_still_works_and_what_to_run() -> None:
    text = parts.message(["pystray", "PyGObject"], "the tray app", platform="linux")
    assert text.startswith("the tray app needs Hivenote's desktop parts, which are not installed here (missing: ")
    assert "(missing: pystray, PyGObject)" in text
    assert "`hivenote serve`" in text
    assert f"To install the desktop parts: {parts.install_command()}\n" in text
    assert "sudo apt install gir1.2-ayatanaappindicator3-0.1" in text and "libcairo2-dev" in text
    assert "apt" not in parts.message(["pystray"], "the tray app", platform="win32")
