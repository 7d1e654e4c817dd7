"""Running a child where file permissions apply, even when the tests run as root (CI does), or as another account."""

from __future__ import annotations

import os
import shutil

from tests.support.system import needs, program


def without_root_powers() -> list[str]:
    """A command prefix under which root keeps uid 0 but loses DAC override, so read-only files and folders are
    read-only to it too ([] when not root)."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    assert setpriv, "setpriv is missing: apt-get install util-linux"
    return [setpriv, "--bounding-set=-dac_override,-dac_read_search", "--"]


@needs("root, to act as another account (setpriv --reuid)")
def as_nobody() -> list[str]:
    """A command prefix that runs the command as the account `nobody`: another user of this machine."""
    return [program("setpriv", "apt-get install util-linux"), "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
