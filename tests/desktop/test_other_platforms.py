"""The macOS and Windows paths of the desktop code, which no machine here can run: their logic, with the OS calls
replaced by fakes that record what would have been asked of the OS (osascript, MessageBoxW, `open`, os.startfile,
AppKit's main-thread queue). What has and has not run on a real Mac or Windows is in packaging/README.md."""

from __future__ import annotations

import errno
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from hivenote.desktop import problems
from hivenote.desktop.app import login_command, open_path
from hivenote.desktop.instance import fallback_home
from hivenote.desktop.tray import _on_gui_thread
from hivenote.desktop.window import DARK_BG, LIGHT_BG, prefers_dark
from hivenote.server.core.errors import HivenoteError
from hivenote.server.settings import default_data_dir

HOSTILE = "She said \"hi\" \\ $HOME `id` 'quoted'\nsecond line"


def recorder(ran: list[list[str]]) -> Any:
    def run(argv: list[str]) -> bool:
        ran.append(argv)
        return True

    return run


def box(calls: list[tuple[Any, ...]]) -> Any:
    def message_box(*args: Any) -> int:
        calls.append(args)
        return 1  # IDOK

    return message_box


def test_the_macos_dialog_passes_texts_as_arguments_never_as_script() -> None:
    ran: list[list[str]] = []
    shown = problems.show_dialog("Hivenote cannot start", HOSTILE, platform="darwin", run=recorder(ran))
    assert shown and len(ran) == 1
    argv = ran[0]
    assert argv[:2] == ["osascript", "-e"] and argv[3:] == ["Hivenote cannot start", HOSTILE]
    assert HOSTILE not in argv[2] and "item 2 of argv" in argv[2]  # the script reads them; nothing is spliced in


def test_the_windows_dialog_is_an_error_message_box() -> None:
    calls: list[tuple[Any, ...]] = []
    assert problems.show_dialog("Hivenote cannot start", "text", platform="win32", message_box=box(calls))
    assert calls == [(None, "text", "Hivenote cannot start", problems.MB_OK_ICONERROR)]


def test_the_unwritable_message_gives_each_os_its_own_fix() -> None:
    error = PermissionError(errno.EACCES, "Permission denied", r"C:\Users\ana\AppData\Local\hivenote\tray.lock")
    windows = problems.unwritable(Path(r"C:\Users\ana\AppData\Local\hivenote"), error, platform="win32")
    assert "Full control" in windows and "chown" not in windows and "tray.lock" in windows
    mac = problems.unwritable(
        Path("/Users/ana/Library/Application Support/hivenote"), error, user="ana", platform="darwin"
    )
    assert "sudo chown -R ana: '/Users/ana/Library/Application Support/hivenote'" in mac  # quoted for the shell
    read_only = problems.unwritable(Path("/media/usb/hivenote"), OSError(errno.EROFS, "Read-only file system"))
    assert "read-only" in read_only and "chown" not in read_only


@pytest.mark.parametrize("platform", ["darwin", "win32", "linux"])
def test_start_at_login_keeps_the_data_dir_and_settings_on_every_os(platform: str, tmp_path: Path) -> None:
    environ = {"HIVENOTE_GRAPH_EXTRAS": "true", "HIVENOTE_TOKEN": "hn_secret", "HIVENOTE_PORT": "7950", "PATH": "/bin"}
    argv = login_command(tmp_path / "notes", environ=environ, platform=platform)
    assert argv[-2:] == ["--data-dir", str((tmp_path / "notes").absolute())]
    # Issue 35: the port in the entry shadowed the one "Use another port" saves; settings.json alone holds it.
    assert not any("7950" in arg or arg == "--port" for arg in argv), argv
    assert not any("hn_secret" in arg for arg in argv)  # the token is not a setting: never written into the entry
    if platform == "win32":  # the Run key has no environment of its own: settings stay in settings.json there
        assert not any(arg.startswith("HIVENOTE_") for arg in argv)
    else:
        assert argv[:2] == ["/usr/bin/env", "HIVENOTE_GRAPH_EXTRAS=true"]
    assert "--data-dir" not in login_command(default_data_dir(), environ={}, platform=platform)


def test_open_data_folder_on_macos_runs_open_and_on_windows_asks_explorer(tmp_path: Path) -> None:
    launched: list[list[str]] = []

    def popen(argv: list[str], **_: Any) -> subprocess.Popen[bytes]:
        launched.append(argv)
        return subprocess.Popen([sys.executable, "-c", ""], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    open_path(tmp_path, platform="darwin", popen=popen)
    assert launched == [["open", str(tmp_path)]]
    opened: list[Path] = []
    open_path(tmp_path, platform="win32", startfile=opened.append)
    assert opened == [tmp_path]

    def refuses(_: Path) -> None:
        raise OSError(errno.ENOENT, "No application is associated")

    with pytest.raises(HivenoteError, match="could not open the data folder"):
        open_path(tmp_path, platform="win32", startfile=refuses)


def test_macos_tray_changes_are_queued_to_the_main_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """AppKit must be called on the main thread: pystray's darwin backend does not marshal, so the tray does."""
    queued: list[Any] = []
    helper = types.SimpleNamespace(callAfter=queued.append)
    monkeypatch.setitem(sys.modules, "PyObjCTools", types.SimpleNamespace(AppHelper=helper))
    monkeypatch.setitem(sys.modules, "PyObjCTools.AppHelper", helper)
    ran: list[str] = []
    _on_gui_thread(lambda: ran.append("now"), platform="darwin")
    assert ran == [] and len(queued) == 1
    queued[0]()
    assert ran == ["now"]
    _on_gui_thread(lambda: ran.append("linux"), platform="linux")
    assert ran == ["now", "linux"]


def test_the_window_background_follows_the_gtk_theme_and_leaves_other_os_to_their_webview() -> None:
    assert prefers_dark({"GTK_THEME": "Adwaita:dark"}, "linux") and prefers_dark({"GTK_THEME": "Yaru-dark"}, "linux")
    assert not prefers_dark({"GTK_THEME": "Adwaita"}, "linux")
    assert not prefers_dark({"GTK_THEME": "Adwaita:dark"}, "darwin") and not prefers_dark({}, "win32")
    assert (LIGHT_BG, DARK_BG) == ("#f6f6f4", "#141413")
    css = (Path(__file__).resolve().parents[2] / "server" / "dashboard" / "app.css").read_text(encoding="utf-8")
    assert f"--bg: {LIGHT_BG};" in css and f"--bg: {DARK_BG};" in css  # the page's own background, both themes


def test_the_lock_of_a_read_only_tray_lives_in_a_folder_of_the_users_own_on_every_os(tmp_path: Path) -> None:
    """A data dir the tray cannot write keeps tray.lock elsewhere: one folder per data dir, in the user's own."""
    home, data = tmp_path / "home", tmp_path / "data"
    windows = fallback_home(data, {"LOCALAPPDATA": r"C:\Users\ana\AppData\Local"}, "win32", home)
    assert str(windows).startswith(r"C:\Users\ana\AppData\Local") and windows.parent.name == "trays"
    assert fallback_home(data, {}, "darwin", home).parent == home / "Library" / "Caches" / "hivenote" / "trays"
    linux = fallback_home(data, {"XDG_RUNTIME_DIR": "/run/user/1000"}, "linux", home)
    assert linux.parent == Path("/run/user/1000/hivenote/trays")
    assert fallback_home(data, {}, "linux", home).parent == home / ".cache" / "hivenote" / "trays"
    assert fallback_home(tmp_path / "other", {}, "linux", home) != fallback_home(data, {}, "linux", home)
