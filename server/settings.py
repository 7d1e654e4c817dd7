"""Where Hivenote keeps its data: `--data-dir` > `HIVENOTE_DATA_DIR` > the platform's user data folder."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import platformdirs


def default_data_dir() -> Path:
    return Path(platformdirs.user_data_dir("hivenote", appauthor=False))


def resolve_data_dir(flag: str | None, environ: Mapping[str, str] = os.environ) -> Path:
    if flag:
        return Path(flag).expanduser()
    env = environ.get("HIVENOTE_DATA_DIR")
    if env:
        return Path(env).expanduser()
    return default_data_dir()
