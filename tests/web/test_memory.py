"""The server's memory once start-up work is done: start-up garbage collected, not frozen with the notebook."""

from __future__ import annotations

import gc
import weakref

from hivenote.server.web.app import _settle_memory


class Cycle:
    def __init__(self) -> None:
        self.me = self


def test_settling_collects_start_up_garbage_instead_of_freezing_it_for_good() -> None:
    gc.disable()  # so only the settling can collect the cycle
    try:
        garbage = weakref.ref(Cycle())
        assert garbage() is not None
        _settle_memory()
        assert garbage() is None
        assert gc.get_freeze_count() > 0  # the survivors are frozen
    finally:
        gc.unfreeze()
        gc.enable()
