"""The `hivenote` command line: the notebook for people and scripts (`--json` for machine output).

Reads open the data dir read-only (they work while a Hivenote server runs); writes take the shard lock.
Exit codes: 0 ok, 1 invalid input or failed operation, 2 usage, 3 not found, 4 data dir in use, 5 storage error.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import TextIO

from .. import __version__
from ..core.errors import HivenoteError
from ..core.model import NOTE_KINDS
from ..settings import DEFAULT_PORT
from . import data, notes, serving
from .context import AddCommand, Context, DoctorCheck
from .sync import cmd_sync

# -- parser -----------------------------------------------------------------------------------------


def build_parser(extend: Callable[[AddCommand], None] | None = None) -> argparse.ArgumentParser:
    """The whole command line; `extend` adds commands (the desktop launcher adds its own)."""
    common = argparse.ArgumentParser(add_help=False)
    # SUPPRESS: an option given before the subcommand is not reset by the subcommand's own default.
    common.add_argument(
        "--data-dir",
        default=argparse.SUPPRESS,
        help="notebook folder (default: $HIVENOTE_DATA_DIR or the user data dir)",
    )
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="machine-readable output")

    parser = argparse.ArgumentParser(
        prog="hivenote", description="One shared notebook for all your AI agents.", parents=[common]
    )
    parser.add_argument("--version", action="version", version=f"hivenote {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def add(name: str, help_text: str, func: Callable[[Context], int]) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text, parents=[common])
        p.set_defaults(func=func)
        return p

    def filters(p: argparse.ArgumentParser) -> None:
        p.add_argument("--kind", choices=NOTE_KINDS)
        p.add_argument("--project", help="the codebase's name, e.g. shop-api")
        p.add_argument("--tag")
        p.add_argument("--agent", help="written by this agent (cursor, claude-code, codex, ...)")
        p.add_argument("--person", help="written by this teammate (their token's name)")
        p.add_argument("--trash", action="store_true", help="look in the trash instead")
        window(p)

    def window(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--since",
            metavar="WHEN",
            help="created or changed at or after: yesterday, today, monday, 'last week', 'this month', "
            "'3 days ago', 2h, 7d, or an ISO date/date-time (local time)",
        )
        p.add_argument("--until", metavar="WHEN", help="created or changed before (a day or week: before its end)")

    p = add("remember", "store a note", notes.cmd_remember)
    p.add_argument("--kind", required=True, choices=NOTE_KINDS)
    p.add_argument("--title", required=True)
    p.add_argument("--body")
    p.add_argument("--body-file", help="read the body from a file ('-' for stdin)")
    p.add_argument("--project", help="the codebase's name, e.g. shop-api (not a path)")
    p.add_argument("--tag", action="append", help="repeat for several tags")
    p.add_argument("--replaces", metavar="ID", help="the note this one replaces (a superseded decision)")

    p = add("search", "find notes: every word must match, then the closest by meaning", notes.cmd_search)
    p.add_argument("query")
    filters(p)
    p.add_argument("--limit", type=int)

    p = add("list", "recent notes first", notes.cmd_list)
    filters(p)
    p.add_argument("--limit", type=int, default=20)
    p.add_argument("--offset", type=int, default=0)

    add("get", "show one note", notes.cmd_get).add_argument("id")

    p = add("update", "change some fields of a note", notes.cmd_update)
    p.add_argument("id")
    p.add_argument("--kind", choices=NOTE_KINDS)
    p.add_argument("--title")
    p.add_argument("--body")
    p.add_argument("--body-file")
    p.add_argument("--project", help="new project name ('' to clear)")
    p.add_argument("--tag", action="append", help="replaces all tags; repeat for several")
    p.add_argument("--no-tags", action="store_true", help="remove all tags")
    p.add_argument("--replaces", metavar="ID", help="the note this one replaces ('' to drop the link)")

    add("forget", "move a note to the trash", notes.flag_command("forget", "Moved to the trash:")).add_argument("id")
    add("restore", "bring a note back from the trash", notes.flag_command("restore", "Restored")).add_argument("id")
    add("purge", "delete a trashed note for good", notes.cmd_purge).add_argument("id")
    p = add("history", "every version of a note, with who and when", notes.cmd_history)
    p.add_argument("id")
    window(p)

    p = add("import", "import a memory.jsonl or a notebook export (idempotent)", data.cmd_import)
    p.add_argument("file")
    p.add_argument("--format", choices=("notebook", "memory-jsonl"))
    p.add_argument("--skip-bad", action="store_true", help="import every good line, report the bad ones")

    p = add("export", "export the notebook or the graph as memory.jsonl", data.cmd_export)
    p.add_argument("file", help="target file, or - for stdout")
    p.add_argument("--format", choices=("notebook", "memory-jsonl"))

    add("compact", "shrink this machine's log shard (drops old history)", data.cmd_compact)
    add("doctor", "check the data dir, the log and the clock", data.cmd_doctor)
    add("reindex", "build the search-by-meaning indexes now, with a progress bar", data.cmd_reindex)

    p = add("serve", "run the Hivenote server headless (MCP, REST)", serving.cmd_serve)
    p.add_argument("--host", help="address to listen on (default 127.0.0.1; beyond loopback needs a token)")
    p.add_argument("--port", type=int, help=f"port (default {DEFAULT_PORT})")
    p.add_argument("--no-auth", action="store_true", help="no token needed (loopback only)")

    p = add("connect", "print a ready config for an agent (Cursor, Claude, Codex, ...)", serving.cmd_connect)
    p.add_argument("client", nargs="?", help="cursor, claude-desktop, claude-code, codex, gemini-cli, vscode, ...")
    p.add_argument("--graph", action="store_true", help="the official memory tools endpoint instead")
    p.add_argument(
        "--install",
        action="store_true",
        help="connect it for you: run its own command or merge the entry into its config file (shown first)",
    )
    p.add_argument("--yes", action="store_true", help="with --install: make the change without asking")

    add("stop", "stop the Hivenote server of this data dir (tray, serve, or one stdio started)", serving.cmd_stop)
    add("open", "open the running server's dashboard in your browser, signed in", serving.cmd_open)

    p = add("stdio", "MCP over stdin/stdout for stdio-only clients (starts the server if needed)", serving.cmd_stdio)
    p.add_argument("--graph", action="store_true", help="the official memory tools (drop-in for server-memory)")
    p.add_argument("--port", type=int, help=f"port of the local server (default {DEFAULT_PORT})")
    p.add_argument(
        "--bridge", action="store_true", help="forward over HTTP instead of handing the session to the server"
    )

    p = add("token", "show the token, or manage per-person tokens", serving.cmd_token)
    tsub = p.add_subparsers(dest="token_command", required=True, metavar="show|add|list|revoke")
    tsub.add_parser("show", parents=[common], help="print the default token")
    tsub.add_parser("list", parents=[common], help="list per-person tokens")
    tsub.add_parser("add", parents=[common], help="issue a token for a person").add_argument("name")
    tsub.add_parser("revoke", parents=[common], help="revoke a person's token").add_argument("name")

    p = add("graph", "read the knowledge graph (paged)", notes.cmd_graph)
    gsub = p.add_subparsers(dest="graph_command", required=True, metavar="read|search|open")
    for name in ("read", "search"):
        g = gsub.add_parser(name, parents=[common])
        if name == "search":
            g.add_argument("query")
        g.add_argument("--limit", type=int)
        g.add_argument("--offset", type=int, default=0)
        g.add_argument("--names-only", action="store_true")
    gsub.add_parser("open", parents=[common]).add_argument("names", nargs="+")
    add("status", "is the server running, and how big is the notebook", data.cmd_status)

    p = add("sync", "use the notebook on several machines: status, folder, s3, peer", cmd_sync)
    ssub = p.add_subparsers(dest="sync_command", required=True, metavar="status|folder|s3|peer")
    ssub.add_parser("status", parents=[common], help="this node, the others, each transport's last result")
    f = ssub.add_parser("folder", parents=[common], help="keep the log in a synced folder (Syncthing, Dropbox, ...)")
    f.add_argument("path", nargs="?", help="the synced folder (shards already there are kept: that is how to join)")
    f.add_argument("--default", action="store_true", help="move the log back into the data dir")
    s3 = ssub.add_parser("s3", parents=[common], help="sync through an S3-compatible bucket")
    s3.add_argument("bucket", nargs="?")
    s3.add_argument("--endpoint", help="endpoint URL for R2, MinIO, ... (default: AWS)")
    s3.add_argument("--prefix", help="key prefix in the bucket (default: hivenote)")
    s3.add_argument("--region")
    s3.add_argument("--off", action="store_true", help="stop syncing through the bucket")
    peer = ssub.add_parser("peer", parents=[common], help="pull from other Hivenote servers over HTTP")
    psub = peer.add_subparsers(dest="peer_command", required=True, metavar="add|remove|list")
    padd = psub.add_parser("add", parents=[common], help="add a peer by URL (a LAN, Tailscale or WireGuard address)")
    padd.add_argument("url")
    given = padd.add_mutually_exclusive_group()
    given.add_argument(
        "--token",
        help="the token both machines share (default: a new one, printed); other accounts can read a command line "
        "(ps): prefer --token-file",
    )
    given.add_argument("--token-file", help="read the shared token from this file, or from stdin with '-'")
    psub.add_parser("remove", parents=[common]).add_argument("url")
    psub.add_parser("list", parents=[common])
    if extend is not None:
        extend(add)
    return parser


def main(
    argv: Sequence[str] | None = None,
    *,
    out: TextIO | None = None,
    err: TextIO | None = None,
    extend: Callable[[AddCommand], None] | None = None,
    default: Callable[[Context], int] | None = None,
    doctor_checks: Sequence[DoctorCheck] = (),
) -> int:
    """Run one command. `default` runs when none is given (`hivenote status` here; the tray app in the launcher)."""
    out = out or sys.stdout
    err = err or sys.stderr
    parser = build_parser(extend)
    args = parser.parse_args(argv)
    ctx = Context(args, out, err)
    ctx.doctor_checks = tuple(doctor_checks)
    func: Callable[[Context], int] = getattr(args, "func", default or data.cmd_status)
    try:
        return func(ctx)
    except HivenoteError as exc:
        if ctx.json:
            err.write(json.dumps({"error": {"code": exc.code, "message": str(exc)}}, ensure_ascii=False) + "\n")
        else:
            err.write(f"hivenote: {exc}\n")
        return exc.exit_code  # core/errors.py's table
    except BrokenPipeError:  # `hivenote list | head`: the reader left; not an error
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
