"""The tray menu as data, for every server state: labels, what is enabled, what is checked, and the actions."""

from __future__ import annotations

import pytest

from hivenote.desktop.menu import SEPARATOR, STATUS_LABEL_MAX, Item, build_menu, error_lines, status_line
from hivenote.desktop.supervisor import AGENT_NAME_MAX, AgentOnline, Status, agents_online
from hivenote.server.agents import AgentTracker, author_for

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
        "Connect an agent",
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
    connect = find(menu, "Connect an agent")  # the window's connect dialog, the change shown before it is made
    assert [(c.label, c.action) for c in connect.children] == [
        ("Cursor", "connect:cursor"),
        ("Claude Code", "connect:claude-code"),
        ("Codex", "connect:codex"),
    ]
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
        (Status("stopped", "127.0.0.1:7788"), "Server stopped", "Start server", True, True),
        (Status("starting", "127.0.0.1:7788"), "Starting…", "Start server", False, False),
        (
            Status("error", "127.0.0.1:7788", message="port 7788 on 127.0.0.1 is already in use"),
            "Error: port 7788 on 127.0.0.1 is already in use",
            "Start server",
            True,
            True,
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
    assert find(menu, "Copy connect snippet").enabled  # snippets need no running server (only the port)
    assert find(menu, "Quit").enabled


def test_a_long_error_goes_on_several_menu_lines_so_what_to_do_is_not_cut_off() -> None:
    """Issue 35: the port-busy line was cut before "tries again every 5 s" (the menu line kept 70 characters)."""
    message = (
        "port 7788 on 127.0.0.1 is already in use by another program. Hivenote tries it again every 5 s; or choose "
        "Use another port."
    )
    status = Status("error", "127.0.0.1:7788", message=message, port_busy=True)
    menu = build_menu(status, autostart=False, clients=CLIENTS)
    lines = [i.label for i in menu[: menu.index(find(menu, "Agents"))]]
    assert all(len(line) <= STATUS_LABEL_MAX and not find(menu, line).enabled for line in lines)
    assert " ".join(lines) == f"Error: {message}"  # whole, and in order
    assert status.title == f"Hivenote — error: {message}"


def test_an_endless_error_is_cut_after_a_few_lines_but_whole_in_the_title() -> None:
    message = "Hivenote could not start: " + "a very long reason " * 40
    status = Status("error", "127.0.0.1:7788", message=message)
    lines = error_lines(message)
    assert len(lines) == 4 and lines[-1].endswith("…") and all(len(line) <= STATUS_LABEL_MAX for line in lines)
    assert build_menu(status, autostart=False, clients=CLIENTS)[:4] == tuple(
        Item(line, enabled=False) for line in lines
    )
    assert status_line(status) == lines[0]
    assert status.title == f"Hivenote — error: {message}"


def test_copy_connect_snippet_is_off_while_another_program_holds_the_port() -> None:
    """Issue 35: the snippets stayed on and copied the address another program answers at."""
    busy = Status("error", "127.0.0.1:7788", message="port 7788 is in use", port_busy=True)
    snippets = find(build_menu(busy, autostart=False, clients=CLIENTS), "Copy connect snippet")
    assert not snippets.enabled and "another program has the port" in snippets.label
    running = find(build_menu(RUNNING, autostart=False, clients=CLIENTS), "Copy connect snippet")
    assert running.enabled and running.label == "Copy connect snippet"


def test_open_dashboard_while_stopped_is_on_and_is_the_middle_click() -> None:
    """Issue 35: it was disabled while stopped, so the middle click (which runs it) did nothing at all."""
    for status in (Status("stopped", "x"), Status("error", "x", message="the server stopped unexpectedly")):
        dashboard = find(build_menu(status, autostart=False, clients=CLIENTS), "Open dashboard")
        assert dashboard.enabled and dashboard.default and dashboard.action == "open-dashboard"


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


def test_an_agent_with_a_300_character_name_stays_bounded_in_the_submenu_and_the_tooltip() -> None:
    """Issue 35: any MCP client names itself (clientInfo.name); 300 characters made the submenu as wide as the screen
    and the tooltip 300+ characters."""
    tracker = AgentTracker()
    tracker.record(author_for("Z" * 300, "1.0", None, ""))
    tracker.record(author_for("cursor", "1.8", None, ""))
    agents = agents_online(tracker, owner="")
    status = Status("running", "127.0.0.1:7788", agents=agents)
    submenu = find(build_menu(status, autostart=False, clients=CLIENTS), "Agents online").children
    assert max(len(entry.label) for entry in submenu) <= AGENT_NAME_MAX + len(" — just now")
    assert any(entry.label.startswith("ZZZ") and "…" in entry.label for entry in submenu)
    assert len(status.title) <= 2 * AGENT_NAME_MAX + len("Hivenote — running · 2 agents online: , ")
