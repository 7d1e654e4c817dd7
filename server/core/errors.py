"""The errors a user or agent can cause, each saying what happened and what to do next.

    HivenoteError                 (code)
     ├─ InvalidInput              invalid      bad field value, limit exceeded, file path as project, ...
     ├─ Forbidden                 forbidden    a person's token asking for what only the owner may do
     ├─ NotFound                  not_found
     │   ├─ NoteNotFound
     │   └─ EntityNotFound        (the official memory server's exact message)
     ├─ ImportRejected            invalid      a bad line in an imported file (with its line number)
     └─ StoreError                store
         ├─ ShardLocked                        another process writes this data dir
         ├─ ReadOnlyStore                      a write on a store opened for reading
         └─ StoreWriteFailed                   the disk refused a write (nothing was acknowledged)

REST maps `code` to a status in one place; MCP tools turn the message into a tool error; the CLI prints it
and exits non-zero.
"""

from __future__ import annotations

from pathlib import Path


class HivenoteError(Exception):
    code = "error"


class InvalidInput(HivenoteError, ValueError):
    code = "invalid"


class Forbidden(HivenoteError, PermissionError):
    code = "forbidden"


class NotFound(HivenoteError, LookupError):
    code = "not_found"


class NoteNotFound(NotFound):
    def __init__(self, note_id: str, hint: str = "") -> None:
        self.note_id = note_id
        super().__init__(f"No note with id {note_id!r}. {hint or 'Search or list notes to find the right id.'}".strip())


class EntityNotFound(NotFound):
    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"Entity with name {name} not found")


class ImportRejected(InvalidInput):
    def __init__(self, line: int, reason: str, *, unit: str = "line") -> None:
        self.line = line  # the line of a memory.jsonl, or the number of the note/entity/relation in an export
        self.reason = reason
        super().__init__(
            f"{unit} {line}: {reason}. Nothing was imported; fix it or pass --skip-bad to import the rest."
        )


class StoreError(HivenoteError):
    """Base of everything the store raises on purpose."""

    code = "store"


class ShardLocked(StoreError):
    """Another process already writes this data dir's shard."""

    def __init__(self, data_dir: Path, pid: int | None) -> None:
        self.pid = pid
        who = f"pid {pid}" if pid else "pid unknown"
        super().__init__(
            f"Hivenote is already running for this data dir ({who}): {data_dir}. "
            "Use that instance, stop it first, or pass a different --data-dir."
        )


class ReadOnlyStore(StoreError):
    """A write was attempted on a store opened read-only."""


class StoreWriteFailed(StoreError):
    """Writing the log failed (disk full, read-only file system, folder gone); nothing was acknowledged."""
