"""A purge wins over a trash stamped ahead of it (issue 32, part 2: trash and restore carry no `since` the way an
edit does). A machine whose clock ran a day ahead trashed a note before another machine purged it in real time: its
line sorts after the purge, yet the note is gone on every machine, and once every machine compacted, no file of the
shared folder holds the note's text (a trash line names only the note's id). A restore stamped ahead wins the trash
register instead, so no machine can purge the note until real time passes it (OPLOG.md: a wrong clock decides)."""

from __future__ import annotations

from pathlib import Path

from hivenote.server.core.model import Author
from hivenote.server.notebook import Notebook
from tests.support.notes import machines_on_one_log

DAY_MS = 86_400_000
BY = Author(agent="cli")


def test_a_trash_stamped_a_day_ahead_does_not_outlive_a_purge(tmp_path: Path) -> None:
    with machines_on_one_log(tmp_path, 1_800_000_000_000) as (stores, now, skew):

        def act(i: int) -> Notebook:
            now[0] += 1_000
            for store in stores:
                store.refresh()
            return Notebook(stores[i], author=BY)

        note_id = act(0).remember(kind="fact", title="SECRET title", body="SECRET body").note.id
        skew[1] = DAY_MS
        act(1).forget(note_id)
        skew[1] = 0
        act(2).purge(note_id)
        other = act(1).remember(kind="fact", title="kept").note.id
        for i in range(3):
            act(i)
            stores[i].compact()
        for store in stores:
            store.refresh()
            assert store.state.note(note_id) is None
            assert {n.id for n in store.state.iter_notes()} == {other}
        for path in sorted((tmp_path / "log").iterdir()):
            if path.is_file():
                assert b"SECRET" not in path.read_bytes(), path.name
