"""Running a child where file permissions apply, even when the tests run as root (CI does)."""

from __future__ import annotations

import os
import shutil


def without_root_powers() -> list[str]:
    """A command prefix under which root keeps uid 0 but loses DAC override, so read-only files and folders are
    read-only to it too ([] when not root)."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    assert setpriv, "setpriv is missing: apt-get install util-linux"
    return [setpriv, "--bounding-set=-dac_override,-dac_read_search", "--"]
