"""`hivenote sync peer add` takes the shared token on stdin or from a file (issue 14 item 13): on the command line
(`--token`) every account on the machine reads it in `ps`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from hivenote.server.sync.peerbook import list_peers, peer_token_name
from hivenote.server.tokens import Tokens

pytestmark = pytest.mark.system  # the CLI as processes

TOKEN = "hn_peer_" + "s" * 32


def hivenote(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "hivenote.server.cli", *args]
    return subprocess.run(argv, input=stdin, capture_output=True, encoding="utf-8", timeout=120, check=False)


def test_the_peer_token_can_come_from_stdin_or_a_file_and_never_from_argv(tmp_path: Path) -> None:
    data = tmp_path / "data"
    done = hivenote(
        "--data-dir", str(data), "sync", "peer", "add", "http://a.example:7788", "--token-file", "-", stdin=TOKEN + "\n"
    )
    assert done.returncode == 0, done.stderr
    secret = tmp_path / "token.txt"
    secret.write_text(TOKEN + "\n", encoding="utf-8")
    done = hivenote(
        "--data-dir", str(data), "sync", "peer", "add", "http://b.example:7788", "--token-file", str(secret)
    )
    assert done.returncode == 0, done.stderr
    assert {p.url: p.token for p in list_peers(data)} == {
        "http://a.example:7788": TOKEN,
        "http://b.example:7788": TOKEN,
    }
    assert Tokens(data / "tokens.json").owner(TOKEN) == peer_token_name(TOKEN)
    assert "--token-file" in hivenote("sync", "peer", "add", "--help").stdout


def test_an_empty_or_missing_token_file_is_refused_and_adds_nothing(tmp_path: Path) -> None:
    data = tmp_path / "data"
    empty = hivenote("--data-dir", str(data), "sync", "peer", "add", "http://a.example:7788", "--token-file", "-")
    missing = hivenote(
        "--data-dir", str(data), "sync", "peer", "add", "http://a.example:7788", "--token-file", str(tmp_path / "no")
    )
    assert empty.returncode == 1 and "no token" in empty.stderr, empty.stderr
    assert missing.returncode == 1 and "cannot read" in missing.stderr, missing.stderr
    assert not (data / "peers.json").exists()
