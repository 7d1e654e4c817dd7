"""Starting the configured transports inside the server's lifespan."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

if TYPE_CHECKING:
    from ..app import Services


async def run_transports(services: Services) -> None:
    """Every configured transport, until cancelled. Each one reports to services.sync and never raises for a
    network or storage problem (it reports it and retries)."""
    settings = services.settings
    async with anyio.create_task_group() as tasks:
        if settings.s3_bucket:
            from .s3 import run as run_s3

            tasks.start_soon(run_s3, services)
        from .peer import run as run_peer  # idles while no peer is configured

        tasks.start_soon(run_peer, services)
