"""Start at login on each OS: real files on tmp_path (the macOS backend too), a hand-written fake Windows registry."""

from __future__ import annotations

import json
import os
import plistlib
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hivenote.desktop.autostart import (
    AutostartFailed,
    autostart,
    exec_quote,
    launcher_command,
)
from hivenote.server.core.errors import HivenoteError
from tests.support.desktop_entry import AWKWARD, desktop_keys, parse_exec, validate
from tests.support.privileges import without_root_powers

ARGS = st.lists(st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\0")), max_size=5)


@pytest.fixture(autouse=True)
def no_xdg_config_home(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


def test_enabling_on_linux_writes_an_xdg_autostart_entry_that_desktop_file_validate_accepts(home: Path) -> None:
    entry = autostart(["/opt/hivenote/bin/hivenote"], platform="linux", home=home)
    entry.enable()
    path = home / ".config" / "autostart" / "hivenote.desktop"
    assert validate(path) == ""
    assert desktop_keys(path) == {
        "Type": "Application",
        "Name": "Hivenote",
        "Comment": "Start the shared notebook for your AI agents at login",
        "Exec": "/opt/hivenote/bin/hivenote",
        "Icon": "hivenote",
        "Terminal": "false",
        "Categories": "Utility;",
        "X-GNOME-Autostart-enabled": "true",
        "X-GNOME-Autostart-Delay": "5",
    }
    assert entry.is_enabled()
    assert str(path) in entry.describe()
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


def test_the_exec_line_round_trips_paths_with_spaces_quotes_dollars_backslashes_and_percents(home: Path) -> None:
    launcher = home / AWKWARD / "hivenote"
    launcher.parent.mkdir(parents=True)
    command = [str(launcher), "--data-dir", "C:\\notes\\", "50%", "%f", "", "line\nbreak", "it's"]
    autostart(command, platform="linux", home=home).enable()
    path = home / ".config" / "autostart" / "hivenote.desktop"
    assert parse_exec(desktop_keys(path)["Exec"]) == command
    assert validate(path) == ""


@given(ARGS)
def test_exec_quote_round_trips_any_arguments_through_the_spec_parser(args: list[str]) -> None:
    argv = ["/usr/bin/hivenote", *args]
    assert parse_exec(exec_quote(argv)) == argv


def test_exec_quote_leaves_plain_words_alone_and_refuses_nul() -> None:
    assert exec_quote(["/usr/bin/hivenote", "--port", "7788"]) == "/usr/bin/hivenote --port 7788"
    assert exec_quote(["/a b/hivenote", "$X", "\\"]) == '"/a b/hivenote" "\\\\$X" "\\\\\\\\"'
    with pytest.raises(ValueError, match="NUL"):
        exec_quote(["a\0b"])


def test_the_default_command_is_the_installed_launcher(home: Path) -> None:
    autostart(platform="linux", home=home).enable()
    keys = desktop_keys(home / ".config" / "autostart" / "hivenote.desktop")
    assert parse_exec(keys["Exec"]) == launcher_command()


def test_disabling_on_linux_removes_the_entry_and_is_idempotent(home: Path) -> None:
    entry = autostart(["hivenote"], platform="linux", home=home)
    entry.enable()
    entry.disable()
    assert not (home / ".config" / "autostart" / "hivenote.desktop").exists()
    assert not entry.is_enabled()
    entry.disable()
    assert not entry.is_enabled()


@pytest.mark.parametrize("line", ["Hidden=true", "X-GNOME-Autostart-enabled=false"])
def test_an_entry_the_desktop_turned_off_is_not_enabled(home: Path, line: str) -> None:
    entry = autostart(["hivenote"], platform="linux", home=home)
    entry.enable()
    path = home / ".config" / "autostart" / "hivenote.desktop"
    text = path.read_text(encoding="utf-8").replace("X-GNOME-Autostart-enabled=true\n", "")
    path.write_text(text + line + "\n", encoding="utf-8")
    assert not entry.is_enabled()
    entry.enable()
    assert entry.is_enabled()


def test_xdg_config_home_is_honoured_when_absolute(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    autostart(["hivenote"], platform="linux", home=home).enable()
    assert (tmp_path / "config" / "autostart" / "hivenote.desktop").is_file()
    assert not (home / ".config").exists()

    monkeypatch.setenv("XDG_CONFIG_HOME", "relative/config")  # invalid per the Base Directory spec: ignored
    assert autostart(["hivenote"], platform="linux", home=home).describe().startswith(str(home / ".config"))


def test_enabling_twice_leaves_one_identical_entry_and_no_temp_files(home: Path) -> None:
    entry = autostart(["/usr/bin/hivenote"], platform="linux", home=home)
    entry.enable()
    first = (home / ".config" / "autostart" / "hivenote.desktop").read_bytes()
    entry.enable()
    assert [p.name for p in (home / ".config" / "autostart").iterdir()] == ["hivenote.desktop"]
    assert (home / ".config" / "autostart" / "hivenote.desktop").read_bytes() == first
    assert entry.is_enabled()


def test_other_freedesktop_systems_get_the_xdg_entry(home: Path) -> None:
    assert autostart(["hivenote"], platform="freebsd14", home=home).describe().startswith(str(home / ".config"))


def test_a_read_only_autostart_folder_gives_a_clear_error_and_changes_nothing(home: Path) -> None:
    folder = home / ".config" / "autostart"
    autostart(["/old/hivenote"], platform="linux", home=home).enable()
    before = (folder / "hivenote.desktop").read_bytes()
    folder.chmod(0o555)
    try:
        result = run_unprivileged(home, "enable", "disable")
    finally:
        folder.chmod(0o755)
    for action, error in zip(["write", "remove"], result, strict=True):
        assert error is not None
        assert error.startswith(f"Could not {action} the start-at-login entry {folder / 'hivenote.desktop'}: ")
        assert "Permission denied" in error and "Nothing was changed" in error and "try again" in error
    assert [p.name for p in folder.iterdir()] == ["hivenote.desktop"]
    assert (folder / "hivenote.desktop").read_bytes() == before


def test_a_folder_that_cannot_be_created_gives_a_clear_error(home: Path) -> None:
    (home / ".config").write_text("a file where a folder should be", encoding="utf-8")
    with pytest.raises(AutostartFailed, match=r"Could not write the start-at-login entry .* try again"):
        autostart(["hivenote"], platform="linux", home=home).enable()


def test_a_failed_replace_leaves_no_temp_file_behind(home: Path) -> None:
    folder = home / ".config" / "autostart"
    (folder / "hivenote.desktop").mkdir(parents=True)  # os.replace cannot put a file over a folder, even as root
    with pytest.raises(AutostartFailed) as caught:
        autostart(["hivenote"], platform="linux", home=home).enable()
    assert isinstance(caught.value, HivenoteError) and caught.value.code == "autostart"
    assert [p.name for p in folder.iterdir()] == ["hivenote.desktop"]


def test_an_entry_that_cannot_be_read_gives_a_clear_error(home: Path) -> None:
    (home / ".config" / "autostart" / "hivenote.desktop").mkdir(parents=True)
    (home / "Library" / "LaunchAgents" / "com.hivenote.app.plist").mkdir(parents=True)
    for platform in ("linux", "darwin"):
        with pytest.raises(AutostartFailed, match=r"Could not read the start-at-login entry .*can read"):
            autostart(["hivenote"], platform=platform, home=home).is_enabled()


def test_a_launcher_path_that_is_not_utf8_is_refused_before_anything_is_written(home: Path) -> None:
    undecodable = os.fsdecode(b"/opt/caf\xe9/hivenote")
    with pytest.raises(AutostartFailed, match="not valid UTF-8"):
        autostart([undecodable], platform="linux", home=home).enable()
    assert not (home / ".config").exists()


def test_a_log_folder_that_cannot_be_created_gives_a_clear_error_on_macos(home: Path) -> None:
    (home / "Library").mkdir()
    (home / "Library" / "Logs").write_text("a file where a folder should be", encoding="utf-8")
    with pytest.raises(
        AutostartFailed, match=r"Could not create the log folder for start at login .*Logs/Hivenote: .*try again"
    ):
        autostart(["hivenote"], platform="darwin", home=home).enable()
    assert not (home / "Library" / "LaunchAgents").exists()


CHILD = """
import json, sys
from pathlib import Path
from hivenote.desktop.autostart import AutostartFailed, autostart

entry = autostart(["/new/hivenote"], platform="linux", home=Path(sys.argv[1]))
errors = []
for action in sys.argv[2:]:
    try:
        getattr(entry, action)()
        errors.append(None)
    except AutostartFailed as exc:
        errors.append(str(exc))
print(json.dumps(errors))
"""


def run_unprivileged(home: Path, *actions: str) -> list[str | None]:
    """Run the actions in a child that file permissions apply to (root keeps uid 0 but loses DAC override)."""
    prefix = without_root_powers()
    env = {k: v for k, v in os.environ.items() if k != "XDG_CONFIG_HOME"}
    done = subprocess.run(
        [*prefix, sys.executable, "-c", CHILD, str(home), *actions],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: list[str | None] = json.loads(done.stdout)
    return result


# --- macOS (runs anywhere: it only writes a plist) --------------------------------------------------------


def test_enabling_on_macos_writes_a_launch_agent_plist(home: Path) -> None:
    command = ["/Users/ana/.local/bin/hivenote", "--data-dir", "/Users/ana/My Notes"]
    entry = autostart(command, platform="darwin", home=home)
    entry.enable()
    path = home / "Library" / "LaunchAgents" / "com.hivenote.app.plist"
    agent = plistlib.loads(path.read_bytes())
    logs = home / "Library" / "Logs" / "Hivenote"
    assert agent == {
        "Label": "com.hivenote.app",
        "ProgramArguments": command,
        "RunAtLoad": True,
        "KeepAlive": False,
        "ProcessType": "Interactive",
        "LimitLoadToSessionType": "Aqua",
        "StandardOutPath": str(logs / "hivenote.out.log"),
        "StandardErrorPath": str(logs / "hivenote.err.log"),
    }
    assert logs.is_dir()
    assert entry.is_enabled()
    assert str(path) in entry.describe() and "launchctl bootstrap gui/" in entry.describe()
    entry.enable()
    assert [p.name for p in path.parent.iterdir()] == [path.name]


def test_disabling_on_macos_removes_the_plist(home: Path) -> None:
    entry = autostart(["hivenote"], platform="darwin", home=home)
    entry.enable()
    entry.disable()
    assert not (home / "Library" / "LaunchAgents" / "com.hivenote.app.plist").exists()
    assert not entry.is_enabled()
    entry.disable()


def test_a_damaged_or_disabled_launch_agent_is_not_enabled(home: Path) -> None:
    entry = autostart(["hivenote"], platform="darwin", home=home)
    entry.enable()
    path = home / "Library" / "LaunchAgents" / "com.hivenote.app.plist"
    agent = plistlib.loads(path.read_bytes())
    path.write_bytes(plistlib.dumps({**agent, "Disabled": True}))
    assert not entry.is_enabled()
    path.write_bytes(b"<?xml version='1.0'?><plist><dict><key>Label")
    assert not entry.is_enabled()
    entry.enable()
    assert entry.is_enabled()


# --- Windows (a hand-written fake registry key) -----------------------------------------------------------


class FakeRunKey:
    """One registry key in memory; `refuse` makes every call fail the way winreg does without access."""

    def __init__(self, refuse: bool = False) -> None:
        self.values: dict[str, str] = {}
        self.refuse = refuse

    def _check(self) -> None:
        if self.refuse:
            raise PermissionError(13, "Access is denied")

    def get(self, name: str) -> str | None:
        self._check()
        return self.values.get(name)

    def set(self, name: str, value: str) -> None:
        self._check()
        self.values[name] = value

    def delete(self, name: str) -> None:
        self._check()
        self.values.pop(name, None)


def split_windows(cmdline: str) -> list[str]:
    """Split a command line as the Microsoft C runtime does (CommandLineToArgvW; argv[0] has no escapes)."""
    i, n = 0, len(cmdline)
    if cmdline.startswith('"'):
        end = cmdline.index('"', 1)
        args, i = [cmdline[1:end]], end + 1
    else:
        while i < n and cmdline[i] not in " \t":
            i += 1
        args = [cmdline[:i]]
    while True:
        while i < n and cmdline[i] in " \t":
            i += 1
        if i == n:
            return args
        word: list[str] = []
        quoted = False
        while i < n and (quoted or cmdline[i] not in " \t"):
            slashes = 0
            while i < n and cmdline[i] == "\\":
                slashes += 1
                i += 1
            if i < n and cmdline[i] == '"':
                word.append("\\" * (slashes // 2))
                if slashes % 2:
                    word.append('"')
                elif quoted and i + 1 < n and cmdline[i + 1] == '"':
                    word.append('"')  # `""` inside quotes is a literal quote (the runtime since 2008)
                    i += 1
                else:
                    quoted = not quoted
                i += 1
            else:
                word.append("\\" * slashes)
                if i < n and (quoted or cmdline[i] not in " \t"):
                    word.append(cmdline[i])
                    i += 1
        args.append("".join(word))


def test_enabling_on_windows_writes_the_run_value_quoted_for_spaces_and_quotes() -> None:
    registry = FakeRunKey()
    command = [r"C:\Program Files\Hivenote\hivenote.exe", "--data-dir", 'D:\\My "Notes"\\', "a b\\", ""]
    entry = autostart(command, platform="win32", registry=registry)
    entry.enable()
    value = registry.values["Hivenote"]
    assert value.startswith(r'"C:\Program Files\Hivenote\hivenote.exe" --data-dir ')
    assert split_windows(value) == command
    assert entry.is_enabled()
    assert r"HKEY_CURRENT_USER\Software\Microsoft\Windows\CurrentVersion\Run\Hivenote" in entry.describe()


@given(ARGS)
def test_the_run_value_splits_back_into_the_same_arguments(args: list[str]) -> None:
    registry = FakeRunKey()
    command = [r"C:\Users\Ana Lopez\AppData\Local\hivenote\Scripts\hivenote.exe", *args]
    autostart(command, platform="win32", registry=registry).enable()
    assert split_windows(registry.values["Hivenote"]) == command


def test_disabling_on_windows_deletes_the_value_and_is_idempotent() -> None:
    registry = FakeRunKey()
    registry.values["Other app"] = "other.exe"
    entry = autostart(["C:\\hivenote.exe"], platform="win32", registry=registry)
    entry.enable()
    entry.enable()
    entry.disable()
    assert registry.values == {"Other app": "other.exe"}
    assert not entry.is_enabled()
    entry.disable()


def test_a_registry_that_refuses_access_gives_a_clear_error() -> None:
    entry = autostart(["C:\\hivenote.exe"], platform="win32", registry=FakeRunKey(refuse=True))
    for action in (entry.enable, entry.disable, entry.is_enabled):
        with pytest.raises(AutostartFailed, match=r"registry value HKEY_CURRENT_USER\\.*Access is denied.*try again"):
            action()


def test_the_real_registry_is_only_reached_on_windows() -> None:
    entry = autostart(["C:\\hivenote.exe"], platform="win32")
    if sys.platform != "win32":
        with pytest.raises(AutostartFailed, match="only on Windows"):
            entry.is_enabled()


# --- the launcher -----------------------------------------------------------------------------------------


def test_the_launcher_is_the_console_script_in_this_venv() -> None:
    command = launcher_command()
    script = Path(command[0])
    assert command == [str(script)]
    assert script.is_absolute() and script.is_file() and os.access(script, os.X_OK)
    assert script.parent == Path(sys.executable).absolute().parent


def test_without_a_console_script_the_launcher_runs_the_module(tmp_path: Path) -> None:
    python = tmp_path / "bin" / "python3"
    python.parent.mkdir()
    python.touch()
    assert launcher_command(executable=str(python)) == [str(python), "-m", "hivenote.desktop"]


def test_on_windows_the_launcher_prefers_the_exe_then_pythonw(tmp_path: Path) -> None:
    scripts = tmp_path / "Scripts"
    scripts.mkdir()
    python = scripts / "python.exe"
    for name in ("python.exe", "pythonw.exe"):
        (scripts / name).touch()
    assert launcher_command(executable=str(python), platform="win32") == [
        str(scripts / "pythonw.exe"),
        "-m",
        "hivenote.desktop",
    ]
    (scripts / "hivenote.exe").touch()
    assert launcher_command(executable=str(python), platform="win32") == [str(scripts / "hivenote.exe")]


def test_an_empty_command_is_refused(home: Path) -> None:
    with pytest.raises(ValueError, match="needs a command"):
        autostart([], platform="linux", home=home)
