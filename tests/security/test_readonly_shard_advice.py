"""A read-only own shard (issue 33 item 8): the advice is to give this account write permission back (chmod u+w),
not to take ownership of what it already owns (chown)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from hivenote.server.storage.store import Store
from tests.support.privileges import without_root_powers

OPEN_AS_WRITER = """
import sys
from pathlib import Path
from hivenote.server.core.errors import StoreError
from hivenote.server.storage.store import Store
try:
    Store(Path(sys.argv[1])).open().close()
except StoreError as exc:
    print(exc)
"""


def test_a_read_only_own_shard_is_answered_with_chmod_not_chown(tmp_path: Path) -> None:
    with Store(tmp_path) as store:
        shard = store.shard_path
    assert shard is not None and shard.exists()
    shard.chmod(0o400)  # this account's own file, made read-only
    argv = [*without_root_powers(), sys.executable, "-c", OPEN_AS_WRITER, str(tmp_path)]
    said = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True).stdout
    assert f"chmod u+w {shard}" in said, said
    assert "chown" not in said, said
