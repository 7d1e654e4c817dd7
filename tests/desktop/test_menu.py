"""The tray menu as data, for every server state: labels, what is enabled, what is checked, and the actions."""

from __future__ import annotations

import pytest

from hivenote.desktop.menu import SEPARATOR, Item, build_menu, status_line
from hivenote.desktop.supervisor import AgentOnline, Status

CLIENTS = (("cursor", "Cursor"), ("claude-code", "Claude Code"), ("codex", "Codex"))
RUNNING = Status("running", "127.0.0.1:7788")


def labels(items: tuple[Item, ...]) -> list[str]:
    return [i.label for i in items]


def find(items: tuple[Item, ...], prefix: str) -> Item:
    return next(i for i in items if i.label.startswith(prefix))


def test_running_menu_top_to_bottom() -> None:
    menu = build_menu(RUNNING, autostart=False, clients=CLIENTS)
    assert labels(menu) == [
        "Running on 127.0.0.1:7788",
        "No agents online",
        "-",
        "Stop server",
        "Open dashboard",
        "Copy connect snippet",
        "-",
        "Share on LAN",
        "Start at login",
        "Open data folder",
        "-",
        "Quit Hivenote",
    ]
    assert menu[2] == SEPARATOR and menu[2].separator
    assert not menu[0].enabled and not menu[1].enabled  # status lines are not clickable
    assert find(menu, "Stop server").action == "toggle-server"
    dashboard = find(menu, "Open dashboard")
    assert dashboard.enabled and dashboard.default and dashboard.action == "open-dashboard"
    snippets = find(menu, "Copy connect snippet")
    assert [(c.label, c.action) for c in snippets.children] == [
        ("Cursor", "copy:cursor"),
        ("Claude Code", "copy:claude-code"),
        ("Codex", "copy:codex"),
    ]
    assert find(menu, "Share on LAN").checked is False
    assert find(menu, "Start at login").checked is False
    assert find(menu, "Quit").action == "quit"
    assert all(i.checked is None for i in menu if i.label not in ("Share on LAN", "Start at login"))


@pytest.mark.parametrize(
    ("status", "line", "toggle", "toggle_enabled", "dashboard"),
    [
        (Status("stopped", "127.0.0.1:7788"), "Server stopped", "Start server", True, False),
        (Status("starting", "127.0.0.1:7788"), "Starting…", "Start server", False, False),
        (
            Status("error", "127.0.0.1:7788", message="port 7788 on 127.0.0.1 is already in use"),
            "Error: port 7788 on 127.0.0.1 is already in use",
            "Start server",
            True,
            False,
        ),
        (RUNNING, "Running on 127.0.0.1:7788", "Stop server", True, True),
        (
            Status("running", "127.0.0.1:7788", sharing=True, share_urls=("http://192.168.1.20:7788/",)),
            "Shared on LAN: http://192.168.1.20:7788/",
            "Stop server",
            True,
            True,
        ),
        (Status("running", "127.0.0.1:7788", sharing=True), "Running, shared on LAN", "Stop server", True, True),
    ],
)
def test_every_state(status: Status, line: str, toggle: str, toggle_enabled: bool, dashboard: bool) -> None:
    menu = build_menu(status, autostart=True, clients=CLIENTS)
    assert menu[0].label == line
    assert menu[3].label == toggle and menu[3].enabled is toggle_enabled
    assert find(menu, "Open dashboard").enabled is dashboard
    assert find(menu, "Start at login").checked is True
    assert find(menu, "Share on LAN").checked is status.sharing
    assert find(menu, "Share on LAN").enabled is (status.server != "starting")
    assert find(menu, "Copy connect snippet").enabled  # snippets need no running server
    assert find(menu, "Quit").enabled


def test_long_errors_are_cut_in_the_menu_but_whole_in_the_title() -> None:
    message = "Hivenote is already running for this data dir (pid 4242): /home/ada/.local/share/hivenote. Use it."
    status = Status("error", "127.0.0.1:7788", message=message)
    assert len(status_line(status)) == 70 and status_line(status).endswith("…")
    assert status.title == f"Hivenote — error: {message}"


def test_agents_submenu_lists_names_and_last_seen() -> None:
    status = Status(
        "running",
        "127.0.0.1:7788",
        agents=(AgentOnline("Cursor", "just now"), AgentOnline("Codex (alice)", "1 minute ago")),
    )
    agents = build_menu(status, autostart=False, clients=CLIENTS)[1]
    assert agents.label == "Agents online (2)"
    assert [(c.label, c.enabled) for c in agents.children] == [
        ("Cursor — just now", False),
        ("Codex (alice) — 1 minute ago", False),
    ]
    assert status.title == "Hivenote — running · 2 agents online: Cursor, Codex (alice)"


def test_one_agent_title_is_singular_and_stopped_menu_says_so() -> None:
    assert Status("running", "x", agents=(AgentOnline("Cursor", "just now"),)).title == (
        "Hivenote — running · 1 agent online: Cursor"
    )
    stopped = build_menu(Status("stopped", "x"), autostart=False, clients=CLIENTS)
    assert stopped[1] == Item("Agents: server not running", enabled=False)
    assert Status("stopped", "x").title == "Hivenote — stopped"


def test_lan_sharing_needs_auth() -> None:
    menu = build_menu(Status("running", "x", auth=False), autostart=False, clients=CLIENTS)
    lan = find(menu, "Share on LAN")
    assert not lan.enabled and "needs auth" in lan.label


def test_equal_states_give_equal_menus() -> None:
    # the tray redraws only when the menu changes; equal inputs must compare equal
    one = build_menu(RUNNING, autostart=False, clients=CLIENTS)
    two = build_menu(Status("running", "127.0.0.1:7788"), autostart=False, clients=CLIENTS)
    assert one == two
    assert one != build_menu(RUNNING, autostart=True, clients=CLIENTS)


def test_sync_problems_are_listed_under_the_status_line() -> None:
    status = Status("running", "127.0.0.1:7788", sync_problems=("s3: bucket notes: access denied",))
    menu = build_menu(status, autostart=False, clients=CLIENTS)
    assert menu[1] == Item("Sync problem: s3: bucket notes: access denied", enabled=False)
    assert menu[2].label == "No agents online"


def test_a_storage_problem_comes_first_in_the_menu_the_title_and_the_icon() -> None:
    status = Status("running", "127.0.0.1:7788", storage_problem="The disk holding /d/log is full: ...")
    menu = build_menu(status, autostart=False, clients=CLIENTS)
    assert menu[1] == Item("Cannot save notes: The disk holding /d/log is full: ...", enabled=False)
    assert (
        status.title
        == "Hivenote — running · no agents online · cannot save notes: The disk holding /d/log is full: ..."
    )
    assert status.warning and not Status("running", "127.0.0.1:7788").warning
