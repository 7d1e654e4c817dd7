"""What every command runs with (`Context`): the data dir, the output streams, and the notebook opened the way
the command needs it (the running server's, when one holds the data dir, or the store itself)."""

from __future__ import annotations

import argparse
import contextlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TextIO

from .. import __version__
from ..core.model import Author
from ..notebook import Notebook
from ..settings import load_settings, resolve_data_dir
from ..storage.layout import Layout
from ..storage.serverfile import running_server
from ..storage.store import Store
from .remote import RemoteNotebook

CLI_AUTHOR = Author(agent="cli", client=f"hivenote-cli {__version__}")  # the author of every op the CLI writes
LOCK_WAIT_S = 5.0  # another CLI command may hold the data dir for a moment


class Context:
    """What a command runs with: the data dir, output streams, and the store opened as the command needs."""

    def __init__(self, args: argparse.Namespace, out: TextIO, err: TextIO) -> None:
        self.args = args
        self.out = out
        self.err = err
        self.data_dir = resolve_data_dir(getattr(args, "data_dir", None))
        self.json = bool(getattr(args, "json", False))
        self.doctor_checks: tuple[DoctorCheck, ...] = ()

    def store(self, *, write: bool) -> Store:
        def log_dir() -> Path:  # asked again once the lock is held: `sync folder` may have moved it meanwhile
            return load_settings(data_dir=self.data_dir).log_path

        return Store(self.data_dir, readonly=not write, lock_timeout=LOCK_WAIT_S, log_dir=log_dir)  # opened by `with`

    @contextlib.contextmanager
    def notebook(self) -> Iterator[Notebook | RemoteNotebook]:
        """Where the notebook's writes go: the running server when one holds the data dir, else the store."""
        url = running_server(self.data_dir)
        if url is not None:
            from ..tokens import Tokens

            remote = RemoteNotebook(url, Tokens(Layout(self.data_dir).tokens).default())
            try:
                yield remote
            finally:
                remote.close()
            return
        with self.store(write=True) as store:
            yield Notebook(store, author=CLI_AUTHOR)

    def emit(self, value: Any, text: str) -> None:
        if self.json:
            json.dump(value, self.out, ensure_ascii=False, indent=2)
            self.out.write("\n")
        elif text:
            self.out.write(text + "\n")


AddCommand = Callable[[str, str, Callable[[Context], int]], argparse.ArgumentParser]
DoctorCheck = Callable[[Context], tuple[str, Any, list[str]]]  # -> (report key, JSON value, lines for people)
