"""A purge is the end of that note everywhere, whatever the stamps (issue: an edit stamped a day ahead, by a machine
that ran with a wrong clock once, sorted after a purge made later in real time by a machine whose clock was right, so
compaction kept it, and the purged text stayed in a shard on every machine).

The law, over real stores on real files: three machines share one log folder (a synced folder that carries every
line at once), each with its own wall clock, ahead, behind or right, changed at any step. Whatever they write to a
note before it is purged, and however their clocks ran, once the purge is in and every machine compacted its own
shard, none of that text is in any file of the folder, and no machine lists the note."""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hivenote.server.core.model import Author
from hivenote.server.notebook import Notebook
from hivenote.server.transfer import ImportSummary, export_notebook, import_notes, parse_notebook
from tests.support.notes import machines_on_one_log

DAY_MS = 86_400_000
START_MS = 1_800_000_000_000
BY = Author(agent="cli")

# A clock ahead by any amount; behind, by less than the largest offset a clock follows (an hour): a machine further
# behind cannot trash a note restored since by its own clock's reckoning, so it never gets to purge it.
skews = st.sampled_from((0, 0, DAY_MS, 2 * 3_600_000, -30 * 60_000))


@dataclass(frozen=True)
class Step:
    actor: int  # which machine acts
    skew: int  # how far its wall clock is off from now on (ms; a clock set right again is 0)
    action: str  # "edit", or "other" (a note that is never purged)


# Trash and restore are the purger's alone here: the trash register follows the stamps, so after a trash or restore
# by a clock ahead no machine whose clock is right can trash the note (and so purge it) until real time passes that
# stamp (docs/OPLOG.md: a wrong clock decides).
steps = st.builds(Step, st.integers(0, 2), skews, st.sampled_from(("edit", "edit", "other")))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    creator=st.integers(0, 2),
    creator_skew=skews,
    before=st.lists(steps, max_size=8),
    purger=st.integers(0, 2),
    purger_skew=skews,
    compaction_order=st.permutations((0, 1, 2)),
)
def test_after_a_purge_and_every_machines_compaction_the_text_is_in_no_shard_whatever_the_stamps(
    creator: int, creator_skew: int, before: list[Step], purger: int, purger_skew: int, compaction_order: list[int]
) -> None:
    with tempfile.TemporaryDirectory() as tmp, machines_on_one_log(Path(tmp), START_MS) as (stores, now, skew):
        root = Path(tmp)

        def act(i: int, ahead: int) -> Notebook:
            now[0] += 1_000  # real time goes on
            skew[i] = ahead
            stores[i].refresh()  # the folder carried every line written so far
            return Notebook(stores[i], author=BY)

        note_id = act(creator, creator_skew).remember(kind="fact", title="secret-0", body="secret body").note.id
        kept: set[str] = set()
        for n, step in enumerate(before, start=1):
            notebook = act(step.actor, step.skew)
            if step.action == "edit":
                notebook.update(note_id, title=f"secret-{n}", body=f"secret body {n}")
            else:
                kept.add(notebook.remember(kind="fact", title=f"kept-{n}").note.id)
        notebook = act(purger, purger_skew)
        notebook.forget(note_id)
        notebook.purge(note_id)
        for i in compaction_order:
            act(i, skew[i])
            stores[i].compact()
        for store in stores:
            store.refresh()
            assert store.state.note(note_id) is None
            assert {n.id for n in store.state.iter_notes()} == kept
        for path in sorted((root / "log").iterdir()):
            if path.is_file():
                data = path.read_bytes()
                assert b"secret" not in data, (path.name, data.decode("utf-8", "replace"))


def test_a_note_imported_again_after_its_purge_keeps_none_of_an_edit_stamped_ahead_before_it(tmp_path: Path) -> None:
    """The one way a purged id comes back is an import: it re-creates the note after the purge it saw. An edit made
    before the purge by a clock a day ahead (stamped after both) is neither in the note nor in its history, and the
    compaction that drops it changes nothing anyone reads (it is not refused)."""
    with machines_on_one_log(tmp_path, START_MS, count=2) as (stores, now, skew):
        a, b = (Notebook(store, author=BY) for store in stores)
        note_id = a.remember(kind="fact", title="first", body="plain").note.id
        exported = export_notebook(stores[0].state, node=stores[0].node, now_ms=now[0])
        skew[1] = DAY_MS
        stores[1].refresh()
        b.update(note_id, title="secret-ahead", body="secret body")
        skew[1] = 0
        now[0] += 60_000
        stores[0].refresh()
        a.forget(note_id)
        a.purge(note_id)
        now[0] += 60_000
        summary = ImportSummary("notebook")
        import_notes(a, parse_notebook(json.dumps(exported))[0], summary, by=BY)
        for store in stores:
            store.refresh()
            note = store.state.note(note_id)
            assert note is not None and (note.title, note.body) == ("first", "plain")
            assert [v.fields.get("title") for v in store.state.history(note_id)] == ["first"]
        for store in stores:
            store.compact()
        for path in (tmp_path / "log").iterdir():
            assert b"secret" not in path.read_bytes()
