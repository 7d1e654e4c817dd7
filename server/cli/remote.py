"""The CLI's way to a running Hivenote (found by storage/serverfile.py): the notebook's writes go through its REST
API, so the CLI keeps working while the server owns the data dir. Reads stay local: a read-only fold sees every
acknowledged write."""

from __future__ import annotations

import logging
from typing import Any

import httpx2

from .. import __version__
from ..core.errors import HivenoteError, StoreError, error_for
from ..core.model import Note
from ..notebook import UNSET, Remembered

log = logging.getLogger(__name__)


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
        self,
        *,
        kind: str,
        title: str,
        body: str = "",
        tags: Any = (),
        project: str | None = None,
        replaces: str | None = None,
    ) -> Remembered:
        doc = {"kind": kind, "title": title, "body": body, "tags": list(tags), "project": project}
        if replaces is not None:
            doc["replaces"] = replaces
        answer = self._call("POST", "/api/notes", json=doc)
        return Remembered(Note.from_json(answer["note"]), [Note.from_json(n) for n in answer["similar"]])

    def update(self, note_id: str, **fields: Any) -> Note:
        changes = {k: v for k, v in fields.items() if v is not UNSET}
        for name in ("project", "replaces"):
            if changes.get(name) == "":
                changes[name] = None
        return Note.from_json(self._call("PATCH", f"/api/notes/{note_id}", json=changes))

    def forget(self, note_id: str) -> Note:
        return Note.from_json(self._call("POST", f"/api/notes/{note_id}/trash"))

    def restore(self, note_id: str) -> Note:
        return Note.from_json(self._call("POST", f"/api/notes/{note_id}/restore"))

    def purge(self, note_id: str) -> str:
        return str(self._call("DELETE", f"/api/notes/{note_id}")["purged"])

    def import_file(self, content: bytes, fmt: str, skip_bad: bool, file: str = "") -> dict[str, Any]:
        params = {"format": fmt, "skip_bad": "true" if skip_bad else "false", "file": file}
        answer: dict[str, Any] = self._call("POST", "/api/import", params=params, content=content)
        return answer
