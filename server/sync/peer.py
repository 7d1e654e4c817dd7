"""Peer-to-peer sync over the servers' own HTTP."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

if TYPE_CHECKING:
    from ..app import Services


async def run(services: Services) -> None:
    await anyio.sleep_forever()
