"""`hivenote sync ...` on real data dirs: status without a server, the folder move and back, peers added with a
generated shared token, and the refusals that keep one way of syncing at a time."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from hivenote.server.cli import main as cli
from hivenote.server.core.errors import InvalidInput
from hivenote.server.settings import load_settings, save_setting
from hivenote.server.tokens import Tokens
from tests.support.live import exchange


def run(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(list(args), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def data(tmp_path: Path) -> Path:
    data_dir = tmp_path / "data"
    assert run("--data-dir", str(data_dir), "remember", "--kind", "fact", "--title", "Staging is read-only")[0] == 0
    return data_dir


def test_status_without_a_server(data: Path) -> None:
    code, out, _ = run("--data-dir", str(data), "sync", "status")
    assert code == 0
    assert f"log folder: {data / 'log'}" in out
    assert "No sync set up" in out and "The server is not running" in out
    report = json.loads(run("--data-dir", str(data), "--json", "sync", "status")[1])
    assert report["running"] is False and report["transports"] == [] and report["peers"] == []
    assert report["nodes"][report["node"]]["ops"] == 1


def test_folder_there_and_back(data: Path, tmp_path: Path) -> None:
    synced = tmp_path / "Sync" / "hivenote"
    code, out, err = run("--data-dir", str(data), "sync", "folder", str(synced))
    assert code == 0, err
    assert load_settings(data_dir=data).log_path == synced.resolve()
    assert list(synced.glob("*.jsonl")) and not list((data / "log").glob("*.jsonl"))
    code, out, _ = run("--data-dir", str(data), "list", "--json")
    assert code == 0 and json.loads(out)["results"][0]["title"] == "Staging is read-only"  # read from the new folder
    assert run("--data-dir", str(data), "sync", "folder", "--default")[0] == 0
    assert load_settings(data_dir=data).log_dir == ""
    assert (
        json.loads(run("--data-dir", str(data), "list", "--json")[1])["results"][0]["title"] == "Staging is read-only"
    )
    assert run("--data-dir", str(data), "sync", "folder")[0] == 1  # neither a path nor --default


def test_peer_add_shares_a_generated_token_then_list_and_remove(data: Path) -> None:
    code, out, err = run("--data-dir", str(data), "sync", "peer", "add", "http://laptop.tail:7788")
    assert code == 0, err
    token = next(word for word in out.split() if word.startswith("hn_peer_"))
    assert "hivenote sync peer add <this machine's URL> --token " + token in out
    assert "Share on LAN" in out  # this one listens on loopback only
    assert Tokens(data / "tokens.json").owner(token) is not None  # accepted here for the peer's pulls
    listed = json.loads(run("--data-dir", str(data), "--json", "sync", "peer", "list")[1])
    assert [p["url"] for p in listed] == ["http://laptop.tail:7788"] and "token" not in listed[0]
    assert run("--data-dir", str(data), "sync", "peer", "remove", "http://laptop.tail:7788")[0] == 0
    assert "No peers" in run("--data-dir", str(data), "sync", "peer", "list")[1]
    assert run("--data-dir", str(data), "sync", "peer", "remove", "http://laptop.tail:7788")[0] == 3  # not found


def test_one_way_of_syncing_at_a_time(data: Path, tmp_path: Path) -> None:
    assert run("--data-dir", str(data), "sync", "peer", "add", "http://laptop.tail:7788", "--token", "x" * 24)[0] == 0
    code, _, err = run("--data-dir", str(data), "sync", "folder", str(tmp_path / "Sync"))
    assert code == 1 and "Use one way to sync" in err and "peer remove" in err
    assert not (tmp_path / "Sync").exists() and load_settings(data_dir=data).log_dir == ""
    run("--data-dir", str(data), "sync", "peer", "remove", "http://laptop.tail:7788")
    assert run("--data-dir", str(data), "sync", "folder", str(tmp_path / "Sync"))[0] == 0
    code, _, err = run("--data-dir", str(data), "sync", "peer", "add", "http://laptop.tail:7788", "--token", "x" * 24)
    assert code == 1 and "Move the log back first" in err
    code, _, err = run("--data-dir", str(data), "sync", "s3", "notes")
    assert code == 1 and "Move the log back first" in err
    assert load_settings(data_dir=data).s3_bucket == ""


def test_s3_off_and_a_missing_bucket_name(data: Path) -> None:
    save_setting(data, "s3_bucket", "notes")
    code, out, _ = run("--data-dir", str(data), "sync", "s3", "--off")
    assert code == 0 and "Nothing in the bucket was deleted" in out
    assert load_settings(data_dir=data).s3_bucket == ""
    assert run("--data-dir", str(data), "sync", "s3")[0] == 1


def test_a_peer_token_only_syncs(tmp_path: Path) -> None:
    """Served for real: the shared peer token opens /sync and nothing else; people cannot take peer names."""
    import urllib.request

    from hivenote.server.settings import Settings
    from hivenote.server.storage.store import Store
    from hivenote.server.sync.peer import add_peer
    from hivenote.server.web.app import create_app
    from hivenote.server.web.serve import ServerThread, bind

    data_dir = tmp_path / "data"
    token = "hn_peer_" + "k" * 30
    add_peer(data_dir, "http://laptop.tail:7788", token)
    with pytest.raises(InvalidInput, match="for peer tokens"):
        Tokens(data_dir / "tokens.json").add("peer-bob")

    def status(path: str) -> int:
        return exchange(urllib.request.Request(url + path, headers={"Authorization": f"Bearer {token}"}))[0]

    sock = bind("127.0.0.1", 0)
    settings = Settings(data_dir=data_dir, port=sock.getsockname()[1])
    with Store(data_dir) as store:
        server = ServerThread(create_app(settings, store), settings, sock)
        server.start()
        while not server.started and server.thread.is_alive():
            server.thread.join(0.05)
        url = f"http://127.0.0.1:{server.port}"
        try:
            assert status("/sync/shards") == 200
            assert status("/api/notes") == 403
            assert status("/mcp") == 403
        finally:
            server.stop()
