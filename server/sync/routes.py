"""The `/sync` endpoints peers pull from (see peer.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.routing import BaseRoute

if TYPE_CHECKING:
    from ..app import Services


def sync_routes(services: Services) -> list[BaseRoute]:
    return []
