"""Where a data dir keeps each of its files: every name in it spelled here once (docs/OPLOG.md describes them)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Layout:
    """The files and folders of the data dir `root`."""

    root: Path

    @property
    def tokens(self) -> Path:
        """The bearer tokens (tokens.py)."""
        return self.root / "tokens.json"

    @property
    def settings(self) -> Path:
        """settings.json: what `hivenote config`, the dashboard and the tray saved (settings.py is its one writer)."""
        return self.root / "settings.json"

    @property
    def node_record(self) -> Path:
        """node.json: this machine's node id and the ones it had before (identity.py)."""
        return self.root / "node.json"

    @property
    def log(self) -> Path:
        """The log folder when no `log_dir` setting moves it to a synced folder; the writer's lock stays here."""
        return self.root / "log"

    def lock(self, node: str) -> Path:
        """The OS lock the writer of `node`'s shard holds, with its pid in it."""
        return self.log / f"{node}.lock"

    @property
    def server_record(self) -> Path:
        """server.json: where the server holding the shard lock listens (serverfile.py)."""
        return self.root / "server.json"

    @property
    def peers(self) -> Path:
        """The peers this machine syncs with, and their tokens (peerbook.py)."""
        return self.root / "peers.json"

    @property
    def cache(self) -> Path:
        """Derived files, never synced, rebuilt when gone: the op cache, the search and meaning indexes, spools."""
        return self.root / "cache"

    @property
    def sync(self) -> Path:
        """The transports' own state: held copies of a synced folder's shards, the bucket's cursor."""
        return self.root / "sync"

    @property
    def rescued(self) -> Path:
        """Shards moved aside when their node was given up (never deleted)."""
        return self.root / "rescued"

    @property
    def serve_log(self) -> Path:
        """The log of a server `hivenote stdio` started in the background."""
        return self.root / "serve.log"
