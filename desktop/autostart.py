"""Start at login: the one file or registry value per OS that makes Hivenote start when its user logs in.

`autostart()` picks the private backend for the platform (an XDG autostart entry, a macOS LaunchAgent, the
Windows HKCU Run key); each only writes, reads and removes its own entry and never starts anything itself.
"""

from __future__ import annotations

import os
import plistlib
import shlex
import subprocess
import sys
import sysconfig
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol
from xml.parsers.expat import ExpatError

from hivenote.server.core.errors import HivenoteError
from hivenote.server.storage import statefile

APP_ID = "hivenote"
LABEL = "com.hivenote.app"  # the LaunchAgent's label and file name
RUN_KEY = r"Software\Microsoft\Windows\CurrentVersion\Run"
RUN_VALUE = "Hivenote"
# Tray hosts (GNOME's AppIndicator extension, KDE's panel on Wayland) often come up after autostart entries run.
START_DELAY_SECONDS = 5


class AutostartFailed(HivenoteError):
    """The start-at-login entry could not be written, read or removed (permissions, a read-only disk, ...)."""

    code = "autostart"


class Autostart(Protocol):
    def enable(self) -> None:
        """Start Hivenote at the next login (idempotent)."""

    def disable(self) -> None:
        """Stop starting Hivenote at login (idempotent)."""

    def is_enabled(self) -> bool: ...

    def describe(self) -> str:
        """Where the entry lives, for the user."""


class RegistryLike(Protocol):
    """One registry key's string values: the seam between the Windows backend and `winreg`."""

    def get(self, name: str) -> str | None: ...

    def set(self, name: str, value: str) -> None: ...

    def delete(self, name: str) -> None:
        """Remove the value; a missing value is not an error."""


def autostart(
    command: Sequence[str] | None = None,
    *,
    platform: str = sys.platform,
    home: Path | None = None,
    registry: RegistryLike | None = None,
) -> Autostart:
    """The start-at-login entry for this platform, launching `command` (default: `launcher_command()`)."""
    argv = list(command) if command is not None else launcher_command()
    if not argv:
        raise ValueError("autostart needs a command to run")
    home = home if home is not None else Path.home()
    if platform == "darwin":
        return _LaunchAgent(argv, home / "Library")
    if platform == "win32":
        return _RunKey(argv, registry if registry is not None else _WinregRunKey())
    return _XdgAutostart(argv, _xdg_config_home(home))  # Linux and the BSDs: freedesktop desktops


def launcher_command(*, executable: str | None = None, platform: str = sys.platform) -> list[str]:
    """How to start the installed app: the `hivenote` script beside the interpreter, else `python -m`."""
    exe = Path(executable or sys.executable).absolute()
    if executable is None and getattr(sys, "frozen", False):  # a PyInstaller build is its own launcher
        return [str(exe)]
    script = "hivenote.exe" if platform == "win32" else "hivenote"
    # The scripts folder is the interpreter's own folder in a venv; a system Python keeps them elsewhere.
    folders = [exe.parent] if executable else [exe.parent, Path(sysconfig.get_path("scripts")).absolute()]
    for folder in folders:
        if (folder / script).is_file():
            return [str(folder / script)]
    if platform == "win32" and exe.name.lower() == "python.exe" and (exe.parent / "pythonw.exe").is_file():
        exe = exe.parent / "pythonw.exe"  # no console window at login
    return [str(exe), "-m", "hivenote.desktop"]


# --- Linux and other freedesktop systems -------------------------------------------------------------

_EXEC_RESERVED = frozenset(" \t\n\"'\\><~|&;$*?#()`")
_EXEC_ESCAPED_IN_QUOTES = frozenset('"`$\\')
_STRING_ESCAPES = {"\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def exec_quote(argv: Sequence[str]) -> str:
    """An `Exec=` value for `argv`, per the Desktop Entry spec's quoting rules.

    Arguments with reserved characters are double-quoted, with `"`, backquote, `$` and `\\` backslash-escaped
    inside; `%` becomes `%%` (field codes); then the value is escaped as a key-file string (`\\` -> `\\\\`,
    newline -> `\\n`, ...), which the spec applies before unquoting.
    """
    words = []
    for arg in argv:
        if "\0" in arg:
            raise ValueError(f"a command argument cannot contain a NUL character: {arg!r}")
        if arg and not _EXEC_RESERVED.intersection(arg):
            word = arg
        else:
            word = '"' + "".join("\\" + c if c in _EXEC_ESCAPED_IN_QUOTES else c for c in arg) + '"'
        words.append(word.replace("%", "%%"))
    return "".join(_STRING_ESCAPES.get(c, c) for c in " ".join(words))


def _xdg_config_home(home: Path) -> Path:
    configured = os.environ.get("XDG_CONFIG_HOME", "")
    # The Base Directory spec: a relative path is invalid and must be ignored.
    return Path(configured) if os.path.isabs(configured) else home / ".config"


class _XdgAutostart:
    def __init__(self, argv: list[str], config_home: Path) -> None:
        self.argv = argv
        self.path = config_home / "autostart" / f"{APP_ID}.desktop"

    def entry(self) -> str:
        return (
            "[Desktop Entry]\n"
            "Type=Application\n"
            "Name=Hivenote\n"
            "Comment=Start the shared notebook for your AI agents at login\n"
            f"Exec={exec_quote(self.argv)}\n"
            f"Icon={APP_ID}\n"
            "Terminal=false\n"
            "Categories=Utility;\n"
            "X-GNOME-Autostart-enabled=true\n"
            f"X-GNOME-Autostart-Delay={START_DELAY_SECONDS}\n"
        )

    def enable(self) -> None:
        try:
            data = self.entry().encode("utf-8")
        except UnicodeEncodeError as exc:  # a path that is not UTF-8 cannot go in a desktop entry
            raise AutostartFailed(
                f"Could not write the start-at-login entry {self.path}: the command {self.argv!r} is not valid "
                "UTF-8. Install Hivenote under a folder whose name is UTF-8, then try again."
            ) from exc
        _write_atomically(self.path, data)

    def disable(self) -> None:
        _remove(self.path)

    def is_enabled(self) -> bool:
        try:
            text = self.path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise _failure("read", self.path, exc) from exc
        keys = _desktop_entry_keys(text)
        # Desktops that turn an entry off rather than delete it write one of these two keys.
        return keys.get("Hidden") != "true" and keys.get("X-GNOME-Autostart-enabled") != "false"

    def describe(self) -> str:
        return f"{self.path}, an XDG autostart entry that your desktop runs {START_DELAY_SECONDS} s after login"


def _desktop_entry_keys(text: str) -> dict[str, str]:
    """The keys of the [Desktop Entry] group (key files split lines on LF only)."""
    keys: dict[str, str] = {}
    group = ""
    for raw in text.split("\n"):
        line = raw.strip()
        if line.startswith("[") and line.endswith("]"):
            group = line[1:-1]
        elif group == "Desktop Entry" and "=" in line and not line.startswith("#"):
            key, value = line.split("=", 1)
            keys[key.strip()] = value.strip()
    return keys


# --- macOS ---------------------------------------------------------------------------------------------


class _LaunchAgent:
    def __init__(self, argv: list[str], library: Path) -> None:
        self.argv = argv
        self.path = library / "LaunchAgents" / f"{LABEL}.plist"
        self.logs = library / "Logs" / "Hivenote"

    def agent(self) -> dict[str, object]:
        return {
            "Label": LABEL,
            "ProgramArguments": self.argv,
            "RunAtLoad": True,
            "KeepAlive": False,  # Quit in the menu means quit until the next login
            "ProcessType": "Interactive",
            "LimitLoadToSessionType": "Aqua",  # a menu-bar app: only in a graphical login
            "StandardOutPath": str(self.logs / "hivenote.out.log"),
            "StandardErrorPath": str(self.logs / "hivenote.err.log"),
        }

    def enable(self) -> None:
        try:  # launchd does not create the log folder, and fails to start the job without it
            self.logs.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise _failure("create", self.logs, exc, "the log folder for start at login") from exc
        _write_atomically(self.path, plistlib.dumps(self.agent()))

    def disable(self) -> None:
        _remove(self.path)

    def is_enabled(self) -> bool:
        try:
            agent = plistlib.loads(self.path.read_bytes())
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise _failure("read", self.path, exc) from exc
        except (plistlib.InvalidFileException, ExpatError, ValueError):
            return False  # a damaged file starts nothing; enable() rewrites it
        return isinstance(agent, dict) and agent.get("RunAtLoad") is True and agent.get("Disabled") is not True

    def describe(self) -> str:
        return (
            f"{self.path}, a LaunchAgent that launchd runs at login (to start it now: "
            f"`launchctl bootstrap gui/$(id -u) {shlex.quote(str(self.path))}`)"
        )


# --- Windows ---------------------------------------------------------------------------------------------


class _RunKey:
    def __init__(self, argv: list[str], registry: RegistryLike) -> None:
        self.argv = argv
        self.registry = registry

    def command_line(self) -> str:
        return subprocess.list2cmdline(self.argv)

    def enable(self) -> None:
        try:
            self.registry.set(RUN_VALUE, self.command_line())
        except OSError as exc:
            raise _failure("write", self._where(), exc) from exc

    def disable(self) -> None:
        try:
            self.registry.delete(RUN_VALUE)
        except OSError as exc:
            raise _failure("remove", self._where(), exc) from exc

    def is_enabled(self) -> bool:
        try:
            return bool(self.registry.get(RUN_VALUE))
        except OSError as exc:
            raise _failure("read", self._where(), exc) from exc

    def describe(self) -> str:
        return f"{self._where()}, which Windows runs when you sign in"

    def _where(self) -> str:
        return f"the registry value HKEY_CURRENT_USER\\{RUN_KEY}\\{RUN_VALUE}"


class _WinregRunKey:
    """HKEY_CURRENT_USER's Run key through `winreg` (Windows only; every other platform gets an OSError)."""

    def get(self, name: str) -> str | None:
        if sys.platform != "win32":
            raise OSError("the Windows registry exists only on Windows")
        import winreg

        try:
            with winreg.OpenKey(winreg.HKEY_CURRENT_USER, RUN_KEY) as key:
                value, _kind = winreg.QueryValueEx(key, name)
        except FileNotFoundError:
            return None
        return str(value)

    def set(self, name: str, value: str) -> None:
        if sys.platform != "win32":
            raise OSError("the Windows registry exists only on Windows")
        import winreg

        with winreg.CreateKeyEx(winreg.HKEY_CURRENT_USER, RUN_KEY, 0, winreg.KEY_SET_VALUE) as key:
            winreg.SetValueEx(key, name, 0, winreg.REG_SZ, value)

    def delete(self, name: str) -> None:
        if sys.platform != "win32":
            raise OSError("the Windows registry exists only on Windows")
        import winreg

        try:
            with winreg.OpenKey(winreg.HKEY_CURRENT_USER, RUN_KEY, 0, winreg.KEY_SET_VALUE) as key:
                winreg.DeleteValue(key, name)
        except FileNotFoundError:
            pass


# --- files -----------------------------------------------------------------------------------------------


def _write_atomically(path: Path, data: bytes) -> None:
    """Replace `path` with `data` in one step: a reader sees the old file or the new one, never half of one."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _failure("write", path, exc) from exc
    try:
        # A unique temp file, fsynced, renamed, the folder fsynced. 0644, not 0600: launchd and desktops expect it.
        statefile.write_bytes(path, data, mode=0o644)
    except statefile.StateFileUnwritable as exc:
        raise _failure("write", path, exc.error) from exc


def _remove(path: Path) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError as exc:
        raise _failure("remove", path, exc) from exc


def _failure(action: str, where: Path | str, exc: OSError, what: str = "the start-at-login entry") -> AutostartFailed:
    reason = exc.strerror or str(exc)
    folder = where.parent if isinstance(where, Path) else "that registry key"
    access = "read" if action == "read" else "write to"
    unchanged = "" if action == "read" else " Nothing was changed."
    return AutostartFailed(
        f"Could not {action} {what} {where}: {reason}.{unchanged} Check that your account "
        f"can {access} {folder} (and that the disk is not read-only or full), then try again."
    )
