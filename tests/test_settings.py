"""Settings: flags > environment > settings.json > defaults, and refusals that say what to do."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hivenote.server.core.errors import InvalidInput
from hivenote.server.settings import DEFAULT_PORT, Settings, is_loopback, load_settings


def test_flags_beat_the_environment_which_beats_the_file(tmp_path: Path) -> None:
    (tmp_path / "settings.json").write_text(json.dumps({"port": 9001, "graph_extras": True}), encoding="utf-8")
    from_file = load_settings(environ={}, data_dir=tmp_path)
    assert (from_file.port, from_file.graph_extras) == (9001, True)
    from_env = load_settings(environ={"HIVENOTE_PORT": "9002"}, data_dir=tmp_path)
    assert from_env.port == 9002
    from_flag = load_settings({"port": 9003, "host": None}, environ={"HIVENOTE_PORT": "9002"}, data_dir=tmp_path)
    assert (from_flag.port, from_flag.host) == (9003, "127.0.0.1")
    assert load_settings(environ={}, data_dir=tmp_path / "empty").port == DEFAULT_PORT


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"auth": False, "host": "0.0.0.0"}, "--no-auth is only allowed on a loopback address"),
        ({"port": 0}, "port must be between 1 and 65535"),
        ({"port": True}, "setting 'port' has an invalid value True"),
        ({"port": "http"}, "setting 'port' has an invalid value 'http'"),
        ({"max_body_bytes": -1}, "max_body_bytes must be at least"),
        ({"max_body_bytes": 1 << 20, "max_import_bytes": 1024}, "max_import_bytes must be at least max_body_bytes"),
        ({"auth": "maybe"}, "setting 'auth' has an invalid value 'maybe'"),
    ],
)
def test_unsafe_or_impossible_settings_are_refused_with_a_reason(
    tmp_path: Path, values: dict[str, object], message: str
) -> None:
    with pytest.raises(InvalidInput, match=message):
        load_settings(values, environ={}, data_dir=tmp_path)


def test_a_broken_settings_file_is_named_with_what_to_do(tmp_path: Path) -> None:
    (tmp_path / "settings.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(InvalidInput, match=r"settings\.json.*fix or delete the file"):
        load_settings(environ={}, data_dir=tmp_path)


def test_share_urls_say_where_teammates_open_it(tmp_path: Path) -> None:
    from hivenote.server.settings import lan_addresses

    assert Settings(data_dir=tmp_path).share_urls == []  # loopback: nobody else
    assert Settings(data_dir=tmp_path, host="192.168.1.20", port=7790).share_urls == ["http://192.168.1.20:7790/"]
    assert Settings(data_dir=tmp_path, host="fd00::5").share_urls == ["http://[fd00::5]:7788/"]
    every = Settings(data_dir=tmp_path, host="0.0.0.0").share_urls
    assert every == [f"http://{a}:7788/" for a in lan_addresses()]
    assert all(not is_loopback(url.split("/")[2].rsplit(":", 1)[0]) for url in every)


def test_save_setting_keeps_the_others_and_refuses_what_would_not_load(tmp_path: Path) -> None:
    from hivenote.server.settings import save_setting

    save_setting(tmp_path, "port", 7790)
    save_setting(tmp_path, "host", "0.0.0.0")
    assert load_settings({}, {}, data_dir=tmp_path).host == "0.0.0.0"
    save_setting(tmp_path, "host", None)
    assert json.loads((tmp_path / "settings.json").read_text(encoding="utf-8")) == {"port": 7790}
    save_setting(tmp_path, "auth", False)
    with pytest.raises(InvalidInput, match="only allowed on a loopback"):
        save_setting(tmp_path, "host", "0.0.0.0")
    assert json.loads((tmp_path / "settings.json").read_text(encoding="utf-8")) == {"auth": False, "port": 7790}
    with pytest.raises(InvalidInput, match="unknown setting"):
        save_setting(tmp_path, "colour", "blue")
