"""Starting the configured transports inside the server's lifespan."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import anyio

if TYPE_CHECKING:
    from ..web.services import Services
    from .held import HeldCopies

log = logging.getLogger(__name__)

# A synced folder already carries every shard. If a bucket or a peer also wrote other nodes' shards into it, the
# sync tool would see them changed here and copy them back over their owners' live files.
NOT_WITH_A_SYNCED_FOLDER = (
    "off while the log lives in a synced folder ({folder}): that folder already carries every shard, and two tools "
    "writing the same files would overwrite their owners' copies. Use one way to sync (`hivenote sync status`)."
)


INTEGRITY_CHECK_S = 1.0
FOLDER_CHECK_S = 5.0  # settings.extra["folder_check_s"]
HELD_CHECK_S = 1.0  # the shards of a synced folder against the copies held (a listing and a stat while unchanged)


async def watch_folder(services: Services) -> None:
    """The synced folder's health (folderwatch.py) as the folder transport's status, and the copies this machine
    holds of its shards (held.py: what vanished or shrank there is put back), until cancelled."""
    from .folderwatch import QUIET_MS, FolderWatch
    from .held import HeldCopies

    settings, store = services.settings, services.store
    quiet = int(float(settings.extra.get("folder_quiet_s", QUIET_MS / 1000)) * 1000)
    every = float(settings.extra.get("folder_check_s", FOLDER_CHECK_S))
    watch = FolderWatch(settings.log_path, lambda: store.node, quiet_ms=quiet)
    held = HeldCopies(settings.log_path, settings.data_dir, lambda: store.node)
    target = str(settings.log_path)
    checked = -every
    try:
        while True:
            await anyio.to_thread.run_sync(hold, held)
            if anyio.current_time() - checked >= every:
                checked = anyio.current_time()
                health = await anyio.to_thread.run_sync(watch.step)
                for node, offset in watch.offsets.items():  # the other machines' clocks, by their receipts
                    store.clock.note_offset(f"machine {node}", offset)
                detail = health.detail | {"put_back": list(held.done)}
                if health.failing:
                    services.sync.failed("folder", health.message, kind="folder", target=target, **detail)
                else:
                    services.sync.ok("folder", kind="folder", target=target, **detail)
            await anyio.sleep(HELD_CHECK_S)
    finally:
        for node in watch.offsets:  # the folder's machines, no longer read, measure this clock no more
            store.clock.forget_offset(f"machine {node}")
        with anyio.CancelScope(shield=True):  # the last lines this machine wrote, held before it stops
            await anyio.to_thread.run_sync(hold, held)


def hold(held: HeldCopies) -> None:
    try:
        held.step()
    except OSError as exc:  # the data dir's sync/held cannot be written: said, and tried again
        log.error("the copies this machine holds of the synced folder's shards cannot be kept: %s", exc)


async def report_integrity(services: Services) -> None:
    """What happened to this install's identity and to the log's histories, as a sync status entry (`sync status`,
    the dashboard's settings, the tray's attention state): node-id changes and forks found, until cancelled."""
    store, shown, clock_said = services.store, ("", 0), ""
    while True:
        with store.reading() as state:
            forks = [fork.to_json() for fork in state.forks.values()]
        latest = store.incidents[-1] if store.incidents else None
        seen = (store.node, len(forks) + len(store.incidents))
        if seen != shown and (forks or latest):
            parts = [latest.message] if latest else []
            parts += [
                f"two histories of {f['node']} from seq {f['first_seq']} ({f['positions']} positions): both are kept"
                for f in forks
            ]
            services.sync.failed("integrity", "; ".join(parts), kind="log", target=store.node, forks=forks)
            shown = seen
        clock_said = report_clock(services, clock_said)
        await anyio.sleep(INTEGRITY_CHECK_S)


def report_clock(services: Services, said: str) -> str:
    """This machine's own clock skew, said on this machine: measured against the peers' and the bucket's clocks
    (HTTP Date) and the synced folder's other machines (their receipts), or seen in its own log (it wrote stamps
    further ahead than its clock is now). Returns what is said."""
    clock, store = services.store.clock, services.store
    skew, lead = clock.own_skew_ms(), clock.wall - clock.now()
    fix = "Set this machine's clock right (turn on network time: `timedatectl set-ntp true`, or the OS's date settings)"
    if skew:
        sources = sorted(clock.offsets)
        side = "ahead of" if skew > 0 else "behind"
        effect = "win over" if skew > 0 else "lose to"
        if len(sources) == 1 and sources[0] != "bucket":  # two clocks that differ: either may be the wrong one
            other = sources[0].removeprefix("peer ").removeprefix("machine ")
            message = (
                f"this machine's clock is {abs(skew) // 1000} s {side} {other}'s: one of the two is wrong. While it "
                f"lasts, the machine whose clock is ahead wins every edit made meanwhile on the other. {fix} on the "
                "wrong one"
            )
        else:
            message = (
                f"this machine's clock is {abs(skew) // 1000} s {side} the others' (measured against "
                f"{', '.join(sources)}): its edits {effect} edits made meanwhile elsewhere, whichever came last. {fix}"
            )
    elif lead > clock.max_offset_ms:
        message = (
            f"this machine wrote stamps {lead // 1000} s ahead of its clock now (its clock was ahead then, or is "
            f"behind now): until then its edits keep winning over edits made elsewhere. {fix}"
        )
    else:
        message = ""
    if message and message != said:
        services.sync.failed("clock", message, kind="clock", target=store.node, skew_ms=skew or lead)
    elif said and not message:
        services.sync.ok("clock", kind="clock", target=store.node, skew_ms=0)
    return message


async def run_transports(services: Services) -> None:
    """Every configured transport, until cancelled. Each one reports to services.sync and never raises for a
    network or storage problem (it reports it and retries)."""
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(report_integrity, services)
        await _run_transports(services)


async def _run_transports(services: Services) -> None:
    settings = services.settings
    if settings.log_dir:
        services.sync.ok("folder", kind="folder", target=str(settings.log_path))
        refusal = NOT_WITH_A_SYNCED_FOLDER.format(folder=settings.log_path)
        if settings.s3_bucket:
            services.sync.failed("s3", f"bucket sync is {refusal}", kind="s3", target=settings.s3_bucket)
        from .peerbook import list_peers

        for peer in list_peers(settings.data_dir):
            services.sync.failed(f"peer {peer.url}", f"peer sync is {refusal}", kind="peer", target=peer.url)
        await watch_folder(services)
        return
    async with anyio.create_task_group() as tasks:
        if settings.s3_bucket:
            from .s3 import run as run_s3

            tasks.start_soon(run_s3, services)
        from .peer import run as run_peer  # idles while no peer is configured

        tasks.start_soon(run_peer, services)
