"""State files changed by several processes at once (issue 14 item 3): real processes racing on tokens.json,
peers.json and settings.json. Every change made is kept (no lost update, no revoked token coming back), every read
in between sees a whole file, and a damaged file is reported, never replaced by an empty one."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hivenote.server.core.errors import InvalidInput
from hivenote.server.settings import load_settings, save_setting
from hivenote.server.sync.peerbook import list_peers
from hivenote.server.tokens import Tokens

pytestmark = pytest.mark.system  # real processes racing on the state files

ROUNDS = 60
WAIT_S = 240

# Each writer owns its names, so the end state is known: every name added, the odd ones revoked again.
TOKEN_WRITER = """
import json, sys
from pathlib import Path
from hivenote.server.tokens import Tokens
path, prefix, rounds = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
kept = {}
for i in range(rounds):
    name = f"{prefix}{i}"
    kept[name] = Tokens(path).add(name)
    if i % 2:
        Tokens(path).revoke(name)
        del kept[name]
print(json.dumps(kept))
"""

TOKEN_READER = """
import sys, time
from pathlib import Path
from hivenote.server.tokens import Tokens
from hivenote.server.core.errors import HivenoteError
path, seconds = Path(sys.argv[1]), float(sys.argv[2])
tokens, failures, reads, until = Tokens(path), 0, 0, time.monotonic() + seconds
while time.monotonic() < until:
    try:
        tokens.people()
    except (HivenoteError, OSError, ValueError, KeyError):
        failures += 1
    reads += 1
print(failures, reads)
"""

PEER_WRITER = """
import sys
from pathlib import Path
from hivenote.server.sync.peerbook import add_peer, remove_peer
data, prefix, rounds = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
for i in range(rounds):
    url = f"http://{prefix}{i}.example:7788"
    add_peer(data, url, "hn_shared_peer_token_" + "x" * 24)
    if i % 2:
        remove_peer(data, url)
"""

SETTING_WRITER = """
import sys
from pathlib import Path
from hivenote.server.settings import save_setting

data, name, rounds = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
for i in range(rounds):
    save_setting(data, name, ["a.example", f"h{i}.example"] if name == "allowed_hosts" else 7000 + i)
"""


def _run(script: str, *args: object) -> subprocess.Popen[str]:
    argv = [sys.executable, "-c", textwrap.dedent(script), *(str(a) for a in args)]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, encoding="utf-8")


def _finish(process: subprocess.Popen[str]) -> str:
    out, err = process.communicate(timeout=WAIT_S)
    assert process.returncode == 0, err[-3000:]
    return out


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def test_token_changes_from_several_processes_at_once_are_all_kept(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    path = data / "tokens.json"
    owner = Tokens(path).default()
    writers = [_run(TOKEN_WRITER, path, prefix, ROUNDS) for prefix in ("cli-", "dash-", "third-")]
    reader = _run(TOKEN_READER, path, 3)
    kept: dict[str, str] = {}
    for writer in writers:
        kept |= json.loads(_finish(writer))
    failures, reads = map(int, _finish(reader).split())

    assert failures == 0, f"{failures} of {reads} reads saw a damaged tokens.json"
    tokens = Tokens(path)
    expected = {f"{p}{i}" for p in ("cli-", "dash-", "third-") for i in range(0, ROUNDS, 2)}
    assert {p.name for p in tokens.people()} == expected  # nothing lost, nothing revoked came back
    assert all(tokens.owner(token) == name for name, token in kept.items())  # every token printed "once" works
    assert tokens.owner(owner) == ""  # the owner's token was never re-minted
    assert _leftovers(data) == []


def test_peer_book_changes_from_several_processes_at_once_are_all_kept(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    writers = [_run(PEER_WRITER, data, prefix, ROUNDS // 2) for prefix in ("a", "b")]
    for writer in writers:
        _finish(writer)
    expected = {f"http://{p}{i}.example:7788" for p in ("a", "b") for i in range(0, ROUNDS // 2, 2)}
    assert {peer.url for peer in list_peers(data)} == expected
    assert _leftovers(data) == []


def test_settings_saved_from_several_processes_at_once_are_all_kept(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    writers = [_run(SETTING_WRITER, data, name, ROUNDS) for name in ("port", "allowed_hosts")]
    for writer in writers:
        _finish(writer)
    settings = load_settings(environ={}, data_dir=data)
    assert (settings.port, settings.allowed_hosts) == (7000 + ROUNDS - 1, ("a.example", f"h{ROUNDS - 1}.example"))
    assert _leftovers(data) == []


@pytest.mark.parametrize("content", [b"", b'{"default": "hn_abc", "people": [', b"\x00\x00\x00", b"[]"])
def test_a_damaged_token_file_is_reported_and_never_replaced(tmp_path: Path, content: bytes) -> None:
    """A server's Tokens outlives a damaged read. After one, main took the file for empty: 401 for everyone, then a
    new owner token saved over the file, and every person's token gone."""
    path = tmp_path / "tokens.json"
    Tokens(path).add("ana")
    tokens = Tokens(path)  # the server's, read while the file was good
    path.write_bytes(content)
    for _ in range(3):
        calls = (tokens.default, tokens.people, lambda: tokens.owner("hn_abc"), lambda: tokens.add("bo"))
        for call in (*calls, lambda: Tokens(path).default()):
            with pytest.raises(InvalidInput, match=r"tokens\.json.*(restore|fix)"):
                call()
    assert path.read_bytes() == content
    assert _leftovers(tmp_path) == []


def test_a_damaged_peer_book_or_settings_file_is_left_as_it_was(tmp_path: Path) -> None:
    from hivenote.server.sync.peerbook import add_peer

    (tmp_path / "peers.json").write_bytes(b'{"peers": [')
    (tmp_path / "settings.json").write_bytes(b"")
    with pytest.raises(InvalidInput, match=r"peers\.json"):
        add_peer(tmp_path, "http://a.example:7788", "hn_shared_peer_token_" + "x" * 24)
    with pytest.raises(InvalidInput, match=r"settings\.json.*fix or delete the file"):
        save_setting(tmp_path, "port", 7000)
    assert (tmp_path / "peers.json").read_bytes() == b'{"peers": ['
    assert (tmp_path / "settings.json").read_bytes() == b""
