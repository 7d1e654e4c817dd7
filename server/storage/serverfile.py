"""`<data dir>/server.json`: where the Hivenote that holds the data dir's shard lock listens. The server writes it
once it answers and removes it as it stops; the CLI, the stdio bridge and the tray read it to reach that server
instead of opening the store themselves."""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path
from typing import Any

from ..core.errors import HivenoteError
from . import statefile
from .identity import lock_holder
from .layout import Layout

log = logging.getLogger(__name__)


def announce(data_dir: Path, url: str, handoff: Path | None = None) -> None:
    """Written by the server once it answers: where to reach it (and where `hivenote stdio` hands it sessions)."""
    path = Layout(data_dir).server_record
    record: dict[str, Any] = {"url": url, "pid": os.getpid()}
    if handoff is not None:
        record["handoff"] = str(handoff)
    try:
        with statefile.locked(path):
            statefile.write_json(path, record)
    except (OSError, HivenoteError) as exc:  # a full disk: the server still serves (read-only), say what is missing
        log.warning(
            "could not write %s (%s): commands find this server by its port only until it is written", path, exc
        )


def withdraw(data_dir: Path) -> None:
    """Removed by the server as it stops (only its own record)."""
    path = Layout(data_dir).server_record
    with contextlib.suppress(HivenoteError, OSError), statefile.locked(path):
        record = statefile.read_json(path)
        if record is not None and record.get("pid") == os.getpid():
            path.unlink()


def server_record(data_dir: Path) -> dict[str, Any] | None:
    """What the Hivenote holding this data dir's lock says about itself in server.json, or None when none runs."""
    holder = lock_holder(data_dir)
    if not holder:
        return None
    try:
        record = statefile.read_json(Layout(data_dir).server_record)
    except HivenoteError:
        return None
    return record if record is not None and record.get("pid") == holder and "url" in record else None


def running_server(data_dir: Path) -> str | None:
    """The URL of the Hivenote that holds this data dir's lock, or None when none does."""
    record = server_record(data_dir)
    return None if record is None else str(record["url"])
