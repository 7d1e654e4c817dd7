"""Opening the dashboard signed in, for `hivenote open` and the tray: a one-time code from the running server (asked
with the owner's token, which this account reads in the data dir), in the address the window or browser loads.

The code must never be on a command line, where every account of the machine reads it (/proc/<pid>/cmdline) and
could trade it before the browser does: the tray hands its window the address on a pipe, and a browser is given a
file of this user's only (0600, in a folder only this user may enter) that sends it on to the address.
"""

from __future__ import annotations

import html
import json
import sys
import urllib.error
import urllib.request
import webbrowser
from pathlib import Path

import platformdirs

from ..core.errors import HivenoteError
from ..mcp.handoff_stdio import private_dir
from ..storage.files import write_whole
from ..storage.layout import Layout
from ..tokens import Tokens

CODE_WAIT_S = 5.0


def signed_in_url(url: str, data_dir: Path, *, token: str | None = None) -> str:
    """`url` (the dashboard's address) with a fresh one-time code from the server there, asked with the owner's token
    (`token`, else the one in `data_dir`); `url` as it is when no code can be had (the page then asks for a token)."""
    base = url.rstrip("/")
    try:
        token = token or Tokens(Layout(data_dir).tokens).default()
        request = urllib.request.Request(
            f"{base}/api/session/code",
            data=b"",
            method="POST",
            headers={"Authorization": f"Bearer {token}", "X-Hivenote-Client": "hivenote-cli/1"},
        )
        with urllib.request.urlopen(request, timeout=CODE_WAIT_S) as response:
            code = json.loads(response.read())["code"]
    except (OSError, ValueError, KeyError, HivenoteError):
        return f"{base}/"
    return f"{base}/?code={code}"


def redirect_folder() -> Path:
    """A folder only this user may enter: the runtime folder the stdio handoff uses, else this user's cache."""
    if sys.platform != "win32" and (found := private_dir()) is not None:
        return found
    folder = Path(platformdirs.user_cache_dir("hivenote", appauthor=False))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def open_in_browser(url: str) -> Path:
    """Open `url` in the default browser through a private file that sends the browser on (the address holds the
    code, which must not appear in the browser's command line); returns the file."""
    page = (
        '<!doctype html><meta charset="utf-8"><meta name="referrer" content="no-referrer">'
        f'<meta http-equiv="refresh" content="0;url={html.escape(url, quote=True)}">'
        f'<title>Hivenote</title><p><a href="{html.escape(url, quote=True)}">Open Hivenote</a></p>\n'
    )
    path = redirect_folder() / "hivenote-open.html"
    write_whole(path, [page.encode()], durable=False)  # 0600, a fresh file renamed over the old one
    webbrowser.open(path.as_uri())
    return path
