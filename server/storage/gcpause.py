"""Building many long-lived objects at once (a fold, the op cache) without the cyclic collector's passes: each
pass walks the whole growing heap and costs more than the building itself, so it waits until the work is done."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def collector_paused(when: bool = True) -> Iterator[None]:
    """Hold generational collection for the block (if `when`, and if it is on at all); restored after."""
    pause = when and gc.isenabled()
    if pause:
        gc.disable()
    try:
        yield
    finally:
        if pause:
            gc.enable()
