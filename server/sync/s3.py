"""Sync through an S3-compatible bucket."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

if TYPE_CHECKING:
    from ..app import Services


async def run(services: Services) -> None:
    await anyio.sleep_forever()
