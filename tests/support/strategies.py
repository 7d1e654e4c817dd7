"""Hypothesis strategies tests share: a note's fields made of a few words that hold one another ("ac" in "fact" and
"ace"), so substring matches, field weights and the duplicate hint all meet their edge cases (the search tests); op
sets from three nodes with close stamps, so concurrent ops and tie-breaks are common (the fold's laws)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hypothesis import strategies as st

from hivenote.server.core.model import Author, Op


def note_fields(words: Sequence[str]) -> st.SearchStrategy[dict[str, Any]]:
    """A note's kind, title, tags, project and body over `words`."""
    word = st.sampled_from(list(words))
    return st.fixed_dictionaries(
        {
            "kind": st.sampled_from(["fact", "decision"]),
            "title": st.lists(word, min_size=1, max_size=3).map(" ".join),
            "tags": st.lists(word, max_size=2),
            "project": st.sampled_from([None, "alpha-api", "ph"]),
            "body": st.lists(word, max_size=4).map(" ".join),
        }
    )


NODES = ("alpha-0001", "beta-0002", "gamma-0003")
NOTE_IDS = ("N1", "N2", "N3")
NAMES = ("Ann", "Bob", "Cy")
TEXTS = ("likes tea", "plays chess", "ünïcode ✓")

# `replaces` (the note a note replaces, or None: the link dropped) is a register like the fields; a line carries
# at least one other field, as the notebook writes it (older readers need one).
op_note_fields = (
    st.dictionaries(
        st.sampled_from(("kind", "title", "body", "tags", "project", "replaces")),
        st.sampled_from(("fact", "decision", "x", "y", None)),
        min_size=1,
    )
    .filter(lambda d: set(d) != {"replaces"})
    .map(
        lambda d: {
            k: ([v or "x"] if k == "tags" else v if k == "replaces" else (v or "x") if k != "project" else v)
            for k, v in d.items()
        }
    )
)

payloads = st.one_of(
    # An edit with `since` null was made without any purge of the note (a new note, or an edit before a purge, however
    # far ahead its stamp); one without `since` is an older Hivenote's (its stamp alone decides).
    st.builds(
        lambda i, f, since: ("note.set", {"id": i, "fields": f, **since}),
        st.sampled_from(NOTE_IDS),
        op_note_fields,
        st.sampled_from(({}, {"since": None})),
    ),
    st.builds(
        lambda kind, i: (kind, {"id": i}),
        st.sampled_from(("note.trash", "note.restore", "note.purge")),
        st.sampled_from(NOTE_IDS),
    ),
    st.builds(
        lambda n, t, k: ("entity.add", {"name": n, "type": t, **({"k": k} if k else {})}),
        st.sampled_from(NAMES),
        st.sampled_from(("person", "org")),
        st.integers(0, 1),
    ),
    st.builds(lambda n: ("entity.del", {"name": n}), st.sampled_from(NAMES)),
    st.builds(
        lambda n, t, k, j: ("obs.add", {"entity": n, "text": t, **({"k": k} if k else {}), **({"j": j} if j else {})}),
        st.sampled_from(NAMES),
        st.sampled_from(TEXTS),
        st.integers(0, 1),
        st.integers(0, 1),
    ),
    st.builds(
        lambda n, t, k: ("obs.del", {"entity": n, "text": t, **({"k": k} if k else {})}),
        st.sampled_from(NAMES),
        st.sampled_from(TEXTS),
        st.integers(0, 1),
    ),
    st.builds(
        lambda f, t, ty, j: ("rel.add", {"from": f, "to": t, "type": ty, **({"j": j} if j else {})}),
        st.sampled_from(NAMES),
        st.sampled_from((*NAMES, "Nobody")),
        st.sampled_from(("knows", "works_at")),
        st.integers(0, 1),
    ),
    st.builds(
        lambda f, t, ty: ("rel.del", {"from": f, "to": t, "type": ty}),
        st.sampled_from(NAMES),
        st.sampled_from((*NAMES, "Nobody")),
        st.sampled_from(("knows", "works_at")),
    ),
)


@st.composite
def op_sets(draw: st.DrawFn, max_size: int = 40) -> list[Op]:
    """Ops from three nodes; walls drawn from a narrow range so concurrent ops and tie-breaks are common.

    Each node's stamps increase with its seq, as a real node's clock guarantees."""
    raw = draw(
        st.lists(
            st.tuples(st.integers(0, 2), st.integers(0, 6), payloads),
            max_size=max_size,
        )
    )
    seqs = [0, 0, 0]
    clocks = [(0, 0)] * 3
    ops = []
    for node_idx, step, (kind, data) in raw:
        seqs[node_idx] += 1
        wall, counter = clocks[node_idx]
        clocks[node_idx] = (wall + step, 0) if step else (wall, counter + 1)
        w, c = clocks[node_idx]
        by = Author(agent=("cursor", "codex", "cli")[node_idx])
        ops.append(Op(NODES[node_idx], seqs[node_idx], w, c, kind, data, by))
    return ops
