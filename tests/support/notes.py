"""Synthetic notes: random titles and bodies over a fixed vocabulary, and a whole log of them written directly (filling
it through fsync'd appends would take minutes). The load test and the benchmarks seed and drive the notebook with
these."""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator
from pathlib import Path
from typing import TypedDict

from hivenote.server.core.model import Author, Op
from hivenote.server.core.search import refresh_note_index
from hivenote.server.storage.store import Store

RND = random.Random(7)
VOCAB = ["".join(RND.choice("abcdefghijklmnoprstuvwy") for _ in range(RND.randint(3, 10))) for _ in range(5000)]
WORDS = [*VOCAB, "drizzle", "prisma", "postgres", "redis", "auth", "token", "deploy", "café", "kubernetes"]
PROJECTS = ["shop-api", "auth-svc", "web", "infra", "mobile", "billing", None]
KINDS = ["fact", "decision", "preference", "project"]


class NoteFields(TypedDict):
    kind: str
    title: str
    body: str
    tags: list[str]
    project: str | None


# A team's everyday words, the vocabulary of a notebook where a word is in about a quarter of the notes (as "deploy",
# "api" or "test" are in a real team's): the common-word notebook of bench_server.py --common.
COMMON = """
    api app auth backend billing branch bug build cache ci cli client cluster code commit config container cost cron
    css data database debug decision deploy design dev docker docs domain endpoint env error event feature fix flag
    frontend function git gateway graphql health host http image incident index infra issue job json key kubernetes
    lambda latency library lint load log login merge metric migration mobile model monitor network node oauth on-call
    package page payment performance pipeline plan policy pool postgres prod python query queue rate react redis
    release repo request review role rollback route rust schema script sdk secret security server service session
    shard sql staging storage stream team terraform test timeout token trace typescript ui upgrade user version web
    webhook worker
""".split()  # noqa: SIM905


def note_fields(rnd: random.Random, words: list[str] = WORDS) -> NoteFields:
    return {
        "kind": rnd.choice(KINDS),
        "title": " ".join(rnd.choices(words, k=rnd.randint(3, 8))).capitalize(),
        "body": " ".join(rnd.choices(words, k=rnd.randint(10, 60))) + ".",
        "tags": rnd.sample(words[:200], k=rnd.randint(0, 3)),
        "project": rnd.choice(PROJECTS),
    }


def write_log(data_dir: Path, n: int, seed: int = 1, words: list[str] = WORDS) -> None:
    """A realistic log of n notes (written directly: filling it through fsync'd appends would take minutes), of
    `words` (COMMON: a notebook of common words)."""
    rnd = random.Random(seed)
    (data_dir / "log").mkdir(parents=True, exist_ok=True)
    by = Author(agent="cursor", client="cursor-vscode 1.7")
    base = 1_760_000_000_000
    with open(data_dir / "log" / "seed-0001.jsonl", "wb") as fh:
        for i in range(1, n + 1):
            data = {"id": f"01SEED{i:020d}", "fields": dict(note_fields(rnd, words))}
            fh.write(Op("seed-0001", i, base + i * 1000, 0, "note.set", data, by).encode())


@contextlib.contextmanager
def machines_on_one_log(
    root: Path, start_ms: int, count: int = 3
) -> Iterator[tuple[list[Store], list[int], list[int]]]:
    """`count` installs (root/m0, root/m1, ...) writing one log folder (root/log, as a synced folder is), each with a
    wall clock of its own: `now[0]` is real time, `skew[i]` how far machine i's clock is ahead of it. Yields (stores,
    now, skew); closes the stores."""
    now, skew = [start_ms], [0] * count
    stores = [
        Store(root / f"m{i}", now_ms=lambda i=i: now[0] + skew[i], log_dir=root / "log")  # type: ignore[misc]
        for i in range(count)
    ]
    for store in stores:
        store.open()
    try:
        yield stores, now, skew
    finally:
        for store in stores:
            store.close()


HOUR, DAY = 3_600_000, 86_400_000
CURSOR = Author("cursor", "cursor-vscode 1.7", "ann")
CODEX = Author("codex", "codex-cli 0.5", "bob")


def seed_times(data_dir: Path, now: int) -> dict[str, str]:
    """Three notes written at known times (a log another machine wrote): 10 days ago, 2 days ago, an hour ago."""
    (data_dir / "log").mkdir(parents=True)
    notes = {
        "old": ("01TIMEOLD0000000000000000A", now - 10 * DAY, CURSOR, "Drizzle for shop-api"),
        "recent": ("01TIMERECENT00000000000000", now - 2 * DAY, CODEX, "Drizzle migrations on deploy"),
        "fresh": ("01TIMEFRESH000000000000000", now - HOUR, CURSOR, "Drizzle pool size 10"),
    }
    with open(data_dir / "log" / "other-0001.jsonl", "wb") as fh:
        for seq, (note_id, wall, by, title) in enumerate(notes.values(), start=1):
            data = {"id": note_id, "fields": {"kind": "decision", "title": title, "project": "shop-api"}}
            fh.write(Op("other-0001", seq, wall, 0, "note.set", data, by).encode())
    return {name: spec[0] for name, spec in notes.items()}


@contextlib.contextmanager
def indexed_store(data_dir: Path, n: int) -> Iterator[Store]:
    """`write_log`'s n notes, opened read-only with the search index built."""
    write_log(data_dir, n)
    with Store(data_dir, readonly=True) as opened:
        with opened.reading() as state:
            refresh_note_index(state)
        yield opened
