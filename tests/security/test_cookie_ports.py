"""Cookies do not keep ports apart (issue 33): a browser sends the dashboard's sign-in cookie for 127.0.0.1 to a
server of another account on any other port of 127.0.0.1 that it visits. That server replaying the cookie, with
every header the dashboard sends, gets nothing: the page's key, kept in its own origin's storage, goes with it."""

from __future__ import annotations

import urllib.request
from pathlib import Path

from tests.support.live import exchange, fetch, serve, signed_in

CLIENT = "hivenote-dashboard/0.1.0"


def test_the_sign_in_cookie_replayed_without_the_pages_key_opens_nothing(tmp_path: Path) -> None:
    with serve(tmp_path / "data") as running:
        signed = signed_in(running, CLIENT)
        assert fetch(running.url + "/api/notes", signed)[0] == 200
        replayed = {k: v for k, v in signed.items() if k != "X-Hivenote-Key"}  # all another port's server was sent
        key = signed["X-Hivenote-Key"]
        for wrong in (
            {},
            {"X-Hivenote-Key": "0" * 64},
            {"X-Hivenote-Key": key[:-1] + ("1" if key[-1] == "0" else "0")},
        ):
            status, _, body = fetch(running.url + "/api/notes", {**replayed, **wrong})
            assert status == 401 and "hivenote open" in body["error"]["message"], (wrong, body)
            for method, path, data in (("POST", "/api/tokens", b'{"name": "mallory"}'), ("GET", "/api/settings", None)):
                headers = {**replayed, **wrong, "Content-Type": "application/json"}
                request = urllib.request.Request(running.url + path, data, headers, method=method)
                assert exchange(request)[0] == 401, (method, path)
        assert running.tokens.people() == []
