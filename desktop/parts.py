"""Whether the tray app's packages (the `hivenote[desktop]` extra) are installed here, and the exact command that
installs them for this installation (pip or pipx; from the package index, a checkout, or a URL).

`pip install hivenote` is the headless server: MCP, REST, the dashboard in a browser, sync. The tray icon, the
dashboard window and the clipboard need pystray, pywebview, Pillow, pyperclip and, on Linux, PyGObject and
python-xlib, which only the extra brings. Standard library only: the launcher asks before importing any of them.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import unquote, urlsplit

from .backends import APT_PACKAGES, DNF_PACKAGES

EXIT_NOT_INSTALLED = 6  # README "Exit codes": a desktop command without the desktop parts
EXTRA = "desktop"
# import name -> the distribution pip installs it from; pyproject's [desktop] extra lists exactly these
# (tests/packaging/test_dependencies.py keeps the two in step).
MODULES: dict[str, str] = {"pystray": "pystray", "webview": "pywebview", "PIL": "pillow", "pyperclip": "pyperclip"}
PLATFORM_MODULES: dict[str, dict[str, str]] = {
    "linux": {"gi": "PyGObject", "Xlib": "python-xlib"},  # the GTK tray and window; the XEmbed tray check
    "darwin": {"PyObjCTools": "pyobjc-core"},  # AppKit's main-thread queue
}


def modules(platform: str = sys.platform) -> dict[str, str]:
    """The desktop's import names and their distributions on this platform."""
    return MODULES | PLATFORM_MODULES.get(platform, {})


def missing(platform: str = sys.platform) -> list[str]:
    """The distributions of the desktop extra that are not importable here (found without importing them)."""
    return [dist for name, dist in modules(platform).items() if importlib.util.find_spec(name) is None]


def install_command(
    *, executable: str = sys.executable, prefix: Path = Path(sys.prefix), direct_url: str | None = None
) -> str:
    """The command that adds the extra to this very installation. `direct_url` is the installed distribution's
    PEP 610 record (None: read it; "" for an install from the package index)."""
    if direct_url is None:
        try:
            direct_url = importlib.metadata.distribution("hivenote").read_text("direct_url.json") or ""
        except importlib.metadata.PackageNotFoundError:  # run from a source tree without installing
            direct_url = ""
    requirement, editable = _requirement(direct_url)
    flag = "--editable " if editable else ""
    if (prefix / "pipx_metadata.json").is_file():  # a pipx venv: pipx reinstalls it with the extra
        return f"pipx install --force {flag}{shlex.quote(requirement)}"
    return f"{shlex.quote(executable)} -m pip install {flag}{shlex.quote(requirement)}"


def _requirement(direct_url: str) -> tuple[str, bool]:
    """`hivenote[desktop]` from where this copy came: the index, a local folder (maybe editable), or a URL."""
    name = f"hivenote[{EXTRA}]"
    if not direct_url:
        return name, False
    record: Mapping[str, object] = json.loads(direct_url)
    url = str(record.get("url", ""))
    dir_info = record.get("dir_info")
    vcs_info = record.get("vcs_info")
    if isinstance(dir_info, Mapping) and url.startswith("file://"):
        folder = unquote(urlsplit(url).path)
        return f"{folder}[{EXTRA}]", bool(dir_info.get("editable"))
    if isinstance(vcs_info, Mapping):
        commit = vcs_info.get("requested_revision") or vcs_info.get("commit_id")
        url = f"{vcs_info.get('vcs', 'git')}+{url}" + (f"@{commit}" if commit else "")
    return f"{name} @ {url}", False


def message(absent: list[str], what: str = "the tray app", platform: str = sys.platform) -> str:
    """What is missing for `what`, what works without it, and the command that installs it."""
    text = (
        f"{what} needs Hivenote's desktop parts, which are not installed here (missing: {', '.join(absent)}).\n"
        "Without them Hivenote runs headless: `hivenote serve` serves MCP, REST, sync and the dashboard (open it in "
        "a browser).\n"
        f"To install the desktop parts: {install_command()}\n"
    )
    if platform == "linux":
        text += (
            "On Linux pip builds PyGObject from source; first install what it builds with and what the tray needs:\n"
            f"  Debian/Ubuntu: sudo apt install {' '.join(APT_PACKAGES)}\n"
            f"  Fedora: sudo dnf install {' '.join(DNF_PACKAGES)}\n"
        )
    return text
