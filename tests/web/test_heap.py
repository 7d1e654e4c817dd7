"""The C heap of a long-running server: glibc's arenas are capped (hivenote.server.heap says why), so threads that
come and go (worker threads, the meaning index's build, the tokenizer's pool) do not each keep an arena of freed
memory. Checked on a real `hivenote serve` with meaning search on, by counting its arenas in /proc/<pid>/maps."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.parse
from pathlib import Path

import pytest

from hivenote.server.heap import ARENAS
from tests.support.live import call
from tests.support.load import start_server
from tests.support.wait import wait_until

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or os.confstr("CS_GNU_LIBC_VERSION") is None,
    reason="glibc's arenas exist only on Linux with glibc",
)

HEAP_MAX = 64 << 20  # glibc's reservation for each arena but the main one, on 64-bit


def arenas(pid: int) -> int:
    """The process's arenas besides the main heap. Each has one or more heaps, each a 64 MiB-aligned anonymous
    reservation (its used part read-write, the rest inaccessible) that starts with the address of its arena
    (glibc's `heap_info.ar_ptr`): the distinct addresses are the arenas (a busy arena grows a second heap)."""
    rows = []
    for line in Path(f"/proc/{pid}/maps").read_text(encoding="ascii").splitlines():
        fields = line.split()
        lo, hi = (int(x, 16) for x in fields[0].split("-"))
        rows.append((lo, hi, fields[1], len(fields) > 5))
    owners = set()
    with open(f"/proc/{pid}/mem", "rb") as mem:  # our own child: readable
        for i, (lo, hi, perm, named) in enumerate(rows):
            if lo % HEAP_MAX or named or perm != "rw-p":
                continue
            end = hi
            if i + 1 < len(rows) and rows[i + 1][:1] == (hi,) and rows[i + 1][2] == "---p" and not rows[i + 1][3]:
                end = rows[i + 1][1]
            if end - lo == HEAP_MAX:
                mem.seek(lo)
                owners.add(int.from_bytes(mem.read(8), sys.byteorder))
    return len(owners)


def test_serve_keeps_to_two_arenas_with_meaning_search_at_work(tmp_path: Path) -> None:
    env_arenas = os.environ.pop("MALLOC_ARENA_MAX", None)  # the server's own cap is what is tested
    try:
        process, url = start_server(tmp_path, tmp_path / "serve.log")
    finally:
        if env_arenas is not None:
            os.environ["MALLOC_ARENA_MAX"] = env_arenas
    try:
        port = int(url.rsplit(":", 1)[1])
        token = json.loads((tmp_path / "tokens.json").read_text(encoding="utf-8"))["default"]
        topics = [
            "The pocket app sends its crash reports to Sentry",
            "Deploys go out on Tuesdays after review",
            "The team prefers tabs in Go code",
            "Postgres backups run nightly at two",
        ]
        for i in range(40):
            call(port, token, "POST", "/api/notes", {"kind": "fact", "title": f"Note {i}", "body": topics[i % 4]})
        # The index's first pass is written to its cache file when done: worker threads and the tokenizer's pool
        # have run by then. Questions then embed in the request's thread.
        wait_until((tmp_path / "cache" / "meaning.bin").is_file, what="the meaning index was never built")
        for words in ("where do phone failures get logged?", "when do we ship?", "which indentation style?"):
            call(port, token, "GET", "/api/notes?" + urllib.parse.urlencode({"q": words}))
        # Capped: one arena besides the main heap when run alone; in the full suite (coverage in the child) two
        # were seen, cause not found. Uncapped, the same server has five.
        assert arenas(process.pid) <= ARENAS
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_an_arena_cap_in_the_environment_wins() -> None:
    code = "from hivenote.server.heap import limit_arenas; print(limit_arenas())"
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    for setting, applied in ((None, "True"), ("8", "False")):
        run_env = env if setting is None else {**env, "MALLOC_ARENA_MAX": setting}
        out = subprocess.run(
            [sys.executable, "-c", code], env=run_env, capture_output=True, text=True, encoding="utf-8", check=True
        )
        assert out.stdout.strip() == applied


BIG_BLOCKS = """
import sys
from hivenote.server.heap import return_big_blocks

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20

if sys.argv[1] == "fixed":
    assert return_big_blocks()
first = [0] * 100_000  # a big block freed: glibc (unless fixed) maps blocks this big from the heap from now on
del first
before = rss()
blocks, kept = [], []
for i in range(40):  # a pass's lists, 800 KB each, 32 MB in all, and after each a small block that stays (a cache
    blocks.append([i] * 100_000)  # entry, an answer being written)
    kept.append(bytes(600))
del blocks
print(rss() - before)
"""


@pytest.mark.parametrize("threshold", ["fixed", "glibc's own"])
def test_a_big_block_a_pass_frees_goes_back_to_the_system(threshold: str) -> None:
    """A pass over a big notebook (the list's order, a question's matches) allocates 100k-entry lists and sets for
    the moment. glibc's own threshold kept their pages once any such block had been freed before (a small block
    allocated after them pins the heap's top): `hivenote serve` at 100k notes grew 27 MB over a list, the status and
    one question. With the threshold fixed (`return_big_blocks`, which `hivenote serve` and the tray ask for first),
    they go back at once."""
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_MMAP_THRESHOLD_"}
    out = subprocess.run(
        [sys.executable, "-c", BIG_BLOCKS, "fixed" if threshold == "fixed" else "own"],
        env=env,
        capture_output=True,
        text=True,
        encoding="utf-8",
        check=True,
    )
    left = float(out.stdout)
    if threshold == "fixed":
        assert left < 4, f"{left:.1f} MB of freed blocks kept"
    else:  # the failure the fix is for, seen on this very allocator
        assert left > 24, f"glibc's own threshold kept only {left:.1f} MB"
