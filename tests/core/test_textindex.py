"""Tests for hivenote.server.core.textindex: exact answers against a brute-force model, plus bounded bookkeeping."""

from __future__ import annotations

import itertools
import random
from array import array
from collections.abc import Hashable, Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hivenote.server.core.textindex import Dumped, SubstringIndex
from tests.support.internals import docs_with_token, invariant_errors

# Whitespace that str.split() honours, including the less obvious kinds (ideographic space, file separator,
# no-break space), so the tokeniser and the whole-token check must agree with str.split() on all of them.
WHITESPACE = " \n\t\u3000\x1c\xa0"
# Few letters so tokens repeat and contain each other; accented, CJK and astral characters so chunks stop
# being one-byte strings.
LETTERS = "abcé日😀ß"

texts_strategy = st.text(alphabet=st.sampled_from(LETTERS + WHITESPACE), max_size=24)
keys_strategy = st.integers(min_value=0, max_value=7)
random_terms = st.text(alphabet=st.sampled_from(LETTERS), min_size=1, max_size=4)


def brute_candidates(texts: Mapping[int, str], term: str) -> set[int]:
    return {key for key, text in texts.items() if term in text}


def brute_docs_with_token(texts: Mapping[int, str], token: str) -> set[int]:
    return {key for key, text in texts.items() if token in text.split()}


def interesting_terms(texts: Mapping[int, str]) -> list[str]:
    """Substrings of current tokens, plus pieces glued across token boundaries (which must never match)."""
    tokens = sorted({tok for text in texts.values() for tok in text.split()})
    terms: set[str] = set()
    for tok in tokens:
        terms.update(tok[i:j] for i in range(len(tok)) for j in range(i + 1, len(tok) + 1))
    # Neighbours in a text are usually neighbours in the vocabulary chunks too.
    neighbours = [*itertools.pairwise(tokens)]
    for text in texts.values():
        neighbours.extend(itertools.pairwise(text.split()))
    terms.update(left[-2:] + right[:2] for left, right in neighbours)
    return sorted(terms)


def assert_matches_model(index: SubstringIndex[int], model: Mapping[int, str], terms: list[str]) -> None:
    assert invariant_errors(index) == []
    assert len(index) == len(model)
    assert set(index.keys()) == set(model)
    for key, text in model.items():
        assert key in index
        assert index.text(key) == text
    for key, text in model.items():
        number = index.number(key)
        assert number is not None and index.key_at(number) == key and index.text_at(number) == text
        assert index.numbered(number) == (key, text)
    for term in terms:
        expected = brute_candidates(model, term)
        assert index.candidates(term) == expected, term
        assert set(map(index.key_at, index.candidate_numbers(term))) == expected, term
        some = {n for n in range(len(index._texts)) if n % 2 == 0}  # every other number, free ones too
        assert index.numbers_among(term, some) == index.candidate_numbers(term) & some, term
        assert index.count_estimate(term) >= len(expected), term
        assert index.count_estimate(term) <= len(model), term
        assert docs_with_token(index, term) == brute_docs_with_token(model, term), term
        tokens = index.tokens(term)
        if tokens is not None:  # every token holding the term, whole: the documents holding the term
            assert set(map(index.key_at, index.numbers_with_tokens(tokens))) == expected, term
        live = {tok for text in model.values() for tok in text.split() if term in tok}
        assert (tokens is None and index._linear_fallback) or (
            tokens is not None and live <= set(tokens) and all(term in tok for tok in tokens)
        ), term


@settings(max_examples=300, deadline=None)
@given(
    chunk_size=st.integers(min_value=1, max_value=5),
    pending_size=st.integers(min_value=1, max_value=4),
    linear_fallback=st.booleans(),
    ops=st.lists(st.tuples(keys_strategy, st.none() | texts_strategy), max_size=40),
    extra_terms=st.lists(random_terms, max_size=6),
    data=st.data(),
)
def test_candidates_and_tokens_equal_brute_force_after_random_edits(
    chunk_size: int,
    pending_size: int,
    linear_fallback: bool,
    ops: list[tuple[int, str | None]],
    extra_terms: list[str],
    data: st.DataObject,
) -> None:
    index: SubstringIndex[int] = SubstringIndex(chunk_size, pending_size, linear_fallback=linear_fallback)
    model: dict[int, str] = {}
    for key, text in ops:
        if text is None:
            index.discard(key)
            model.pop(key, None)
        else:
            index.set(key, text)
            model[key] = text
        # Query between edits too, so the scan cache has to notice vocabulary changes.
        pool = interesting_terms(model) + extra_terms
        if pool:
            terms = data.draw(st.lists(st.sampled_from(pool), max_size=3))
            assert_matches_model(index, model, terms)
    assert_matches_model(index, model, interesting_terms(model) + extra_terms)


@settings(max_examples=100, deadline=None)
@given(
    chunk_size=st.integers(min_value=1, max_value=4),
    pending_size=st.integers(min_value=1, max_value=3),
    toggles=st.lists(st.tuples(st.integers(min_value=1, max_value=3), st.booleans()), max_size=80),
)
def test_churn_on_shared_tokens_keeps_postings_compact_and_exact(
    chunk_size: int, pending_size: int, toggles: list[tuple[int, bool]]
) -> None:
    # Key 0 always holds the shared tokens, so they never die and their postings can only go stale.
    index: SubstringIndex[int] = SubstringIndex(chunk_size, pending_size, linear_fallback=False)
    model = {0: "ab abc x"}
    index.set(0, model[0])
    for key, present in toggles:
        if present:
            model[key] = f"abc ab y{key}"
            index.set(key, model[key])
        else:
            model[key] = f"z{key}"
            index.set(key, model[key])
    assert_matches_model(index, model, ["a", "ab", "abc", "b", "bc", "y1", "z", "x", "cab", "ba"])


def test_substrings_are_found_inside_tokens_but_never_across_them() -> None:
    index: SubstringIndex[str] = SubstringIndex()
    index.set("n1", "hello world")
    index.set("n2", "yellow submarine")
    index.set("n3", "worldwide")
    assert index.candidates("ello") == {"n1", "n2"}
    assert index.candidates("world") == {"n1", "n3"}
    assert index.candidates("lowor") == set()  # "hello" + "world" share the vocabulary chunk
    assert index.candidates("hello") == {"n1"}
    assert index.candidates("missing") == set()


def test_terms_do_not_match_across_chunk_joins_or_pending_tokens() -> None:
    # One-token chunks and a one-token pending list put every join between tokens somewhere different.
    for chunk_size, pending_size in [(1, 1), (2, 1), (3, 2), (1, 3)]:
        index: SubstringIndex[int] = SubstringIndex(chunk_size, pending_size, linear_fallback=False)
        for key, word in enumerate(["ab", "cd", "ef", "gh", "abcd"]):
            index.set(key, word)
        assert index.candidates("bc") == {4}
        assert index.candidates("de") == set()
        assert index.candidates("fg") == set()
        assert index.candidates("gh") == {3}
        assert invariant_errors(index) == []


def test_empty_or_whitespace_terms_are_rejected() -> None:
    index: SubstringIndex[int] = SubstringIndex()
    index.set(1, "a b")
    for term in ["", " ", "a b", "a\nb", "\n", "a\u3000"]:
        with pytest.raises(ValueError):
            index.candidates(term)
        with pytest.raises(ValueError):
            index.count_estimate(term)
    assert docs_with_token(index, "") == set()
    assert docs_with_token(index, "a b") == set()


def test_set_replaces_text_and_discard_forgets_the_document() -> None:
    index: SubstringIndex[int] = SubstringIndex()
    index.set(1, "alpha beta")
    index.set(2, "beta gamma")
    index.set(1, "delta")
    assert index.text(1) == "delta"
    assert index.candidates("alpha") == set()
    assert index.candidates("beta") == {2}
    assert docs_with_token(index, "delta") == {1}
    index.discard(2)
    index.discard(2)
    index.discard(99)
    assert len(index) == 1
    assert 2 not in index
    assert 1 in index
    assert "1" not in index
    assert index.text(2) is None
    assert list(index.keys()) == [1]
    assert index.candidates("beta") == set()


def test_docs_with_token_matches_whole_tokens_only() -> None:
    index: SubstringIndex[int] = SubstringIndex()
    index.set(1, "cat concat")
    index.set(2, "concatenate cat,")
    index.set(3, "the\u3000cat\x1cnap")
    assert docs_with_token(index, "cat") == {1, 3}
    assert docs_with_token(index, "cat,") == {2}
    assert docs_with_token(index, "nap") == {3}
    assert docs_with_token(index, "ca") == set()
    assert index.candidates("cat") == {1, 2, 3}
    assert index.candidates("thecat") == set()


def test_repeated_and_nested_tokens_are_counted_once_per_document() -> None:
    index: SubstringIndex[int] = SubstringIndex(linear_fallback=False)
    index.set(1, "aa aa aaa a")
    index.set(2, "a")
    assert index.candidates("a") == {1, 2}
    assert index.candidates("aa") == {1}
    assert index.count_estimate("aaa") == 1
    assert index.count_estimate("zzz") == 0
    assert docs_with_token(index, "aa") == {1}
    index.set(1, "b")
    assert index.candidates("a") == {2}
    assert docs_with_token(index, "aa") == set()
    assert invariant_errors(index) == []


def test_a_token_that_dies_and_revives_is_found_and_counted_once() -> None:
    index: SubstringIndex[int] = SubstringIndex(chunk_size=100, pending_size=1, linear_fallback=False)
    index.set(1, "phoenix")
    index.discard(1)
    assert index.candidates("hoeni") == set()
    assert index.count_estimate("hoeni") == 0
    index.set(2, "phoenix rises")
    assert index.candidates("hoeni") == {2}
    assert index.count_estimate("hoeni") == 1
    assert docs_with_token(index, "phoenix") == {2}
    assert invariant_errors(index) == []


def test_queries_see_tokens_added_after_an_earlier_identical_query() -> None:
    index: SubstringIndex[int] = SubstringIndex(linear_fallback=False)
    index.set(1, "alpha")
    assert index.count_estimate("zeta") == 0
    assert index.candidates("zeta") == set()
    index.set(2, "zetas")
    assert index.count_estimate("zeta") == 1
    assert index.candidates("zeta") == {2}
    index.set(3, "zetas alpha")
    assert index.candidates("zeta") == {2, 3}
    assert index.count_estimate("zeta") == 2


def test_any_hashable_key_works_including_none_and_tuples() -> None:
    index: SubstringIndex[Hashable] = SubstringIndex()
    index.set(None, "solo")
    index.set(("a", 1), "solo duet")
    index.set(frozenset({1}), "trio")
    assert docs_with_token(index, "solo") == {None, ("a", 1)}
    assert docs_with_token(index, "trio") == {frozenset({1})}
    assert index.candidates("uet") == {("a", 1)}
    index.discard(None)
    assert docs_with_token(index, "solo") == {("a", 1)}


def test_hashable_array_keys_are_refused() -> None:
    class HashableArray(array):  # type: ignore[type-arg]  # array is not subscriptable at run time on 3.11
        def __hash__(self) -> int:  # type: ignore[override]  # deliberately hashable, to provoke the guard
            return id(self)

    index: SubstringIndex[Hashable] = SubstringIndex()
    with pytest.raises(TypeError):
        index.set(HashableArray("I", [1]), "text")
    assert len(index) == 0


def test_chunk_and_pending_sizes_must_be_positive() -> None:
    with pytest.raises(ValueError):
        SubstringIndex(chunk_size=0)
    with pytest.raises(ValueError):
        SubstringIndex(pending_size=0)


def test_broad_terms_fall_back_to_a_linear_scan_with_the_same_answer() -> None:
    rng = random.Random(7)
    index: SubstringIndex[int] = SubstringIndex(chunk_size=64, pending_size=8)
    model: dict[int, str] = {}
    for key in range(400):
        model[key] = " ".join(f"w{rng.randrange(50)}x{rng.randrange(1000)}" for _ in range(6))
        index.set(key, model[key])
    assert index._scan("w") is None  # too broad: matches every token
    assert index._scan("w7x12") is not None
    for term in ["w", "x", "1", "w7x", "w7x12", "x99"]:
        assert index.candidates(term) == brute_candidates(model, term)
        assert len(model) >= index.count_estimate(term) >= len(brute_candidates(model, term))


def test_heavy_churn_keeps_postings_and_vocabulary_bounded() -> None:
    rng = random.Random(11)
    index: SubstringIndex[int] = SubstringIndex(chunk_size=32, pending_size=4)
    model: dict[int, str] = {}
    words = [f"word{i}" for i in range(40)]
    for step in range(6000):
        key = rng.randrange(60)
        if rng.random() < 0.1:
            index.discard(key)
            model.pop(key, None)
        else:
            # A fresh unique token per edit makes dead tokens pile up unless the vocabulary is rebuilt.
            text = " ".join([*rng.sample(words, 5), f"id{step}"])
            index.set(key, text)
            model[key] = text
    assert_matches_model(index, model, ["word1", "word", "id", "id59", "d1", "or", "id5999", "zzz"])
    live_tokens = len({tok for text in model.values() for tok in text.split()})
    assert len(index._post) <= 2 * live_tokens + 32


def test_index_matches_brute_force_with_default_sizes_on_a_larger_corpus() -> None:
    rng = random.Random(3)
    vocabulary = ["".join(rng.choice("aeioubcdfgklmnprst") for _ in range(rng.randint(2, 9))) for _ in range(300)]
    index: SubstringIndex[int] = SubstringIndex()
    model: dict[int, str] = {}
    for key in range(3000):
        text = " ".join([*rng.choices(vocabulary, k=12), f"n{key}"])
        index.set(key, text)
        model[key] = text
    for key in rng.sample(range(3000), 600):
        model[key] = " ".join(rng.choices(vocabulary, k=12))
        index.set(key, model[key])
    terms = [*rng.sample(vocabulary, 30), "a", "e", "ka", "n1", "n299", "n2999", "nope"]
    for term in terms:
        assert index.candidates(term) == brute_candidates(model, term), term
        assert docs_with_token(index, term) == brute_docs_with_token(model, term), term
    assert invariant_errors(index) == []


def test_terms_matching_many_tokens_are_exact_with_the_fallback_disabled() -> None:
    index: SubstringIndex[int] = SubstringIndex(chunk_size=100, pending_size=10, linear_fallback=False)
    for key in range(700):
        index.set(key, f"t{key} common")
    assert index.candidates("t") == set(range(700))
    assert index.candidates("t") == set(range(700))  # the same scan again: too many tokens to have been cached
    assert index.count_estimate("t") == 700
    assert index.candidates("t69") == {69, *range(690, 700)}
    index.discard(690)
    assert index.candidates("t69") == {69, *range(691, 700)}
    assert docs_with_token(index, "common") == set(range(700)) - {690}


def test_a_discarded_documents_number_goes_to_the_next_new_one_and_never_answers_for_it() -> None:
    # Key 1's number is stale in the dirty postings of "shared" when key 9 takes it; key 9 does not hold "shared",
    # so only the current texts may answer.
    index: SubstringIndex[int] = SubstringIndex(linear_fallback=False)
    for key in range(6):
        index.set(key, f"shared own{key}")
    number = index.number(1)
    assert number is not None and index.numbered(number) == (1, "shared own1")
    index.discard(1)
    assert index.number(1) is None and index.numbered(number) is None
    index.set(9, "other own9")
    assert index.number(9) == number and index.numbered(number) == (9, "other own9")
    assert index.numbered(-1) is None and index.numbered(10**6) is None
    assert index.candidates("shared") == {0, 2, 3, 4, 5}
    assert docs_with_token(index, "shared") == {0, 2, 3, 4, 5}
    assert index.count_estimate("shared") == 5
    index.set(9, "shared again")  # now it does: the number is listed twice in the dirty list, counted once
    assert index.candidates("shared") == {0, 2, 3, 4, 5, 9}
    assert index.count_estimate("shared") == 6
    assert invariant_errors(index) == []
    assert len(index._keys) == 6  # six documents at most at once: six numbers


def contents(saved: Dumped[int]) -> tuple[object, ...]:
    """A dump with its vocabulary as a mapping: each token's postings, whatever the tokens' order."""
    ends = list(itertools.accumulate(saved.counts))
    postings = {
        tok: list(saved.flat[end - n : end]) for tok, n, end in zip(saved.tokens, saved.counts, ends, strict=True)
    }
    return saved.keys, saved.texts, postings, saved.dirty


@settings(max_examples=300, deadline=None)
@given(
    chunk_size=st.integers(min_value=1, max_value=5),
    pending_size=st.integers(min_value=1, max_value=4),
    before=st.lists(st.tuples(keys_strategy, st.none() | texts_strategy), max_size=40),
    after=st.lists(st.tuples(keys_strategy, st.none() | texts_strategy), max_size=20),
    extra_terms=st.lists(random_terms, max_size=6),
)
def test_a_restored_index_is_the_dumped_one_and_goes_on_as_it_would(
    chunk_size: int,
    pending_size: int,
    before: list[tuple[int, str | None]],
    after: list[tuple[int, str | None]],
    extra_terms: list[str],
) -> None:
    """`restored(dump())` holds the same numbers, texts, postings (stale entries and live counts included) and free
    numbers, in the same order; edited the same way afterwards, the two stay the same and exact."""
    index: SubstringIndex[int] = SubstringIndex(chunk_size, pending_size, linear_fallback=False)
    model: dict[int, str] = {}

    def edit(target: SubstringIndex[int], ops: list[tuple[int, str | None]]) -> None:
        for key, text in ops:
            if text is None:
                target.discard(key)
            else:
                target.set(key, text)

    edit(index, before)
    for key, text in before:
        if text is None:
            model.pop(key, None)
        else:
            model[key] = text
    saved = index.dump()
    copy = SubstringIndex.restored(saved, chunk_size, pending_size)
    assert copy.dump() == saved
    assert copy._free == index._free  # the next new document gets the same number in both
    for each in (copy, index):  # a query may compact a list: both are asked the same
        assert_matches_model(each, model, interesting_terms(model) + extra_terms)
    edit(index, after)
    edit(copy, after)
    assert contents(copy.dump()) == contents(index.dump())  # a token dead at the dump and revived may move
    for key, text in after:
        if text is None:
            model.pop(key, None)
        else:
            model[key] = text
    assert_matches_model(copy, model, interesting_terms(model) + extra_terms)


def test_a_dump_whose_parts_do_not_fit_together_is_refused() -> None:
    index: SubstringIndex[str] = SubstringIndex()
    index.set("a", "alpha beta")
    index.set("b", "beta gamma")
    index.discard("a")
    saved = index.dump()
    assert saved.tokens == ["beta", "gamma"] and saved.counts.tolist() == [2, 1] and saved.free == [0]
    SubstringIndex.restored(saved)
    bad = [
        saved._replace(texts=saved.texts[:1]),  # a text short
        saved._replace(flat=array("I", [*saved.flat[:-1], 9])),  # a number beyond the documents
        saved._replace(counts=array("I", [0, *saved.counts[1:]])),  # an empty postings list
        saved._replace(tokens=["be ta", *saved.tokens[1:]]),  # a token with whitespace in it
        saved._replace(tokens=[saved.tokens[0]] * len(saved.tokens)),  # a token twice
        saved._replace(keys=["b", "b"]),  # a key twice
        saved._replace(flat=array("I", [n ^ 1 for n in saved.flat])),  # a token's only document is a free number
        saved._replace(dirty={"gamma": 1}),  # a token held bare marked dirty
        saved._replace(free=[]),  # a number without a key not free
    ]
    for dumped in bad:
        with pytest.raises(ValueError):
            SubstringIndex.restored(dumped)
