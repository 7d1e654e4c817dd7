"""What keeps a question fast on a big notebook with meaning on, counted (not timed) on real parts: a question no
note holds whole is not ranked, the vocabulary is not scanned past a word no note holds, and the near pool lists
each word's notes once, counting them with set operations instead of note by note."""

from __future__ import annotations

import sys
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from hivenote.server.core.fold import State
from hivenote.server.core.search import _texts, refresh_note_index, search_notes
from hivenote.server.core.textindex import SubstringIndex
from hivenote.server.meaning.index import MeaningIndex
from hivenote.server.meaning.model import StaticModel, load_default
from hivenote.server.storage.store import Store
from tests.support.notes import WORDS, write_log

QUESTION = f"how do we {WORDS[10]} {WORDS[20]} {WORDS[30]} here?"  # no note holds "here?": the near list answers


@pytest.fixture(scope="module")
def model() -> StaticModel:
    return load_default()


def index_calls(state: State, meaning: MeaningIndex) -> list[tuple[str, Any]]:
    """(name, returned value) of every call into the note index while the question is searched."""
    calls: list[tuple[str, Any]] = []

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "return" and frame.f_code.co_filename.endswith("textindex.py"):
            calls.append((frame.f_code.co_name, arg))

    sys.setprofile(profile)
    try:
        result = search_notes(state, QUESTION, meaning=meaning)
    finally:
        sys.setprofile(None)
    assert result.total == 0 and len(result.near) == 5
    return calls


def test_a_question_lists_each_word_s_notes_once_and_ranks_none(tmp_path: Path, model: StaticModel) -> None:
    write_log(tmp_path, 2000)
    with Store(tmp_path, readonly=True) as store:
        meaning = MeaningIndex(None, lambda: model)
        while not meaning.refresh(store):
            pass
        state = store.state
        refresh_note_index(state)
        search_notes(state, QUESTION, meaning=meaning)  # the first search may build what later ones reuse
        calls = index_calls(state, meaning)
        index = _texts(state)
        assert isinstance(index, SubstringIndex)
        # Per word of the question that says something, its longest prefix (three letters or more) some note holds.
        prefixes = [[w[:end] for end in range(len(w), 2, -1)] for w in (WORDS[10], WORDS[20], WORDS[30], "here")]
        probes = [probe for ps in prefixes if (probe := next((p for p in ps if index.candidates(p)), None))]
    names = [name for name, _ in calls]
    assert "numbers_with_tokens" not in names, "nothing holds every word: no note is ranked"
    assert names.count("count_estimate") == 1, "the exact pass stops at the word no note holds"
    assert "candidates" not in names, "the near pool counts the index's numbers of notes, not their ids"
    listed = sum(len(found) for name, found in calls if name == "candidate_numbers")
    assert 3 <= len(probes) <= 4 and listed == sum(len(index.candidates(probe)) for probe in probes)
