"""The errors a user or agent can cause, each saying what happened and what to do next.

This module is the one error table: each family's `code` (REST's `error.code`), HTTP `status` and command-line
`exit_code` are attributes of its class; REST, the CLI, the REST client and the tray read them from here.

    HivenoteError                 code          status exit
     ├─ InvalidInput              invalid       400    1   bad field value, limit exceeded, file path as project
     │   ├─ ImportRejected                                 a bad line in an imported file (with its line number)
     │   ├─ InvalidJson           invalid_json             a request body that is not JSON (web/rest_schema.py)
     │   ├─ StateFileCorrupt                               a state file that does not parse (storage/statefile.py)
     │   └─ FolderRefused                                  a sync folder that cannot hold the log (sync/folder.py)
     ├─ Forbidden                 forbidden     403    1   a person's token asking for what only the owner may do
     ├─ NotFound                  not_found     404    3
     │   ├─ NoteNotFound
     │   └─ EntityNotFound                                 (the official memory server's exact message)
     ├─ StoreError                store         503    5
     │   ├─ ShardLocked                                4   another process writes this data dir
     │   │   └─ ServerRunning                              ... and it is a running server (sync/folder.py)
     │   ├─ ReadOnlyStore                                  a write on a store opened for reading
     │   ├─ StoreWriteFailed                               the disk refused a write (nothing was acknowledged)
     │   ├─ StateFileUnwritable                            a state file the disk refused (storage/statefile.py)
     │   └─ StateFileBusy                                  a state file locked by a stuck process (storage/statefile.py)
     ├─ PortInUse                 port_in_use              (web/serve.py)
     ├─ ServerDied                server_died              (web/serve.py)
     ├─ Unreachable               unavailable              no server answers (mcp/stdio.py)
     │   └─ NotOurServer                                   a port answered by something else (mcp/stdio.py)
     ├─ SyncRefused               sync_refused             a peer's bytes that are not a continuation (sync/replica.py)
     ├─ BucketError               sync_s3                  (sync/bucket.py)
     │   ├─ BucketConflict
     │   ├─ BucketUnreachable
     │   └─ BadObject
     └─ desktop/: InstanceUnreachable (instance), ClipboardUnavailable (clipboard), AutostartFailed (autostart),
        MenuEntryFailed (menu_entry), MenuEntryUnsupported (unsupported)

A subclass inherits its family's status and exit code unless the table shows its own. MCP tools turn the message
into a tool error. tests/test_architecture.py checks that every subclass in the code appears in this tree.
"""

from __future__ import annotations

from pathlib import Path


class HivenoteError(Exception):
    code = "error"  # REST's error.code
    status = 400  # REST's HTTP status
    exit_code = 1  # the command line's exit status (README "Exit codes")


class InvalidInput(HivenoteError, ValueError):
    code = "invalid"


class Forbidden(HivenoteError, PermissionError):
    code = "forbidden"
    status = 403


class NotFound(HivenoteError, LookupError):
    code = "not_found"
    status = 404
    exit_code = 3


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
    status = 503
    exit_code = 5


class ShardLocked(StoreError):
    """Another process already writes this data dir's shard."""

    exit_code = 4

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


FAMILIES: tuple[type[HivenoteError], ...] = (InvalidInput, Forbidden, NotFound, StoreError)


def error_for(code: str | None) -> type[HivenoteError]:
    """The family a REST `error.code` names (the REST client raises it again on this side)."""
    if code == "invalid_json":
        return InvalidInput
    return next((family for family in FAMILIES if family.code == code), HivenoteError)
