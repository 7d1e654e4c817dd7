"""`hivenote sync ...`: where the log travels. `status` asks the running server (transports run inside it) or
reads the data dir; `folder`, `s3` and `peer` set a transport up (they take effect when the server (re)starts)."""

from __future__ import annotations

import secrets
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.errors import InvalidInput
from ..core.hlc import wall_ms
from ..render import ago
from ..settings import load_settings, save_setting
from ..storage.layout import Layout
from ..storage.serverfile import running_server
from .remote import RemoteNotebook

if TYPE_CHECKING:
    from .context import Context


def _token_from_file(where: str) -> str:
    """The shared peer token from a file, or from stdin ('-'): unlike a command-line argument, no other account
    reads it in `ps`."""
    try:
        text = sys.stdin.read() if where == "-" else Path(where).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"cannot read the token from {where}: {exc}; give a file that holds it") from None
    token = text.strip()
    if not token:
        source = "stdin" if where == "-" else where
        raise InvalidInput(f"no token in {source}: paste the token the other machine printed, then Enter and Ctrl-D")
    return token


def cmd_sync(ctx: Context) -> int:
    command = ctx.args.sync_command
    if command == "status":
        return sync_status(ctx)
    if command == "folder":
        return sync_folder(ctx)
    if command == "s3":
        return sync_s3(ctx)
    return sync_peer(ctx)


def sync_status(ctx: Context) -> int:
    settings = load_settings(data_dir=ctx.data_dir)
    url = running_server(ctx.data_dir)
    report: dict[str, Any] = {
        "running": url is not None,
        "log_dir": str(settings.log_path),
        "s3": {"bucket": settings.s3_bucket, "endpoint": settings.s3_endpoint, "prefix": settings.s3_prefix}
        if settings.s3_bucket
        else None,
        "peers": _peers(ctx),
    }
    if url is not None:
        from ..tokens import Tokens

        remote = RemoteNotebook(url, Tokens(Layout(ctx.data_dir).tokens).default())
        try:
            status = remote.status()
        finally:
            remote.close()
        report |= {"node": status["node"], "nodes": status["nodes"], "transports": status["sync"]["transports"]}
    else:
        with ctx.store(write=False) as store:
            report |= {
                "node": store.node,
                "nodes": {n: {"ops": s.ops, "last_op": s.last_wall} for n, s in store.state.nodes.items()},
                "transports": [],
            }
    ctx.emit(report, _describe(report))
    return 0


def _describe(report: dict[str, Any]) -> str:
    now = wall_ms()
    lines = [f"log folder: {report['log_dir']}"]
    if report["s3"]:
        s3 = report["s3"]
        lines.append(f"bucket: {s3['bucket']}/{s3['prefix']}" + (f" at {s3['endpoint']}" if s3["endpoint"] else ""))
    lines += [f"peer: {p['url']}" + (" (learned)" if p.get("learned_from") else "") for p in report["peers"]]
    if not (report["s3"] or report["peers"]) and report["log_dir"].endswith("/log"):
        lines.append("No sync set up: `hivenote sync folder|s3|peer add` shares this notebook (see the README).")
    if not report["running"]:
        lines.append("The server is not running: transports run inside it, so nothing moves until it starts.")
    for t in report["transports"]:
        state = f"FAILING: {t['error']}" if t["failing"] else "ok"
        last = ago(t["last_ok"], now) if t["last_ok"] else "never"
        lines.append(f"{t['name']}: {state} (last success {last}; {t['bytes_in']} bytes in, {t['bytes_out']} out)")
    for node, s in sorted(report["nodes"].items(), key=lambda item: -item[1]["last_op"]):
        mine = " (this machine)" if node == report["node"] else ""
        lines.append(f"node {node}{mine}: {s['ops']} ops, last {ago(s['last_op'], now)}")
    return "\n".join(lines)


def _peers(ctx: Context) -> list[dict[str, Any]]:
    from ..sync.peer import list_peers

    return [p.public() for p in list_peers(ctx.data_dir)]


BACK = " Move the log back first: hivenote sync folder --default"
ONE_WAY = "Use one way to sync: a synced folder already carries every shard, so it cannot be combined with {other}."


def sync_folder(ctx: Context) -> int:
    from ..sync.folder import use_default_folder, use_folder

    a = ctx.args
    if a.default == bool(a.path):
        raise InvalidInput("give the synced folder's path, or --default to move the log back into the data dir")
    settings = load_settings(data_dir=ctx.data_dir)
    if a.path:
        if settings.s3_bucket or _peers(ctx):
            other = "peers (`hivenote sync peer remove`)"
            other = "a bucket (`hivenote sync s3 --off`)" if settings.s3_bucket else other
            raise InvalidInput(ONE_WAY.format(other=other) + " Turn that off first.")
        move = use_folder(ctx.data_dir, Path(a.path).expanduser())
    else:
        move = use_default_folder(ctx.data_dir)
    ctx.emit(move.to_json(), move.summary())
    return 0


def sync_s3(ctx: Context) -> int:
    a = ctx.args
    if a.off:
        save_setting(ctx.data_dir, "s3_bucket", None)
        ctx.emit({"bucket": None}, "Bucket sync is off (from the next start). Nothing in the bucket was deleted.")
        return 0
    if not a.bucket:
        raise InvalidInput("give the bucket's name (and --endpoint for R2, MinIO, ...), or --off")
    if load_settings(data_dir=ctx.data_dir).log_dir:
        raise InvalidInput(ONE_WAY.format(other="a bucket") + BACK)
    from ..sync.s3 import configure

    message = configure(ctx.data_dir, a.bucket, endpoint=a.endpoint, prefix=a.prefix, region=a.region)
    ctx.emit({"bucket": a.bucket, "endpoint": a.endpoint, "prefix": a.prefix}, message)
    return 0


def sync_peer(ctx: Context) -> int:
    from ..sync.peer import add_peer, remove_peer

    a = ctx.args
    if a.peer_command == "list":
        peers = _peers(ctx)
        lines = [
            f"{p['url']}"
            + (f" (learned from {p['learned_from']})" if p.get("learned_from") else "")
            + (f": {p['error']}" if p.get("error") else "")
            for p in peers
        ]
        ctx.emit(peers, "\n".join(lines) or "No peers. `hivenote sync peer add <url>` adds one.")
        return 0
    if a.peer_command == "remove":
        remove_peer(ctx.data_dir, a.url)
        ctx.emit({"removed": a.url}, f"Removed {a.url}; its token is still accepted until `hivenote token revoke`.")
        return 0
    settings = load_settings(data_dir=ctx.data_dir)
    if settings.log_dir:
        raise InvalidInput(ONE_WAY.format(other="peers") + BACK)
    given = _token_from_file(a.token_file) if a.token_file else a.token
    token = given or f"hn_peer_{secrets.token_urlsafe(24)}"
    peer = add_peer(ctx.data_dir, a.url, token)
    lines = [f"Added the peer {peer.url}. This machine pulls from it (and accepts the same token from it)."]
    if not given:
        lines.append(f"On {peer.url}'s machine, run:\n  hivenote sync peer add <this machine's URL> --token {token}")
        lines.append(
            "  (or, so that other accounts there cannot read it in `ps`: `... --token-file -` and paste the token)"
        )
    if settings.loopback:
        lines.append(
            f"This Hivenote listens on {settings.host} only: for the peer to pull from here too, turn on "
            "Share on LAN in the tray (or start it with --host 0.0.0.0)."
        )
    ctx.emit({"url": peer.url, "token": token}, "\n".join(lines))
    return 0
