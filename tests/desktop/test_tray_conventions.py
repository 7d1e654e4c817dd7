"""The real tray item as a panel and a screen reader meet it (StatusNotifierItem over a private session bus): an
accessible description and a tooltip that say the state, NeedsAttention in error, a middle click (GNOME's and the
specification's, which KDE sends) that opens the dashboard, menu changes that do not register the item again,
notifications that name the app, and a first-launch hint."""

from __future__ import annotations

import subprocess
import sys
from functools import partial
from pathlib import Path

import pytest
from gi.repository import GLib

from hivenote.desktop.tray import pystray_missing
from tests.support.harness import ITEM_INTERFACE, PROPERTIES, Desktop, TrayItem, start_desktop
from tests.support.live import free_port, taken_port
from tests.support.tray import WINDOW, App, entry, title
from tests.support.wait import eventually

WAIT_S = 30


def test_the_item_speaks_its_state_and_asks_for_attention_in_error(tmp_path: Path) -> None:
    with start_desktop(tmp_path) as desktop, taken_port() as (port, squatter):
        app = App(desktop, tmp_path / "data", port)
        item = desktop.tray_item()
        item.wait_for(lambda i: "already in use" in title(i), what="port in use")
        item.wait_for(lambda i: i.prop("Status") == "NeedsAttention", what="NeedsAttention in error")
        item.wait_for(lambda i: "already in use" in str(i.prop("IconAccessibleDesc")), what="a spoken description")
        squatter.close()
        item.wait_for(lambda i: title(i).startswith("Hivenote — running"), what="running")
        item.wait_for(lambda i: i.prop("Status") == "Active", what="Active when running")
        item.wait_for(lambda i: str(i.prop("IconAccessibleDesc")).startswith("Hivenote — running"), what="desc")
        item.click("Quit Hivenote")
        assert app.exit_code() == 0


@pytest.mark.parametrize(
    ("method", "args"),
    [
        ("XAyatanaSecondaryActivate", GLib.Variant("(u)", (0,))),  # GNOME's AppIndicator extension on a middle click
        ("SecondaryActivate", GLib.Variant("(ii)", (0, 0))),  # the specification's, which KDE Plasma sends
    ],
)
def test_a_middle_click_opens_the_dashboard(tmp_path: Path, method: str, args: GLib.Variant) -> None:
    with start_desktop(tmp_path) as desktop:
        app = App(desktop, tmp_path / "data", free_port())
        item = desktop.tray_item()
        item.wait_for(lambda i: title(i).startswith("Hivenote — running"), what="running")
        desktop.bus.call_sync(item.service, item.path, ITEM_INTERFACE, method, args, None, 0, 5000)
        assert desktop.find_window(WINDOW, WAIT_S) is not None, desktop.output("app")
        item.click("Quit Hivenote")
        assert app.exit_code() == 0


def test_the_item_has_a_tooltip_that_says_the_state(tmp_path: Path) -> None:
    """The specification's ToolTip (icon, pixmaps, title, text), which libayatana does not export itself: read by
    Get and GetAll as hosts do, and NewToolTip when the state changes."""
    with start_desktop(tmp_path) as desktop:
        app = App(desktop, tmp_path / "data", free_port())
        item = desktop.tray_item()
        item.wait_for(lambda i: title(i).startswith("Hivenote — running"), what="running")
        # The tooltip follows the title on GTK's next turn (pystray sets the title; the ToolTip is ours, set after).
        item.wait_for(lambda i: i.prop("ToolTip")[3].startswith("running · no agents"), what="the tooltip says running")
        icon, pixmaps, heading, text = item.prop("ToolTip")
        assert (icon, pixmaps, heading) == ("", [], "Hivenote") and text.startswith("running · no agents"), text
        every = desktop.bus.call_sync(
            item.service, item.path, PROPERTIES, "GetAll", GLib.Variant("(s)", (ITEM_INTERFACE,)), None, 0, 5000
        )
        assert every.unpack()[0]["ToolTip"][3] == text
        assert every.unpack()[0]["Title"] == title(item)  # libayatana's own properties are all still there
        changes: list[str] = []
        desktop.bus.signal_subscribe(
            item.service, ITEM_INTERFACE, "NewToolTip", item.path, None, 0, lambda *_: changes.append("new")
        )
        item.click("Stop server")
        item.wait_for(lambda i: i.prop("ToolTip")[3] == "stopped", what="the tooltip says stopped")
        context = GLib.MainContext.default()
        assert eventually(lambda: context.iteration(False) or changes, WAIT_S), "no NewToolTip signal"
        item.click("Quit Hivenote")
        assert app.exit_code() == 0


def test_menu_changes_do_not_register_the_item_again_and_notifications_name_the_app(tmp_path: Path) -> None:
    with start_desktop(tmp_path) as desktop:
        app = App(desktop, tmp_path / "data", free_port())
        item = desktop.tray_item()
        item.wait_for(lambda i: title(i).startswith("Hivenote — running"), what="running")
        before = desktop.registrations()
        for checked in (True, False, True, False):  # four menu changes
            item.click("Start at login")
            item.wait_for(partial(start_at_login_is, checked), what=f"checked={checked}")
        assert desktop.registrations() == before, f"{desktop.registrations() - before} registrations for 4 changes"
        item.click("Copy connect snippet", "Cursor")
        assert eventually(lambda: any("Cursor" in n["body"] for n in desktop.notifications()), WAIT_S)
        assert all(n["app"] == "Hivenote" for n in desktop.notifications()), desktop.notifications()
        item.click("Quit Hivenote")
        assert app.exit_code() == 0


def start_at_login_is(checked: bool, item: TrayItem) -> bool:
    return entry(item, "Start at login") == (True, checked)


def test_the_first_launch_says_where_hivenote_is(tmp_path: Path) -> None:
    with start_desktop(tmp_path) as desktop:
        app = App(desktop, tmp_path / "data", free_port())
        desktop.tray_item().wait_for(lambda i: title(i).startswith("Hivenote — running"), what="running")
        assert eventually(lambda: any("panel" in n["body"] for n in desktop.notifications()), WAIT_S), desktop.output(
            "app"
        )
        desktop.tray_item().click("Quit Hivenote")
        assert app.exit_code() == 0
        hints = sum("panel" in n["body"] for n in desktop.notifications())
        again = App(desktop, app.data_dir, free_port())  # the second launch: no hint again
        desktop.tray_item().wait_for(lambda i: title(i).startswith("Hivenote — running"), what="running again")
        desktop.tray_item().click("Quit Hivenote")
        assert again.exit_code() == 0
        assert sum("panel" in n["body"] for n in desktop.notifications()) == hints


def test_a_middle_click_while_the_server_is_stopped_starts_it_and_opens_the_dashboard(tmp_path: Path) -> None:
    """Issue 35: Open dashboard was disabled while stopped, and the middle click (which runs it) then did nothing."""
    with start_desktop(tmp_path) as desktop:
        app = App(desktop, tmp_path / "data", free_port())
        item = desktop.tray_item()
        item.wait_for(lambda i: title(i).startswith("Hivenote — running"), what="running")
        item.click("Stop server")
        item.wait_for(lambda i: title(i) == "Hivenote — stopped", what="stopped")
        item.wait_for(lambda i: entry(i, "Open dashboard") == (True, None), what="Open dashboard on while stopped")
        args = GLib.Variant("(ii)", (0, 0))
        desktop.bus.call_sync(item.service, item.path, ITEM_INTERFACE, "SecondaryActivate", args, None, 0, 5000)
        assert desktop.find_window(WINDOW, WAIT_S) is not None, desktop.output("app")
        item.wait_for(lambda i: title(i).startswith("Hivenote — running"), what="started, as a second launch does")
        item.click("Quit Hivenote")
        assert app.exit_code() == 0


def test_the_first_launch_with_the_port_taken_does_not_say_running(tmp_path: Path) -> None:
    """Issue 35: the first-launch notification said "running" while another program held the port."""
    with start_desktop(tmp_path) as desktop, taken_port() as (port, _):
        app = App(desktop, tmp_path / "data", port)
        item = desktop.tray_item()
        item.wait_for(lambda i: "already in use" in title(i), what="port in use")

        def hint() -> list[str]:
            return [n["body"] for n in desktop.notifications() if "panel" in n["body"]]

        assert eventually(hint, WAIT_S), desktop.output("app")
        (said,) = hint()
        assert "running" not in said.replace("not running", ""), said
        assert "already in use" in said and "Use another port" in said, said  # what is wrong, and what to do
        item.click("Quit Hivenote")
        assert app.exit_code() == 0


def test_what_the_tray_reads_of_pystray_beyond_its_interface_is_there_or_named(desktop: Desktop) -> None:
    """The appindicator extras (the menu changed in place, the description, the attention state) read pystray's
    internals, all in desktop/tray.py: this pystray has each of them (asked on the test desktop, where its backend
    loads), and a pystray without them is named (the tray then runs on pystray's own behaviour, as the log says)."""
    code = "from pystray import _appindicator as b; from hivenote.desktop.tray import pystray_missing; "
    code += "print(pystray_missing(b.Icon))"
    found = subprocess.run([sys.executable, "-c", code], env=desktop.env, capture_output=True, encoding="utf-8")
    assert (found.returncode, found.stdout) == (0, "[]\n"), found.stderr
    assert pystray_missing(object) == [
        "Icon._update_menu",
        "Icon._create_menu",
        "builtins.AppIndicator.IndicatorStatus",
    ]
