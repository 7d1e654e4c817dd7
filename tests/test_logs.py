"""A Hivenote process logs its own way: building the MCP servers does not take over the process's logging."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

# Run apart: the test runner's own handlers on the root logger would make configure_logging step aside.
SCRIPT = textwrap.dedent(
    """
    import logging, sys
    from pathlib import Path
    from hivenote.server.logs import configure_logging
    from hivenote.server.settings import load_settings
    from hivenote.server.storage.store import Store
    from hivenote.server.web.app import create_app

    configure_logging()
    settings = load_settings({"host": "127.0.0.1", "port": 7788, "auth": False}, data_dir=Path(sys.argv[1]))
    with Store(settings.data_dir, log_dir=settings.log_path) as store:
        create_app(settings, store)  # builds both MCP servers: the SDK's basicConfig runs here
        print([type(h).__name__ for h in logging.getLogger().handlers])
        logging.getLogger("hivenote.server.storage.store").info("the disk has room again")
        logging.getLogger("mcp.server").info("an SDK detail")
        logging.getLogger("hivenote.server.web.app").warning("a warning of ours")
    """
)


@pytest.mark.system  # a Hivenote process (the server built in a child Python)
def test_the_server_logs_its_info_lines_and_the_sdk_does_not_take_over(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path)],
        capture_output=True,
        encoding="utf-8",
        timeout=120,
        check=False,
        env={**os.environ, "HIVENOTE_MEANING": "false"},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['StreamHandler']"  # ours, not the SDK's RichHandler
    lines = done.stderr.splitlines()
    assert any(line.endswith("INFO hivenote.server.storage.store: the disk has room again") for line in lines), lines
    assert any(line.endswith("WARNING hivenote.server.web.app: a warning of ours") for line in lines), lines
    assert not any("an SDK detail" in line for line in lines), lines  # other libraries: from WARNING up
