"""Which documents contain a substring: an in-memory index over already-folded texts, for note search.

Pure: imports only the standard library. Measured departures from the planned design (bench/bench_textindex.py,
100k documents): a hit in the vocabulary is widened to its token with `rfind`/`find` of the newline separators
instead of `bisect` on token start offsets (~1.5x faster per matching token, and no offset arrays or integer
token ids); a token held by one document keeps its key bare instead of in a one-element list (most distinct
tokens are ids and numbers seen once; the two together cut index memory from 74 to 52 MiB); postings of two or
more documents are arrays of 4-byte document numbers, not lists of 8-byte pointers to keys (issue 18: at 100k
notes of ~300 characters, 36 to 18 MB), and callers that keep sets of documents may keep them as sets of numbers
(`candidate_numbers`: a set of ints fills several times faster than one of keys read through the numbers); and a
term so broad that walking its postings would cost more than `term in text` on every document falls back to that
test.
"""

from __future__ import annotations

import builtins
import enum
from array import array
from collections.abc import Hashable, Iterable, KeysView, Sequence
from typing import Final, Generic, NamedTuple, TypeVar

K = TypeVar("K", bound=Hashable)

DEFAULT_CHUNK_SIZE: Final = 16384
DEFAULT_PENDING_SIZE: Final = 512

# A dirty postings list is compacted once it is longer than twice its live count plus this slack; the slack
# keeps short lists from being compacted after every edit.
_COMPACT_SLACK: Final = 8
# Cost model for abandoning a vocabulary scan in favour of testing every text, in units of "one postings entry
# added to the result set" (~15 ns). Measured on CPython 3.11: one matching token costs ~1 us to find and
# widen, and `term in text` on one ~300-character document 60-300 ns (short terms are the cheap end, and
# they are the ones that end up here).
_MATCH_COST: Final = 64
_DOC_COST: Final = 8
# After this many matching tokens the scan extrapolates their number over the rest of the vocabulary, so a
# hopelessly broad term is abandoned early instead of after spending the cost of a linear scan.
_PROJECT_AFTER: Final = 64
# count_estimate() and then candidates() on the same term is the usual calling pattern, and for rare terms the
# vocabulary scan is nearly all of the cost, so recent scans are remembered until the vocabulary changes.
# Matched tokens are fresh slices (~60 bytes each), so only modest results are kept: a few hundred KiB at most.
_SCAN_CACHE_SIZE: Final = 16
_SCAN_CACHE_MAX_TOKENS: Final = 512


class _Missing(enum.Enum):
    # Keys may be any hashable, None included, so dict.get() needs a default that no key can be.
    MISSING = enum.auto()


_MISSING: Final = _Missing.MISSING
# The postings of a dead token that is still in the chunks: one shared empty array, never appended to.
_DEAD: Final[array[int]] = array("I")


def _has_token(text: str, token: str) -> bool:
    """True when `token` occurs in `text` between whitespace or the ends, as `str.split()` sees it."""
    # str.isspace() and str.split() share CPython's definition of whitespace, so the two agree.
    n = len(token)
    end = len(text)
    i = text.find(token)
    while i >= 0:
        j = i + n
        if (i == 0 or text[i - 1].isspace()) and (j == end or text[j].isspace()):
            return True
        i = text.find(token, i + 1)
    return False


def _check_term(term: str) -> None:
    # A term containing whitespace could straddle two tokens, which the vocabulary cannot see; refuse it
    # rather than return a wrong answer.
    if term.split() != [term]:
        raise ValueError(f"search term must be non-empty and contain no whitespace: {term!r}")


class Dumped(NamedTuple, Generic[K]):
    """A `SubstringIndex` as plain data (`dump`, `restored`)."""

    keys: list[K | None]  # by number; None for a free number
    texts: list[str]  # by number; "" for a free number
    tokens: list[str]  # the live vocabulary, in its order
    counts: array[int]  # each token's postings entries (1: the token's only document)
    flat: array[int]  # the entries, token after token: document numbers
    dirty: dict[str, int]  # token -> live count, for the lists that may hold stale entries
    free: list[int]  # the free numbers, the next to give last


class SubstringIndex(Generic[K]):
    """Answers "which documents contain this whitespace-free substring?" over already-folded texts.

    A term has no whitespace, so `term in text` holds exactly when the term is inside one whitespace-separated
    token of the text; the index therefore searches the vocabulary of distinct tokens, not every document. The
    vocabulary lives in a few large strings of "\\n"-terminated tokens so that `str.find` scans in C and a
    matching token costs one Python step however often the term occurs in it. New tokens wait in a short
    pending list, scanned directly, that is appended to the last chunk when full, so appends never rebuild
    everything.

    Every document has a number (the index's own: `number`, `key_at`; a discarded document's number is given to
    the next new one), its text is kept by number, and postings are append-only arrays of numbers (4 bytes an
    entry; lists of keys cost 8 and sets several times that), or the bare key of a token's only document.
    Editing a document leaves stale entries behind; a list that may hold them is "dirty" and keeps a separate
    live count. Every live (document, token) pair is always listed, so clean lists are exact and used as they
    are, while entries of dirty lists are checked against the current text of the document that has the number
    now: answers are always exact. Dirty lists are compacted once stale entries outnumber live ones and the
    chunks are rebuilt once dead tokens outnumber live ones, both amortised O(1) per edit.

    Not thread-safe; callers serialise access. `chunk_size` is the number of tokens per frozen vocabulary
    chunk and `pending_size` the number of new tokens scanned one by one before being frozen.
    `linear_fallback=False` always answers from the vocabulary, even when testing every text would be
    faster; results are identical either way (tests use it to exercise the index on tiny inputs).
    """

    def __init__(
        self,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        pending_size: int = DEFAULT_PENDING_SIZE,
        *,
        linear_fallback: bool = True,
    ) -> None:
        if chunk_size < 1 or pending_size < 1:
            raise ValueError("chunk_size and pending_size must be at least 1")
        self._chunk_size = chunk_size
        self._pending_size = pending_size
        self._linear_fallback = linear_fallback
        # key <-> number, and the texts by number; a discarded key's slot holds _MISSING and "" until `_free`
        # gives its number to a new key (reused: the slots stay as many as the most documents held at once).
        self._numbers: dict[K, int] = {}
        self._keys: list[K | _Missing] = []
        self._texts: list[str] = []
        self._free: list[int] = []
        # token -> the bare key (exactly one live document, nothing stale), or an array of numbers; _DEAD marks
        # a dead token that is still in the chunks, so a revived token is not added to them twice.
        # Insertion order is vocabulary order (chunks, then pending), which rebuilds rely on.
        self._post: dict[str, array[int] | K] = {}
        # token -> live document count, only for lists that may hold stale or repeated numbers.
        self._dirty: dict[str, int] = {}
        self._dead = 0
        self._chunks: list[str] = []
        self._last_chunk_len = 0
        self._pending: list[str] = []
        # term -> matching tokens (dead ones included: they may revive), or None for "test every text".
        self._scan_cache: dict[str, list[str] | None] = {}

    # ----------------------------------------------------------------------------------------- documents

    def set(self, key: K, text: str) -> None:
        """Add the document or replace its text."""
        number = self._numbers.get(key)
        old = None if number is None else self._texts[number]
        if old == text:
            return
        if number is None:
            if isinstance(key, array):
                # Postings tell a bare key from an array of numbers with isinstance(); only a hashable array
                # subclass could be confused with one, so refuse it outright.
                raise TypeError("SubstringIndex keys must not be arrays")
            if self._free:
                number = self._free.pop()
                self._keys[number] = key
            else:
                number = len(self._keys)
                self._keys.append(key)
                self._texts.append("")
            self._numbers[key] = number
        self._texts[number] = text
        # dict.fromkeys keeps first-seen order, so the vocabulary layout is deterministic.
        new_tokens = dict.fromkeys(text.split())
        if old is None:
            for tok in new_tokens:
                self._add(tok, key, number)
        else:
            old_tokens = dict.fromkeys(old.split())
            # Drops run against the already-updated text, so any compaction they trigger sees the truth.
            for tok in old_tokens:
                if tok not in new_tokens:
                    self._drop(tok)
            for tok in new_tokens:
                if tok not in old_tokens:
                    self._add(tok, key, number)
        self._maybe_rebuild()

    def discard(self, key: K) -> None:
        """Remove the document; absent keys are ignored."""
        number = self._numbers.pop(key, None)
        if number is None:
            return
        old = self._texts[number]
        # Freed before the drops, so any compaction they trigger leaves the number out; reusable only after.
        self._keys[number] = _MISSING
        self._texts[number] = ""
        for tok in dict.fromkeys(old.split()):
            self._drop(tok)
        self._free.append(number)
        self._maybe_rebuild()

    def text(self, key: K) -> str | None:
        number = self._numbers.get(key)
        return None if number is None else self._texts[number]

    def __len__(self) -> int:
        return len(self._numbers)

    def __contains__(self, key: object) -> bool:
        return key in self._numbers

    def keys(self) -> KeysView[K]:
        """A live view of the keys: copy it before editing the index while iterating."""
        return self._numbers.keys()

    # A document's number, for callers that keep sets of documents as sets of numbers (ints fill a set fast and
    # need no key per postings entry): `number`, `key_at`, `text_at`, `numbered`, `candidate_numbers`,
    # `numbers_with_tokens`.

    def number(self, key: K) -> int | None:
        """The document's number while it is in the index (a discarded document's goes to a later one)."""
        return self._numbers.get(key)

    def key_at(self, number: int) -> K:
        """The key of the document with this number; only for a number the index just gave as a document's."""
        return self._keys[number]  # type: ignore[return-value]  # a live number's slot holds its key

    def text_at(self, number: int) -> str:
        """The text of the document with this number ("" when none has it)."""
        return self._texts[number]

    def numbered(self, number: int) -> tuple[K, str] | None:
        """The key and text of the document with this number now, or None when no document has it."""
        key = self._keys[number] if 0 <= number < len(self._keys) else _MISSING
        return None if key is _MISSING else (key, self._texts[number])

    # ------------------------------------------------------------------------------------------- queries

    def candidates(self, term: str) -> builtins.set[K]:
        """Exactly the keys whose current text contains `term` (non-empty, no whitespace)."""
        return set(map(self._keys.__getitem__, self.candidate_numbers(term)))  # type: ignore[arg-type]

    def candidate_numbers(self, term: str) -> builtins.set[int]:
        """`candidates` as document numbers."""
        _check_term(term)
        tokens = self._scan(term)
        texts = self._texts
        if tokens is None:
            # A free number's text is "", which holds no term.
            return {n for n, t in enumerate(texts) if term in t}
        post = self._post
        dirty = self._dirty
        numbers: builtins.set[int] = set()  # an int hashes to itself: close numbers fill close slots
        unsure: list[int] = []
        for tok in tokens:
            p = post[tok]
            if not isinstance(p, array):
                numbers.add(self._numbers[p])
            elif tok in dirty:
                unsure.extend(p)
            else:
                numbers.update(p)  # a clean list's numbers are all live documents'
        if unsure:
            # A stale number may be free now or another document's: its current text decides.
            numbers.update([n for n in set(unsure).difference(numbers) if term in texts[n]])
        return numbers

    def numbers_among(self, term: str, among: builtins.set[int]) -> builtins.set[int]:
        """`candidate_numbers(term) & among`, without making the set of every document holding `term` (a common
        word's is a quarter of a notebook): each token's postings are intersected with `among` in C."""
        _check_term(term)
        tokens = self._scan(term)
        texts = self._texts
        if tokens is None:
            return {n for n in among if term in texts[n]}
        post = self._post
        dirty = self._dirty
        numbers: builtins.set[int] = set()
        for tok in tokens:
            p = post[tok]
            if not isinstance(p, array):
                if (number := self._numbers[p]) in among:
                    numbers.add(number)
            elif tok in dirty:  # a stale number may be free now or another document's: its current text decides
                numbers.update([n for n in among.intersection(p) if term in texts[n]])
            else:
                numbers.update(among.intersection(p))
        return numbers

    def tokens(self, term: str) -> Sequence[str] | None:
        """The distinct tokens holding `term` (some may no longer be in any text), or None when the term is so
        broad that the index tests every text instead. Read only: the list is kept for the next query."""
        _check_term(term)
        return self._scan(term)

    def count_estimate(self, term: str) -> int:
        """An upper bound of `len(candidates(term))`, cheap enough to rank a query's terms by rarity."""
        _check_term(term)
        tokens = self._scan(term)
        total = len(self._numbers)
        if tokens is None:
            return total
        post = self._post
        dirty = self._dirty
        count = 0
        for tok in tokens:
            p = post[tok]
            count += dirty.get(tok, len(p)) if isinstance(p, array) else 1
            if count >= total:
                return total
        return count

    def numbers_with_tokens(self, tokens: Iterable[str]) -> builtins.set[int]:
        """The numbers of the documents holding any of these tokens as a whole whitespace-separated token."""
        post = self._post
        numbers: builtins.set[int] = set()
        for token in tokens:
            p = post.get(token, _MISSING)
            if p is _MISSING:
                continue
            if isinstance(p, array) and token in self._dirty:
                # Verifying every entry costs the same as compacting, and compacting makes the next call free.
                p = self._compact(token, p)
            if isinstance(p, array):
                numbers.update(p)
            else:
                numbers.add(self._numbers[p])  # a bare key: _MISSING was skipped
        return numbers

    # ------------------------------------------------------------------------------------ saved and restored

    def dump(self) -> Dumped[K]:
        """The index as plain data for `restored` (a later process's index, without indexing every text again):
        each number's key (None for a free number) and text, the live vocabulary in order, each token's count of
        postings entries, the entries in a row, the live counts of the lists that may hold stale entries, and the
        free numbers. Copies only the postings (one array) and lists of the index's own strings: cheap enough under the
        caller's lock. Keys must not be None."""
        post = self._post
        tokens: list[str] = []
        counts = array("I")
        flat = array("I")
        numbers = self._numbers
        for tok, p in post.items():
            if p is _DEAD:
                continue
            tokens.append(tok)
            if isinstance(p, array):
                counts.append(len(p))
                flat.extend(p)
            else:
                counts.append(1)
                flat.append(numbers[p])
        keys = [None if key is _MISSING else key for key in self._keys]
        return Dumped(keys, list(self._texts), tokens, counts, flat, dict(self._dirty), list(self._free))

    @classmethod
    def restored(
        cls, saved: Dumped[K], chunk_size: int = DEFAULT_CHUNK_SIZE, pending_size: int = DEFAULT_PENDING_SIZE
    ) -> SubstringIndex[K]:
        """The index `dump` gave. Raises ValueError when the parts do not fit together (the caller's file check is
        what guards against damage; this only refuses what would break the index)."""
        keys, texts, tokens, counts, flat, dirty, free = saved
        size = len(keys)
        if len(texts) != size or len(counts) != len(tokens) or sum(counts) != len(flat):
            raise ValueError("the saved index's parts disagree")
        if (flat and max(flat) >= size) or (counts and min(counts) < 1):
            raise ValueError("the saved index's postings point outside it")
        if len(" ".join(tokens).split()) != len(tokens):  # a token is non-empty and holds no whitespace
            raise ValueError("the saved index's vocabulary is not of tokens")
        index = cls(chunk_size, pending_size)
        index._keys = [_MISSING if key is None else key for key in keys]
        index._texts = texts
        index._numbers = {key: n for n, key in enumerate(keys) if key is not None}
        if len(index._numbers) + len(free) != size or sorted(free) != [n for n, key in enumerate(keys) if key is None]:
            raise ValueError("the saved index's keys repeat, or its free numbers are not the ones without a key")
        if any(texts[n] for n in free):
            raise ValueError("a free number of the saved index has a text")
        index._free = list(free)
        post: dict[str, array[int] | K] = {}
        at = 0
        for tok, count in zip(tokens, counts, strict=True):
            if count == 1:
                key = keys[flat[at]]
                if key is None:
                    raise ValueError("the saved index lists a free number alone")
                post[tok] = key
            else:
                post[tok] = flat[at : at + count]
            at += count
        if len(post) != len(tokens) or any(not isinstance(post.get(tok), array) for tok in dirty):
            raise ValueError("the saved index's vocabulary repeats, or marks a token it holds bare as dirty")
        index._post = post
        index._dirty = dict(dirty)
        index._rebuild()
        return index

    # --------------------------------------------------------------------------------------- maintenance

    def _add(self, tok: str, key: K, number: int) -> None:
        post = self._post
        p = post.get(tok, _MISSING)
        if p is _MISSING:
            post[tok] = key
            self._pending.append(tok)
            if self._scan_cache:
                self._scan_cache.clear()
            if len(self._pending) >= self._pending_size:
                self._freeze_pending()
        elif not isinstance(p, array):
            post[tok] = array("I", (self._numbers[p], number))
        elif p is not _DEAD:
            # The document is not listed as live for this token, so appending keeps a clean list clean.
            p.append(number)
            if tok in self._dirty:
                self._dirty[tok] += 1
        else:
            post[tok] = key
            self._dead -= 1

    def _drop(self, tok: str) -> None:
        post = self._post
        p = post[tok]
        if not isinstance(p, array):
            post[tok] = _DEAD
            self._dead += 1
            return
        dirty = self._dirty
        live = dirty.get(tok, len(p)) - 1
        if live == 0:
            post[tok] = _DEAD
            dirty.pop(tok, None)
            self._dead += 1
        elif len(p) > 2 * live + _COMPACT_SLACK:
            self._compact(tok, p)
        else:
            dirty[tok] = live

    def _compact(self, tok: str, p: array[int]) -> array[int] | K:
        """Rewrite the postings of a live token to exactly its live documents; only called when some remain."""
        texts = self._texts
        keep = array("I", [n for n in dict.fromkeys(p) if _has_token(texts[n], tok)])  # a free number's text: ""
        compacted: array[int] | K = self._keys[keep[0]] if len(keep) == 1 else keep  # type: ignore[assignment]
        self._post[tok] = compacted
        self._dirty.pop(tok, None)
        return compacted

    def _freeze_pending(self) -> None:
        count = len(self._pending)
        joined = "\n".join(self._pending) + "\n"
        if self._chunks and self._last_chunk_len + count <= self._chunk_size:
            # Copies at most one chunk per pending_size new tokens, a few dozen bytes per token.
            self._chunks[-1] += joined
            self._last_chunk_len += count
        else:
            self._chunks.append(joined)
            self._last_chunk_len = count
        self._pending = []

    def _maybe_rebuild(self) -> None:
        if self._dead > max(self._chunk_size, len(self._post) - self._dead):
            self._rebuild()

    def _rebuild(self) -> None:
        """Drop dead tokens from the vocabulary; O(vocabulary), paid for by the deaths that triggered it."""
        self._post = {tok: p for tok, p in self._post.items() if p is not _DEAD}
        self._dead = 0
        tokens = list(self._post)
        size = self._chunk_size
        self._chunks = ["\n".join(tokens[i : i + size]) + "\n" for i in range(0, len(tokens), size)]
        self._last_chunk_len = len(tokens) - size * (len(self._chunks) - 1) if self._chunks else 0
        self._pending = []
        self._scan_cache.clear()

    def _scan(self, term: str) -> list[str] | None:
        """Every vocabulary token containing `term`, or None when testing every text is cheaper."""
        cache = self._scan_cache
        if term in cache:
            return cache[term]
        post = self._post
        budget = _DOC_COST * len(self._numbers) if self._linear_fallback else float("inf")
        total_chars = sum(map(len, self._chunks))
        done = 0
        matches = 0
        entries = 0
        found: list[str] = []
        result: list[str] | None = found
        for blob in self._chunks:
            i = blob.find(term)
            while i >= 0:
                # Every token ends with "\n" and the term holds none, so both searches stay inside the token.
                end = blob.find("\n", i)
                tok = blob[blob.rfind("\n", 0, i) + 1 : end]
                found.append(tok)
                p = post[tok]
                entries += len(p) if isinstance(p, array) else 1
                matches += 1
                # Postings are not extrapolated: the common words that own most of them come first.
                spread = total_chars / (done + end + 1) if matches >= _PROJECT_AFTER else 1.0
                if entries + _MATCH_COST * matches * spread > budget:
                    result = None
                    break
                i = blob.find(term, end + 1)
            if result is None:
                break
            done += len(blob)
        else:
            found.extend([tok for tok in self._pending if term in tok])
        if result is None or len(result) <= _SCAN_CACHE_MAX_TOKENS:
            if len(cache) >= _SCAN_CACHE_SIZE:
                del cache[next(iter(cache))]
            cache[term] = result
        return result
