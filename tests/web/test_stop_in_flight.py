"""A request still being answered when the server stops: cancelled after the graceful wait, said in one warning line,
never as the app's failure with a traceback (a fault run's stop under load met it: a peer's listing still running)."""

from __future__ import annotations

import logging
import socket
from pathlib import Path

import pytest

from hivenote.server.settings import Settings
from hivenote.server.storage.store import Store
from hivenote.server.tokens import Tokens
from hivenote.server.web.app import create_app
from hivenote.server.web.serve import ServerThread, bind
from tests.support.wait import wait_until


def test_a_request_cancelled_by_the_stop_is_one_warning_not_a_traceback(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data_dir = tmp_path / "data"
    sock = bind("127.0.0.1", 0)
    settings = Settings(data_dir=data_dir, port=sock.getsockname()[1])
    token = Tokens(data_dir / "tokens.json").default()
    uvicorn_log = logging.getLogger("uvicorn.error")  # uvicorn's loggers do not reach the root logger
    try:
        with Store(data_dir) as store:
            server = ServerThread(create_app(settings, store), settings, sock)
            uvicorn_log.addHandler(caplog.handler)  # after uvicorn set its logging up (which drops other handlers)
            server.start()
            wait_until(lambda: server.started or not server.thread.is_alive())
            assert server.started, server.error
            with socket.create_connection(("127.0.0.1", server.port)) as client:
                # A create whose body never finishes arriving: the request is being answered when the stop comes.
                client.sendall(
                    b"POST /api/notes HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    + f"Authorization: Bearer {token}\r\nContent-Length: 100\r\n\r\n".encode()
                    + b'{"kind": "fact"'
                )
                wait_until(lambda: bool(server.server.server_state.tasks), what="the request being answered")
                server.stop()  # waits timeout_graceful_shutdown (3 s) for the request, then cancels it
                assert b" 500 " in client.recv(4096).split(b"\r\n", 1)[0]
    finally:
        uvicorn_log.removeHandler(caplog.handler)
    said = [r for r in caplog.records if r.name == "uvicorn.error" and r.levelno >= logging.WARNING]
    assert [r for r in said if "was cancelled" in r.getMessage()], [r.getMessage() for r in said]
    assert not [r for r in said if r.exc_info], "a cancelled request logged with a traceback"
