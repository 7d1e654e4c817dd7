"""The `hivenote` launcher: no command starts the tray app; `tray`, `quit`, `autostart`, `install-desktop` and
`uninstall-desktop` are the desktop's own commands, `doctor` gains desktop checks, everything else is the
server's command line (hivenote.server.cli.main).

The server's commands never import the desktop parts (the `hivenote[desktop]` extra: pystray, pywebview, Pillow,
pyperclip, PyGObject): this module imports them only inside the desktop commands, after desktop/parts.py found
them. Without them, the tray, `--window`, `install-desktop` and `autostart` say what is missing and the command
that installs it, and exit with code 6 (parts.EXIT_NOT_INSTALLED); `doctor` says so too; `quit` and
`uninstall-desktop` work without them.

Frozen builds (PyInstaller) have no `python -m`, so the dashboard window process is started as
`hivenote --window` (the address comes on its stdin) and dispatched here before any argument parsing.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hivenote.server.cli import main as cli
from hivenote.server.cli.context import AddCommand, Context
from hivenote.server.settings import DEFAULT_PORT

from . import parts


def without_desktop_parts(ctx: Context, what: str) -> int | None:
    """None when the desktop parts are installed; else says what is missing and how to install it, and returns
    the exit code for it."""
    absent = parts.missing()
    if not absent:
        return None
    text = parts.message(absent, what)
    if ctx.json:
        ctx.err.write(json.dumps({"error": {"code": "desktop_not_installed", "message": text}}) + "\n")
    else:
        ctx.err.write(f"hivenote: {text}")
    return parts.EXIT_NOT_INSTALLED


def cmd_tray(ctx: Context) -> int:
    if (code := without_desktop_parts(ctx, "the tray app")) is not None:
        return code
    from .app import run_tray

    flags = {"port": getattr(ctx.args, "port", None), "host": getattr(ctx.args, "host", None)}
    return run_tray(ctx.data_dir, flags, ctx.err)


def cmd_quit(ctx: Context) -> int:
    from .instance import Instance

    instance = Instance(ctx.data_dir)
    if instance.acquire(lambda _: None):
        instance.release()
        ctx.emit({"running": False}, "Hivenote's tray app is not running.")
        return 0
    instance.send("quit")
    ctx.emit({"running": True, "quit": True}, "Asked the running Hivenote to quit.")
    return 0


def cmd_autostart(ctx: Context) -> int:
    if (code := without_desktop_parts(ctx, "starting the tray app at login")) is not None:
        return code
    from hivenote.server.settings import load_settings

    from .app import keep_port, login_command
    from .autostart import autostart

    entry = autostart(login_command(ctx.data_dir))
    action = ctx.args.state
    if action == "on":
        keep_port(ctx.data_dir, load_settings(data_dir=ctx.data_dir).port)  # a login has no HIVENOTE_PORT
        entry.enable()
    elif action == "off":
        entry.disable()
    enabled = entry.is_enabled()
    where = entry.describe()
    text = f"Start at login: on ({where})" if enabled else f"Start at login: off (`autostart on` writes {where})"
    ctx.emit({"enabled": enabled, "where": entry.describe()}, text)
    return 0


def cmd_install_desktop(ctx: Context) -> int:
    if (code := without_desktop_parts(ctx, "the applications-menu entry (it starts the tray app)")) is not None:
        return code
    from .menu_entry import install

    written = install()
    ctx.emit(
        {"written": [str(p) for p in written]},
        "Hivenote is in the applications menu now.\n" + "\n".join(f"  {p}" for p in written),
    )
    return 0


def cmd_uninstall_desktop(ctx: Context) -> int:
    from .menu_entry import uninstall

    removed = uninstall()
    text = "Removed:\n" + "\n".join(f"  {p}" for p in removed) if removed else "Nothing to remove."
    ctx.emit({"removed": [str(p) for p in removed]}, text)
    return 0


def doctor_desktop(ctx: Context) -> tuple[str, Any, list[str]]:
    absent = parts.missing()
    if absent:
        install = parts.install_command()
        lines = [
            f"desktop parts: not installed (missing: {', '.join(absent)}); this install is the headless server "
            f"(`hivenote serve`). For the tray app and the dashboard window: {install}"
        ]
        return "desktop", {"installed": False, "missing": absent, "install": install}, lines
    from .backends import INSTALL_HINT, graphical_session, tray_backend, tray_host, window_backend

    tray, window = tray_backend(), window_backend()
    host = tray_host() if graphical_session() and sys.platform == "linux" else None
    report = {
        "tray": {"backend": tray.name, "why": tray.reason, "host": host},
        "window": {"backend": window.name, "why": window.reason},
    }
    lines = [
        f"tray: {tray.name or 'none'} — {tray.reason}",
        f"window: {window.name or 'browser'} — {window.reason}",
    ]
    if sys.platform == "linux" and graphical_session():
        lines.append(f"tray host on this desktop: {host or 'none found (the icon will not show)'}")
    if not graphical_session():  # SSH, a container, a server: nothing is missing, there is no screen
        lines.append(
            "no desktop here: `hivenote` serves without a tray icon, or use `hivenote serve` (a systemd user unit "
            "is in packaging/); run doctor in a desktop session to check the tray and the window"
        )
    elif tray.name is None or (window.name is None and sys.platform == "linux"):
        lines.append("missing system packages; install them with:\n" + INSTALL_HINT)
    return "desktop", report, lines


def desktop_commands(add: AddCommand) -> None:
    p = add("tray", "start the tray app (what `hivenote` alone does)", cmd_tray)
    p.add_argument("--port", type=int, help=f"port (default {DEFAULT_PORT}, or settings.json)")
    add("quit", "quit the running tray app", cmd_quit)
    p = add("autostart", "start Hivenote when you log in: on, off, or status", cmd_autostart)
    p.add_argument("state", choices=("on", "off", "status"), nargs="?", default="status")
    add("install-desktop", "add Hivenote to the applications menu (Linux)", cmd_install_desktop)
    add("uninstall-desktop", "remove Hivenote from the applications menu", cmd_uninstall_desktop)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--window"]:  # started by the tray, which needs the same parts: only a broken install gets here
        if absent := parts.missing():
            sys.stderr.write(f"hivenote: {parts.message(absent, 'the dashboard window')}")
            return parts.EXIT_NOT_INSTALLED
        from .window import main as window_main

        return window_main(args[1:])
    try:
        return cli.main(args, extend=desktop_commands, default=cmd_tray, doctor_checks=(doctor_desktop,))
    except OSError as exc:  # e.g. `hivenote remember` in a data dir made by `sudo hivenote`: no traceback
        from .problems import EXIT_STORE, cannot_write, refused

        if not cannot_write(exc):
            raise
        sys.stderr.write(f"hivenote: {refused(_data_dir(args), exc)}\n")
        return EXIT_STORE


def _data_dir(args: Sequence[str]) -> Path:
    import argparse

    from hivenote.server.settings import resolve_data_dir

    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--data-dir")
    return resolve_data_dir(parser.parse_known_args(args)[0].data_dir)


if __name__ == "__main__":
    raise SystemExit(main())
