"""The CLI's way to a running Hivenote: find it (the server records its URL in `<data dir>/server.json` while it
holds the shard lock) and make the notebook's writes through its REST API, so the CLI keeps working while the
server owns the data dir. Reads stay local: a read-only fold sees every acknowledged write."""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path
from typing import Any

import httpx2

from .. import __version__
from ..core.errors import HivenoteError, StoreError, error_for
from ..core.model import Note
from ..notebook import UNSET, Remembered
from ..storage import statefile
from ..storage.identity import lock_holder

log = logging.getLogger(__name__)

SERVER_FILE = "server.json"


def announce(data_dir: Path, url: str) -> None:
    """Written by the server once it answers: where to reach it."""
    path = data_dir / SERVER_FILE
    try:
        with statefile.locked(path):
            statefile.write_json(path, {"url": url, "pid": os.getpid()})
    except (OSError, HivenoteError) as exc:  # a full disk: the server still serves (read-only), say what is missing
        log.warning(
            "could not write %s (%s): commands find this server by its port only until it is written", path, exc
        )


def withdraw(data_dir: Path) -> None:
    """Removed by the server as it stops (only its own record)."""
    path = data_dir / SERVER_FILE
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
        record = statefile.read_json(data_dir / SERVER_FILE)
    except HivenoteError:
        return None
    return record if record is not None and record.get("pid") == holder and "url" in record else None


def running_server(data_dir: Path) -> str | None:
    """The URL of the Hivenote that holds this data dir's lock, or None when none does."""
    record = server_record(data_dir)
    return None if record is None else str(record["url"])


class RemoteNotebook:
    """The notebook's write calls, made on a running server over REST (the same code path as the dashboard)."""

    def __init__(self, url: str, token: str) -> None:
        self.http = httpx2.Client(
            base_url=url,
            headers={"Authorization": f"Bearer {token}", "X-Hivenote-Client": f"hivenote-cli/{__version__}"},
            timeout=60,
        )

    def close(self) -> None:
        self.http.close()

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = self.http.request(method, path, **kwargs)
        except httpx2.HTTPError as exc:
            raise StoreError(f"the running Hivenote at {self.http.base_url} did not answer ({exc})") from None
        if response.status_code >= 400:
            try:
                error = response.json()["error"]
            except (ValueError, KeyError, TypeError):
                raise HivenoteError(f"the running Hivenote answered {response.status_code}") from None
            raise error_for(error.get("code"))(error.get("message", "error"))
        return response.json()

    def status(self) -> dict[str, Any]:
        """GET /api/status: counts, nodes, shards and sync transports of the running server."""
        return dict(self._call("GET", "/api/status"))

    def remember(
        self, *, kind: str, title: str, body: str = "", tags: Any = (), project: str | None = None
    ) -> Remembered:
        doc = {"kind": kind, "title": title, "body": body, "tags": list(tags), "project": project}
        answer = self._call("POST", "/api/notes", json=doc)
        return Remembered(Note.from_json(answer["note"]), [Note.from_json(n) for n in answer["similar"]])

    def update(self, note_id: str, **fields: Any) -> Note:
        changes = {k: v for k, v in fields.items() if v is not UNSET}
        if changes.get("project") == "":
            changes["project"] = None
        return Note.from_json(self._call("PATCH", f"/api/notes/{note_id}", json=changes))

    def forget(self, note_id: str) -> Note:
        return Note.from_json(self._call("POST", f"/api/notes/{note_id}/trash"))

    def restore(self, note_id: str) -> Note:
        return Note.from_json(self._call("POST", f"/api/notes/{note_id}/restore"))

    def purge(self, note_id: str) -> str:
        return str(self._call("DELETE", f"/api/notes/{note_id}")["purged"])

    def import_file(self, content: bytes, fmt: str, skip_bad: bool) -> dict[str, Any]:
        params = {"format": fmt, "skip_bad": "true" if skip_bad else "false"}
        answer: dict[str, Any] = self._call("POST", "/api/import", params=params, content=content)
        return answer
