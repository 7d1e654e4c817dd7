"""Moving the log folder into a synced folder and back, on real files: every byte arrives before an original goes,
other machines' shards are kept (joining), clashes and bad folders are refused with nothing changed, and a server
started afterwards writes into the new folder and reads what is there."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hivenote.server.notebook import Notebook
from hivenote.server.settings import load_settings
from hivenote.server.storage.store import Store
from hivenote.server.sync.folder import FolderRefused, ServerRunning, use_default_folder, use_folder
from tests.support.privileges import without_root_powers
from tests.support.syncthing_hivenote import serving
from tests.support.wait import wait_until


def write(data_dir: Path, *titles: str, log_dir: Path | None = None) -> str:
    """Notes written by the install in `data_dir` (as the CLI would, into `log_dir` if given); its node id."""
    with Store(data_dir, log_dir=log_dir) as store:
        for title in titles:
            Notebook(store).remember(kind="fact", title=title)
        return store.node


def titles(data_dir: Path) -> set[str]:
    """What a fresh start of this install folds from the log folder its settings name."""
    with Store(data_dir, readonly=True, log_dir=load_settings(data_dir=data_dir).log_path) as store:
        return {note.title for note in store.state.iter_notes()}


def files(*folders: Path, skip: Path | None = None) -> dict[str, bytes]:
    """Every file and folder below `folders` (lock files aside: their content is the last holder's pid), but for
    `skip` and what it holds (never read: a running server writes and renames files there whenever it likes)."""
    found: dict[str, bytes] = {}
    for folder in folders:
        for path in sorted(folder.rglob("*")) if folder.exists() else []:
            if path.suffix != ".lock" and not (skip is not None and path.is_relative_to(skip)):
                found[str(path)] = b"<dir>" if path.is_dir() else path.read_bytes()
    return found


def lasting(data: Path) -> dict[str, bytes]:
    """`files` of a data dir without `cache/`: derived data a running server writes on its own schedule (the op
    cache, the search index once it is warm: a temp file there may be gone by the time it would be read),
    whatever else happens."""
    return files(data, skip=data / "cache")


def shard_files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.glob("*.jsonl"))}


def test_the_shards_move_into_the_folder_and_the_setting_names_it(tmp_path: Path) -> None:
    data = tmp_path / "data"
    node = write(data, "one", "two")
    other = write(tmp_path / "other", "from the other machine")
    log = data / "log"
    shutil.copy2(tmp_path / "other" / "log" / f"{other}.jsonl", log)  # a replica a peer or bucket brought
    (log / f"{other}.sync-conflict-20261130-101010-ABCDEFG.jsonl").write_bytes((log / f"{other}.jsonl").read_bytes())
    (log / ".half-written.jsonl.tmp").write_bytes(b"{")
    before = shard_files(log)
    mtimes = {name: (log / name).stat().st_mtime_ns for name in before}
    target = tmp_path / "Sync" / "hivenote"  # neither exists yet

    move = use_folder(data, target)

    assert move.moved == tuple(sorted(before)) and move.node == node
    assert (move.kept, move.set_aside, move.found, move.left) == ((), (), (), ())
    assert shard_files(target) == before and sorted(os.listdir(target)) == sorted(before)  # no temp files left
    assert {name: (target / name).stat().st_mtime_ns for name in before} == mtimes  # copies don't look newer
    assert shard_files(log) == {}  # the originals went only after the copies were verified and the setting saved
    assert (log / f"{node}.lock").exists() and (log / ".half-written.jsonl.tmp").exists()
    assert json.loads((data / "settings.json").read_text(encoding="utf-8"))["log_dir"] == str(target.resolve())
    assert load_settings(data_dir=data).log_path == target.resolve()
    assert titles(data) == {"one", "two", "from the other machine"}
    assert "were removed" in move.summary() and move.to_json()["moved"] == sorted(before)
    write(data, "three", log_dir=target)  # the writer goes on where it was: seq continues, nothing restarts
    assert [json.loads(line)["seq"] for line in (target / f"{node}.jsonl").read_bytes().splitlines()] == [1, 2, 3]


def test_joining_a_folder_keeps_the_shards_of_the_machines_already_there(tmp_path: Path) -> None:
    data, target = tmp_path / "data", tmp_path / "Sync"
    b = write(tmp_path / "b", "b1")
    node = write(data, "mine")
    shutil.copy2(tmp_path / "b" / "log" / f"{b}.jsonl", data / "log")  # an older replica of b
    write(tmp_path / "b", "b2")
    c = write(tmp_path / "c", "c1")
    target.mkdir()
    (target / ".stfolder").mkdir()
    (target / f".syncthing.{c}.jsonl.tmp").write_bytes(b"partial")
    for machine, name in ((tmp_path / "b", b), (tmp_path / "c", c)):
        shutil.copy2(machine / "log" / f"{name}.jsonl", target)
    theirs = files(target)

    move = use_folder(data, target)

    assert move.moved == (f"{node}.jsonl",) and move.kept == (f"{b}.jsonl",) and move.found == (f"{c}.jsonl",)
    assert {k: v for k, v in files(target).items() if node not in k} == theirs  # nothing of theirs was touched
    assert titles(data) == {"mine", "b1", "b2", "c1"}
    assert shard_files(data / "log") == {}


def test_a_copy_of_another_machines_shard_with_more_in_it_is_kept_beside_theirs(tmp_path: Path) -> None:
    data, target = tmp_path / "data", tmp_path / "Sync"
    b = write(tmp_path / "b", "b1")
    target.mkdir()
    shutil.copy2(tmp_path / "b" / "log" / f"{b}.jsonl", target)  # the folder has b's first op only
    write(tmp_path / "b", "b2")
    node = write(data, "mine")
    ours = (tmp_path / "b" / "log" / f"{b}.jsonl").read_bytes()
    (data / "log" / f"{b}.jsonl").write_bytes(ours)  # we have both (a peer brought them)
    theirs = (target / f"{b}.jsonl").read_bytes()

    move = use_folder(data, target)

    aside = f"{b}.copy-from-{node}.jsonl"
    assert move.set_aside == ((f"{b}.jsonl", aside),) and aside in move.summary()
    assert (target / f"{b}.jsonl").read_bytes() == theirs  # another machine's shard is never rewritten
    assert (target / aside).read_bytes() == ours  # and nothing we had is lost: the fold reads the copy too
    assert titles(data) == {"mine", "b1", "b2"}


def test_a_copied_data_dir_joins_the_folder_as_a_node_of_its_own_and_nothing_clashes(tmp_path: Path) -> None:
    """A copied data dir on the same machine cannot prove it wrote the shard it holds: it writes as a new node, so
    both installs move into one synced folder and every note of both survives (it used to clash on one node id)."""
    data, twin, target = tmp_path / "data", tmp_path / "twin", tmp_path / "Sync"
    node = write(data, "mine")
    shutil.copytree(data, twin)
    twin_node = write(twin, "the twin's")
    assert twin_node != node
    assert {f"{node}.jsonl", f"{twin_node}.jsonl"} <= set(use_folder(twin, target).moved)  # and a branch of node
    write(data, "mine again")
    use_folder(data, target)  # our shard there is an older copy of ours (the twin's copy): brought up to date
    assert titles(data) == titles(twin) == {"mine", "the twin's", "mine again"}


def test_a_data_dir_without_its_shard_is_refused_where_the_folder_has_one(tmp_path: Path) -> None:
    data, target = tmp_path / "data", tmp_path / "Sync"
    node = write(data)  # an install that never wrote
    target.mkdir()
    (target / f"{node}.jsonl").write_bytes(b'{"node":"someone else"}\n')
    before = files(data, target)
    with pytest.raises(FolderRefused, match="different shard for this machine's node id"):
        use_folder(data, target)
    assert files(data, target) == before


def test_moving_back_copies_everything_home_and_deletes_nothing_in_the_synced_folder(tmp_path: Path) -> None:
    data, target = tmp_path / "data", tmp_path / "Sync"
    b = write(tmp_path / "b", "b1")
    target.mkdir()
    shutil.copy2(tmp_path / "b" / "log" / f"{b}.jsonl", target)
    node = write(data, "mine")
    use_folder(data, target)
    write(data, "written in the synced folder", log_dir=target)
    synced = files(target)

    back = use_default_folder(data)

    assert back.moved == back.left == tuple(sorted([f"{b}.jsonl", f"{node}.jsonl"]))
    assert files(target) == synced  # a deletion there would delete on every machine syncing it
    assert shard_files(data / "log") == shard_files(target)
    assert "log_dir" not in json.loads((data / "settings.json").read_text(encoding="utf-8"))
    assert load_settings(data_dir=data).log_path == data / "log" and "stay in" in back.summary()
    assert titles(data) == {"mine", "written in the synced folder", "b1"}

    # Back again after writing at home: the folder's copy of our shard is older than ours, so it is brought up to date.
    write(data, "written at home")
    again = use_folder(data, target)
    assert again.moved == (f"{node}.jsonl",) and again.kept == (f"{b}.jsonl",)
    assert titles(data) == {"mine", "written in the synced folder", "written at home", "b1"}
    assert shard_files(data / "log") == {}


def test_using_the_folder_already_in_use_moves_nothing(tmp_path: Path) -> None:
    data, target = tmp_path / "data", tmp_path / "Sync"
    write(data, "mine")
    use_folder(data, target)
    before = files(data, target)
    again = use_folder(data, target)
    assert (again.moved, again.kept, again.left) == ((), (), ()) and "already" in again.summary()
    assert files(data, target) == before


@pytest.mark.parametrize(
    ("where", "reason"),
    [
        ("data", "inside the data dir"),
        ("data/log", "inside the data dir"),
        ("data/shared", "inside the data dir"),
        (".", "would copy tokens and settings"),
        ("a-file", "is a file"),
        ("a-file/log", "cannot be created: .* is a file"),
    ],
)
def test_a_folder_that_cannot_hold_the_log_is_refused_and_nothing_changes(
    tmp_path: Path, where: str, reason: str
) -> None:
    data = tmp_path / "data"
    write(data, "mine")
    (tmp_path / "a-file").write_bytes(b"not a folder")
    before = files(tmp_path)
    with pytest.raises(FolderRefused, match=reason):
        use_folder(data, tmp_path / where)
    assert files(tmp_path) == before


def test_the_environment_overriding_the_setting_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "data"
    write(data, "mine")
    with pytest.raises(FolderRefused, match="HIVENOTE_LOG_DIR"):
        use_folder(data, tmp_path / "Sync", environ={"HIVENOTE_LOG_DIR": str(tmp_path / "elsewhere")})
    assert not (tmp_path / "Sync").exists()


CHILD = """
import json, sys
from pathlib import Path
from hivenote.server.sync.folder import use_folder
try:
    use_folder(Path(sys.argv[1]), Path(sys.argv[2]))
except Exception as exc:
    print(json.dumps({"error": type(exc).__name__, "message": str(exc)}))
else:
    print(json.dumps({"error": None}))
"""


def use_folder_without_root_powers(data_dir: Path, target: Path) -> dict[str, Any]:
    """use_folder in a child that file permissions apply to (root keeps uid 0 but loses DAC override)."""
    prefix = without_root_powers()
    done = subprocess.run(
        [*prefix, sys.executable, "-c", CHILD, str(data_dir), str(target)],
        capture_output=True,
        text=True,
        encoding="utf-8",
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


@pytest.mark.parametrize(("where", "reason"), [("locked", "cannot write to"), ("locked/sub/log", "cannot create")])
def test_a_folder_without_write_permission_is_refused_and_nothing_changes(
    tmp_path: Path, where: str, reason: str
) -> None:
    data, locked = tmp_path / "data", tmp_path / "locked"
    write(data, "mine")
    locked.mkdir()
    locked.chmod(0o555)
    before = files(tmp_path)
    try:
        result = use_folder_without_root_powers(data, tmp_path / where)
    finally:
        locked.chmod(0o755)
    assert result["error"] == "FolderRefused" and reason in result["message"], result
    assert "Permission denied" in result["message"]
    assert files(tmp_path) == before and titles(data) == {"mine"}


def test_when_the_setting_cannot_be_saved_the_copies_are_taken_back_and_the_originals_stay(tmp_path: Path) -> None:
    data, target = tmp_path / "data", tmp_path / "Sync" / "hivenote"
    write(data, "mine")
    before = files(tmp_path)
    data.chmod(0o555)  # settings.json cannot be written; log/ (the lock, the shards) still can
    try:
        result = use_folder_without_root_powers(data, target)
    finally:
        data.chmod(0o755)
    assert result["error"] == "InvalidInput" and "cannot save" in result["message"], result
    assert files(tmp_path) == before and titles(data) == {"mine"}  # the folders it made are gone too


def test_a_running_server_keeps_the_log_where_it_is(tmp_path: Path) -> None:
    data, target = tmp_path / "data", tmp_path / "Sync"
    write(data, "mine")
    with serving(data) as [server]:
        before = lasting(data)
        with pytest.raises(ServerRunning) as refused:
            use_folder(data, target)
        message = str(refused.value)
        assert refused.value.pid == server.process.pid
        assert '"Stop server" in the tray' in message and "`hivenote serve`" in message
        assert lasting(data) == before and not target.exists()
        with pytest.raises(ServerRunning):
            use_default_folder(data)


def test_a_server_started_after_the_move_writes_into_the_folder_and_follows_it(tmp_path: Path) -> None:
    data, target = tmp_path / "data", tmp_path / "Sync"
    node = write(data, "mine")
    b = write(tmp_path / "b", "b1")
    target.mkdir()
    shutil.copy2(tmp_path / "b" / "log" / f"{b}.jsonl", target)
    use_folder(data, target)
    with serving(data) as [server]:
        listed = server.call("GET", "/api/notes?limit=50")["results"]
        assert {n["title"] for n in listed} == {"mine", "b1"}
        made = server.call("POST", "/api/notes", {"kind": "fact", "title": "served"})["note"]
        assert made["id"].encode() in (target / f"{node}.jsonl").read_bytes()
        assert shard_files(data / "log") == {}

        # Another machine's shard appearing the way sync tools deliver (temp file, then rename): seen in ~1 s.
        c = write(tmp_path / "c", "c1")
        tmp = target / f".syncthing.{c}.jsonl.tmp"
        shutil.copyfile(tmp_path / "c" / "log" / f"{c}.jsonl", tmp)
        tmp.rename(target / f"{c}.jsonl")
        wait_until(
            lambda: "c1" in {n["title"] for n in server.call("GET", "/api/notes?limit=50")["results"]},
            5,
            "the new shard folded",
        )


def test_a_file_planted_at_the_old_predictable_temp_name_neither_stops_the_move_nor_is_written(tmp_path: Path) -> None:
    """Temp files have random names, made exclusively (a name someone can guess could block the move, or, without
    O_EXCL, be a link the copy writes through)."""
    data, target = tmp_path / "data", tmp_path / "Sync"
    node = write(data, "mine")
    target.mkdir()
    victim = tmp_path / "victim"
    victim.write_bytes(b"untouched")
    planted = target / f".{node}.jsonl.{os.getpid()}.hivenote.tmp"
    planted.symlink_to(victim)
    use_folder(data, target)
    assert victim.read_bytes() == b"untouched" and planted.is_symlink()
    assert titles(data) == {"mine"}
    assert (data / "log").stat().st_mode & 0o777 == 0o700
