"""The applications-menu entry: real files in a temporary data home, judged by desktop-file-validate, the spec's
Exec parser and the real update-desktop-database / gtk-update-icon-cache."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image, ImageChops

from hivenote.desktop.autostart import launcher_command
from hivenote.desktop.icons import app_icon
from hivenote.desktop.menu_entry import (
    ICON_SIZES,
    MenuEntryFailed,
    MenuEntryUnsupported,
    install,
    uninstall,
    where,
)
from hivenote.server.core.errors import HivenoteError
from tests.support.desktop_entry import AWKWARD, desktop_keys, parse_exec, validate
from tests.support.privileges import without_root_powers
from tests.support.system import program


@pytest.fixture(autouse=True)
def no_xdg_data_home(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)


@pytest.fixture
def data_home(tmp_path: Path) -> Path:
    return tmp_path / "share"


def icon_path(data_home: Path, size: int) -> Path:
    return data_home / "icons" / "hicolor" / f"{size}x{size}" / "apps" / "hivenote.png"


def files_under(folder: Path) -> list[str]:
    return sorted(str(path.relative_to(folder)) for path in folder.rglob("*") if not path.is_dir())


def test_install_writes_a_menu_entry_that_desktop_file_validate_accepts(data_home: Path) -> None:
    written = install(["/opt/hivenote/bin/hivenote"], data_home=data_home, platform="linux")
    entry = data_home / "applications" / "hivenote.desktop"
    assert written[-1] == entry == where(data_home=data_home)
    assert where(data_home=data_home).is_file()
    assert validate(entry).strip() == ""  # no error, warning or hint (one main category: listed once)
    assert desktop_keys(entry) == {
        "Type": "Application",
        "Name": "Hivenote",
        "GenericName": "Shared memory for AI agents",
        "Comment": "One shared notebook for all your AI agents, over MCP",
        "Exec": "/opt/hivenote/bin/hivenote",
        "Icon": "hivenote",
        "Terminal": "false",
        "Categories": "Development;",
        "Keywords": "MCP;AI;agent;notes;memory;notebook;",
        "StartupNotify": "false",
        "StartupWMClass": "hivenote",
    }
    assert stat.S_IMODE(entry.stat().st_mode) == 0o644


def test_install_puts_the_app_icon_in_hicolor_at_every_size(data_home: Path) -> None:
    written = install(["hivenote"], data_home=data_home, platform="linux")
    assert written[:-1] == [icon_path(data_home, size) for size in ICON_SIZES]
    assert ICON_SIZES == (16, 24, 32, 48, 64, 128, 256, 512)
    for size in ICON_SIZES:
        with Image.open(icon_path(data_home, size)) as icon:
            icon.load()
            assert icon.size == (size, size) and icon.mode == "RGBA"
            assert ImageChops.difference(icon, app_icon(size)).getbbox(alpha_only=False) is None


def test_the_exec_line_round_trips_paths_with_spaces_and_quotes(data_home: Path) -> None:
    command = [f"/home/ana/{AWKWARD}/bin/hivenote", "--data-dir", '/home/ana/My "Notes"']
    entry = install(command, data_home=data_home, platform="linux")[-1]
    assert parse_exec(desktop_keys(entry)["Exec"]) == command
    assert validate(entry).strip() == ""  # no error, warning or hint (one main category: listed once)


def test_the_default_command_is_the_installed_launcher(data_home: Path) -> None:
    entry = install(data_home=data_home, platform="linux")[-1]
    assert parse_exec(desktop_keys(entry)["Exec"]) == launcher_command()


def test_xdg_data_home_is_honoured_when_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert install(["hivenote"], platform="linux")[-1] == tmp_path / "data" / "applications" / "hivenote.desktop"
    assert where().is_file() and where() == tmp_path / "data" / "applications" / "hivenote.desktop"
    monkeypatch.setenv("XDG_DATA_HOME", "relative/data")  # invalid per the Base Directory spec: ignored
    assert where() == tmp_path / "home" / ".local" / "share" / "applications" / "hivenote.desktop"
    assert not where().is_file()


def test_uninstall_removes_what_install_wrote_and_is_idempotent(data_home: Path) -> None:
    written = install(["hivenote"], data_home=data_home, platform="linux")
    assert sorted(uninstall(data_home=data_home)) == sorted(written)
    assert not where(data_home=data_home).is_file()
    assert files_under(data_home) == ["applications/mimeinfo.cache"]  # update-desktop-database's, shared
    assert uninstall(data_home=data_home) == []
    assert uninstall(data_home=data_home / "never-installed") == []


def test_installing_twice_leaves_one_set_of_files_and_no_temp_files(data_home: Path) -> None:
    install(["/old/hivenote"], data_home=data_home, platform="linux")
    first = files_under(data_home)
    install(["/new/hivenote"], data_home=data_home, platform="linux")
    assert files_under(data_home) == first
    assert desktop_keys(where(data_home=data_home))["Exec"] == "/new/hivenote"


def test_an_icon_cache_is_refreshed_when_present_but_never_created(data_home: Path) -> None:
    tool = program("gtk-update-icon-cache", "apt-get install libgtk-3-bin")
    hicolor = data_home / "icons" / "hicolor"
    install(["hivenote"], data_home=data_home, platform="linux")
    assert not (hicolor / "icon-theme.cache").exists()
    uninstall(data_home=data_home)

    other = hicolor / "48x48" / "apps" / "other-app.png"
    app_icon(48).save(other)
    subprocess.run([tool, "-f", "-t", str(hicolor)], capture_output=True, check=True)
    without = (hicolor / "icon-theme.cache").read_bytes()
    assert b"hivenote" not in without
    install(["hivenote"], data_home=data_home, platform="linux")
    assert b"hivenote" in (hicolor / "icon-theme.cache").read_bytes()
    uninstall(data_home=data_home)
    assert (hicolor / "icon-theme.cache").read_bytes() == without


def test_missing_or_failing_desktop_tools_are_not_errors(
    data_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("update-desktop-database", "gtk-update-icon-cache"):
        (bin_dir / name).write_text("#!/bin/sh\necho broken >&2\nexit 1\n", encoding="utf-8")
        (bin_dir / name).chmod(0o755)
    (data_home / "icons" / "hicolor").mkdir(parents=True)
    (data_home / "icons" / "hicolor" / "icon-theme.cache").write_bytes(b"stale")
    for path in (bin_dir, tmp_path / "nothing-here"):
        monkeypatch.setenv("PATH", str(path))
        install(["hivenote"], data_home=data_home, platform="linux")
        assert len(uninstall(data_home=data_home)) == 1 + len(ICON_SIZES)
    assert (data_home / "icons" / "hicolor" / "icon-theme.cache").read_bytes() == b"stale"
    assert not (data_home / "applications" / "mimeinfo.cache").exists()


CHILD = """
import json, sys
from pathlib import Path
from hivenote.desktop.menu_entry import MenuEntryFailed, install, uninstall

data_home = Path(sys.argv[1])
try:
    install(["hivenote"], data_home=data_home, platform="linux") if sys.argv[2] == "install" else uninstall(
        data_home=data_home
    )
    print(json.dumps(None))
except MenuEntryFailed as exc:
    print(json.dumps(str(exc)))
"""


def run_unprivileged(data_home: Path, action: str) -> str | None:
    """Run install or uninstall where file permissions apply (root keeps uid 0 but loses DAC override)."""
    prefix = without_root_powers()
    done = subprocess.run(
        [*prefix, sys.executable, "-c", CHILD, str(data_home), action],
        capture_output=True,
        text=True,
        encoding="utf-8",
        check=False,
    )
    assert done.returncode == 0, done.stderr
    error: str | None = json.loads(done.stdout)
    return error


def test_a_read_only_applications_folder_gives_a_clear_error_and_leaves_nothing_behind(data_home: Path) -> None:
    applications = data_home / "applications"
    applications.mkdir(parents=True)
    applications.chmod(0o555)
    try:
        error = run_unprivileged(data_home, "install")
    finally:
        applications.chmod(0o755)
    assert error is not None and error.startswith(f"Could not write {applications / 'hivenote.desktop'}: ")
    assert "Permission denied" in error and "Nothing was left half-written" in error and "try again" in error
    assert [path.name for path in data_home.rglob("*")] == ["applications"]


def test_a_read_only_applications_folder_stops_uninstall_with_a_clear_error(data_home: Path) -> None:
    install(["hivenote"], data_home=data_home, platform="linux")
    applications = data_home / "applications"
    applications.chmod(0o555)
    try:
        error = run_unprivileged(data_home, "uninstall")
    finally:
        applications.chmod(0o755)
    assert error is not None and error.startswith(f"Could not remove {applications / 'hivenote.desktop'}: ")
    assert "Permission denied" in error and f"can write to {applications}" in error
    assert where(data_home=data_home).is_file()


def test_a_failed_install_removes_the_files_it_created_and_keeps_those_it_replaced(data_home: Path) -> None:
    old_icon = icon_path(data_home, 48)
    old_icon.parent.mkdir(parents=True)
    old_icon.write_bytes(b"an older icon")
    where(data_home=data_home).mkdir(parents=True)  # os.replace cannot put a file over a folder, even as root
    with pytest.raises(MenuEntryFailed, match=r"Could not write .*hivenote\.desktop: .*try again") as caught:
        install(["hivenote"], data_home=data_home, platform="linux")
    assert isinstance(caught.value, HivenoteError) and caught.value.code == "menu_entry"
    assert files_under(data_home) == ["icons/hicolor/48x48/apps/hivenote.png"]
    with Image.open(old_icon) as icon:
        assert icon.size == (48, 48)  # replaced whole, not half-written
    assert sorted(path.name for path in (data_home / "icons" / "hicolor").iterdir()) == ["48x48"]


def test_a_launcher_path_that_is_not_utf8_is_refused_before_anything_is_written(data_home: Path) -> None:
    undecodable = os.fsdecode(b"/opt/caf\xe9/hivenote")
    with pytest.raises(MenuEntryFailed, match="not valid UTF-8"):
        install([undecodable], data_home=data_home, platform="linux")
    with pytest.raises(ValueError, match="needs a command"):
        install([], data_home=data_home, platform="linux")
    assert not data_home.exists()


def test_other_freedesktop_systems_get_the_entry(data_home: Path) -> None:
    assert install(["hivenote"], data_home=data_home, platform="freebsd14")[-1] == where(data_home=data_home)


@pytest.mark.parametrize(
    ("platform", "hints"),
    [
        ("darwin", ["menu-bar app", "`hivenote`", "Start at login", "`hivenote autostart on`"]),
        ("win32", ["hivenote-desktop.exe", "Scripts folder", "pin it to Start", "no signed installer yet"]),
    ],
)
def test_macos_and_windows_are_told_what_to_do_instead(data_home: Path, platform: str, hints: list[str]) -> None:
    with pytest.raises(MenuEntryUnsupported) as caught:
        install(["hivenote"], data_home=data_home, platform=platform)
    assert isinstance(caught.value, HivenoteError) and caught.value.code == "unsupported"
    for hint in hints:
        assert hint in str(caught.value)
    assert not data_home.exists()
