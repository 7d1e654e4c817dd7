"""What the server's routes and transports work with (`Services`), built once per app by web/app.py's
`create_app` and handed to REST, MCP, sync and the desktop's routes."""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..storage.layout import Layout
from ..sync.replica import Replicas
from ..sync.status import SyncStatus
from .session import SignIn

if TYPE_CHECKING:
    from ..agents import AgentTracker
    from ..graph import Graph
    from ..notebook import Notebook
    from ..settings import Settings
    from ..storage.store import Store
    from ..tokens import Tokens


@dataclass
class Services:
    """What the routes work with, built once per app."""

    settings: Settings
    store: Store
    notebook: Notebook
    graph: Graph
    tokens: Tokens
    tracker: AgentTracker
    sync: SyncStatus = field(default_factory=SyncStatus)
    desktop: bool = False  # served by the tray app, which adds the /desktop routes
    started: float = field(default_factory=time.monotonic)

    @functools.cached_property
    def sign_in(self) -> SignIn:
        """The dashboard's one-time codes and cookies (session.py); the guard checks cookies with the same one."""
        return SignIn(self.tokens)

    @functools.cached_property
    def replicas(self) -> Replicas:
        """The writer of other nodes' shard files (transports put what they fetch there); one per server, so
        every transport shares its per-shard locks."""
        return Replicas(  # follows the store to a new node id; spools in the data dir's cache, never the log folder
            self.store.log_dir, lambda: self.store.node, Layout(self.store.data_dir).cache
        )
