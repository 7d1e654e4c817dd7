"""Who is writing: the author of the ops the current request or command emits.

Set once per request by the server (from MCP clientInfo, User-Agent and token owner) or by the CLI, and read
by the notebook and graph use-cases, so provenance never travels through tool arguments.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

from .core.model import Author

DEFAULT_AUTHOR = Author(agent="cli", client="hivenote")
current_author: ContextVar[Author] = ContextVar("current_author", default=DEFAULT_AUTHOR)


@contextlib.contextmanager
def acting_as(author: Author) -> Iterator[Author]:
    token = current_author.set(author)
    try:
        yield author
    finally:
        current_author.reset(token)
