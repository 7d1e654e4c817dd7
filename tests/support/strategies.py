"""Hypothesis strategies the search tests share: a note's fields made of a few words that hold one another ("ac" in
"fact" and "ace"), so substring matches, field weights and the duplicate hint all meet their edge cases."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hypothesis import strategies as st


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
