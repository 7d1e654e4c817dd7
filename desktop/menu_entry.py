"""The Linux applications-menu entry: `hivenote install-desktop` and `uninstall-desktop`.

It owns one desktop entry in $XDG_DATA_HOME/applications and the app icon at each hicolor size, nothing else.
macOS and Windows have no such entry; `install` says what to do there instead.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from hivenote.server.core.errors import HivenoteError

from .autostart import APP_ID, AutostartFailed, _write_atomically, exec_quote, launcher_command

if TYPE_CHECKING:  # Pillow draws the icons for `install` only: `uninstall` works without the desktop parts
    from PIL import Image

ICON_SIZES = (16, 24, 32, 48, 64, 128, 256, 512)
_TOOL_TIMEOUT_SECONDS = 30


class MenuEntryFailed(HivenoteError):
    """The menu entry or one of its icons could not be written or removed."""

    code = "menu_entry"


class MenuEntryUnsupported(HivenoteError):
    """This OS has no freedesktop applications menu; the message says how to start Hivenote there."""

    code = "unsupported"


def install(
    command: Sequence[str] | None = None, *, data_home: Path | None = None, platform: str = sys.platform
) -> list[Path]:
    """Add Hivenote to the applications menu, launching `command` (default: `launcher_command()`).

    Writes the icons first and the entry last, each atomically; if a write fails, the files this call created
    are removed again. Returns the paths written.
    """
    _refuse_unsupported(platform)
    argv = list(command) if command is not None else launcher_command()
    if not argv:
        raise ValueError("the menu entry needs a command to run")
    data_home = _data_home(data_home)
    path = where(data_home=data_home)
    try:
        entry = _entry(argv).encode("utf-8")
    except UnicodeEncodeError as exc:  # a path that is not UTF-8 cannot go in a desktop entry
        raise MenuEntryFailed(
            f"Could not write the menu entry {path}: the command {argv!r} is not valid UTF-8. Install Hivenote "
            "under a folder whose name is UTF-8, then try again."
        ) from exc
    from .icons import app_icon

    files = {icon: _png(app_icon(size)) for size, icon in zip(ICON_SIZES, _icon_paths(data_home), strict=True)}
    files[path] = entry
    new_folders = [folder for folder in _folders(files, data_home) if not folder.exists()]
    created: list[Path] = []
    written: list[Path] = []
    for target, data in files.items():
        existed = target.exists()
        try:
            _write_atomically(target, data)
        except AutostartFailed as exc:  # worded for autostart; its cause is the OSError
            _roll_back(created, new_folders)
            raise _failure("write", target, exc.__cause__) from exc.__cause__
        written.append(target)
        if not existed:
            created.append(target)
    _refresh_caches(data_home)
    return written


def uninstall(*, data_home: Path | None = None) -> list[Path]:
    """Remove the entry and its icons (missing files are fine); returns the paths removed."""
    data_home = _data_home(data_home)
    removed = []
    for path in [where(data_home=data_home), *_icon_paths(data_home)]:
        try:
            path.unlink()
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise _failure("remove", path, exc) from exc
        removed.append(path)
    if removed:
        _refresh_caches(data_home)
    return removed


def where(*, data_home: Path | None = None) -> Path:
    """The desktop entry's path: $XDG_DATA_HOME/applications/hivenote.desktop."""
    return _data_home(data_home) / "applications" / f"{APP_ID}.desktop"


def _entry(argv: Sequence[str]) -> str:
    return (
        "[Desktop Entry]\n"
        "Type=Application\n"
        "Name=Hivenote\n"
        "GenericName=Shared memory for AI agents\n"
        "Comment=One shared notebook for all your AI agents, over MCP\n"
        f"Exec={exec_quote(argv)}\n"
        f"Icon={APP_ID}\n"
        "Terminal=false\n"
        "Categories=Development;\n"  # one main category: listed once
        "Keywords=MCP;AI;agent;notes;memory;notebook;\n"
        "StartupNotify=false\n"
        f"StartupWMClass={APP_ID}\n"
    )


def _refuse_unsupported(platform: str) -> None:
    if platform == "darwin":
        raise MenuEntryUnsupported(
            "macOS has no applications-menu entry for Hivenote: it is a menu-bar app. Start it with `hivenote`, "
            "or at every login with Start at login in its menu (or `hivenote autostart on`)."
        )
    if platform == "win32":
        raise MenuEntryUnsupported(
            "install-desktop is for Linux desktops. On Windows, pip installed hivenote-desktop.exe in your "
            f"Python's Scripts folder ({sysconfig.get_path('scripts')}): pin it to Start, and turn on Start at "
            "login in its menu (or run `hivenote autostart on`). There is no signed installer yet."
        )


def _data_home(data_home: Path | None) -> Path:
    if data_home is not None:
        return data_home
    configured = os.environ.get("XDG_DATA_HOME", "")
    # The Base Directory spec: a relative path is invalid and must be ignored.
    return Path(configured) if os.path.isabs(configured) else Path.home() / ".local" / "share"


def _hicolor(data_home: Path) -> Path:
    return data_home / "icons" / "hicolor"


def _icon_paths(data_home: Path) -> list[Path]:
    return [_hicolor(data_home) / f"{n}x{n}" / "apps" / f"{APP_ID}.png" for n in ICON_SIZES]


def _png(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def _folders(files: dict[Path, bytes], data_home: Path) -> list[Path]:
    """Every folder between `data_home` and the files, deepest first."""
    folders = {parent for path in files for parent in path.parents if parent.is_relative_to(data_home)}
    return sorted(folders, key=lambda folder: len(folder.parts), reverse=True)


def _roll_back(created: list[Path], new_folders: list[Path]) -> None:
    """Remove the files and folders an interrupted install created (files it replaced stay, whole and new)."""
    for path in created:
        with contextlib.suppress(OSError):
            path.unlink()
    for folder in new_folders:
        with contextlib.suppress(OSError):
            folder.rmdir()


def _refresh_caches(data_home: Path) -> None:
    """Tell the desktop about the change where its tools are installed; a failure here is not an error."""
    commands = [["update-desktop-database", str(data_home / "applications")]]
    # Like xdg-icon-resource: refresh an icon cache, never create one (GTK trusts a cache while the theme folder
    # is older, so a cache nobody refreshes hides the icons other programs add later).
    if (_hicolor(data_home) / "icon-theme.cache").is_file():
        commands.append(["gtk-update-icon-cache", "-f", "-t", str(_hicolor(data_home))])
    for name, *args in commands:
        tool = shutil.which(name)
        if tool is None:
            continue
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run([tool, *args], capture_output=True, timeout=_TOOL_TIMEOUT_SECONDS, check=False)


def _failure(action: str, path: Path, exc: BaseException | None) -> MenuEntryFailed:
    reason = (exc.strerror if isinstance(exc, OSError) else None) or str(exc)
    unchanged = " Nothing was left half-written." if action == "write" else ""
    return MenuEntryFailed(
        f"Could not {action} {path}: {reason}.{unchanged} Check that your account can write to {path.parent} "
        "(and that the disk is not read-only or full), then try again."
    )
