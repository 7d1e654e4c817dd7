"""The desktop harness against a minimal real pystray app: SNI registration, properties, the icon file, dbusmenu
reading and clicking by label, the XEmbed fallback in trayer, and a teardown that leaves no process behind."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.harness import Desktop, MenuEntry, start_desktop
from tests.support.wait import eventually

GREEN = (0, 187, 102, 255)
APP = f"""
import sys
from pathlib import Path
import pystray
from PIL import Image

clicks = Path(sys.argv[1])
checked = [False]

def say_hello(icon, item):
    clicks.write_text("hello", encoding="utf-8")

def toggle(icon, item):
    checked[0] = not checked[0]

def child(icon, item):
    icon.title = "Demo: child clicked"

icon = pystray.Icon("demo-tray", Image.new("RGBA", (64, 64), {GREEN}), "Demo: started", menu=pystray.Menu(
    pystray.MenuItem("Say _hello", say_hello),
    pystray.MenuItem("Check me", toggle, checked=lambda item: checked[0]),
    pystray.MenuItem("Never", say_hello, enabled=False),
    pystray.Menu.SEPARATOR,
    pystray.MenuItem("Submenu", pystray.Menu(pystray.MenuItem("Child", child))),
    pystray.MenuItem("Quit", lambda icon, item: icon.stop()),
))
try:
    icon.run()
except Exception as exc:  # stop() raises ServiceUnknown org.freedesktop.Notifications without a notification daemon
    print("icon.run:", exc, file=sys.stderr)
"""


def entry(
    label: str, *, enabled: bool = True, checked: bool | None = None, children: tuple[MenuEntry, ...] = ()
) -> MenuEntry:
    return MenuEntry(label, enabled, True, checked, children, separator=False)


def start_app(desktop: Desktop, tmp_path: Path) -> tuple[subprocess.Popen[bytes], Path]:
    script, clicks = tmp_path / "demo_tray.py", tmp_path / "clicks.txt"
    script.write_text(APP, encoding="utf-8")
    env = {**desktop.env, "PYSTRAY_BACKEND": "appindicator"}
    return desktop.spawn("demo", [sys.executable, str(script), str(clicks)], env=env), clicks


def test_tray_item_exposes_title_icon_and_the_whole_menu(desktop: Desktop, tmp_path: Path) -> None:
    start_app(desktop, tmp_path)
    item = desktop.tray_item()
    assert item.path == "/org/ayatana/NotificationItem/demo_tray"
    assert (item.prop("Id"), item.prop("Title"), item.prop("Status")) == ("demo-tray", "Demo: started", "Active")
    assert Path(item.prop("IconName")).is_relative_to(desktop.root)
    icon = item.icon()
    assert icon.size == (64, 64)
    assert icon.getpixel((32, 32)) == GREEN
    assert item.menu() == [
        entry("Say _hello"),
        entry("Check me", checked=False),
        entry("Never", enabled=False),
        MenuEntry("", True, True, None, (), separator=True),
        entry("Submenu", children=(entry("Child"),)),
        entry("Quit"),
    ]


def test_click_by_label_runs_callbacks_and_wait_for_sees_the_result(desktop: Desktop, tmp_path: Path) -> None:
    _, clicks = start_app(desktop, tmp_path)
    item = desktop.tray_item()
    item.click("Say _hello")
    assert eventually(lambda: clicks.exists() and clicks.read_text(encoding="utf-8") == "hello", timeout=10)
    item.click("Check me")
    item.wait_for(lambda i: i.menu()[1].checked is True, what="Check me to be ticked")
    item.click("Submenu", "Child")
    item.wait_for(lambda i: i.prop("Title") == "Demo: child clicked", what="the title set by Child")
    with pytest.raises(LookupError, match=r"no menu item 'Nope' in Submenu; available: 'Child'"):
        item.click("Submenu", "Nope")
    with pytest.raises(LookupError, match=r"menu item 'Never' in the top level is disabled"):
        item.click("Never")
    with pytest.raises(AssertionError, match=r"(?s)never true.*Title='Demo: child clicked'.*Check me \[x\]"):
        item.wait_for(lambda i: False, timeout=0.2, what="never true")


def test_quit_exits_zero_the_watcher_drops_the_item_and_close_leaves_nothing(desktop: Desktop, tmp_path: Path) -> None:
    app, _ = start_app(desktop, tmp_path)
    desktop.tray_item().click("Quit")
    assert app.wait(10) == 0, desktop.output("demo")
    assert eventually(lambda: desktop.tray_items() == [], timeout=10)
    # xclip forks a background owner of the selection that no process group of ours contains.
    subprocess.run(["xclip", "-selection", "clipboard"], input=b"snippet", env=desktop.env, check=True)
    assert desktop.clipboard() == "snippet"
    desktop.close()
    desktop.close()
    assert desktop.processes() == []


def test_xembed_fallback_docks_in_trayer_and_the_keyboard_reaches_quit(tmp_path: Path) -> None:
    with start_desktop(tmp_path, watcher=False, trayer=True) as desktop:
        app, _ = start_app(desktop, tmp_path)
        icon = desktop.xembed_icon(classname="^demo-tray$")
        assert desktop.window_visible("^panel$")
        assert desktop.screenshot().size == (1280, 800)
        docked = desktop.screenshot(icon)
        assert docked.getpixel((docked.width // 2, docked.height // 2)) == GREEN[:3]
        assert desktop.click_xembed(icon) is not None, "the click opened no menu"
        desktop.key("Up", "Return")  # Up from no selection wraps to the last item: Quit
        assert app.wait(10) == 0, desktop.output("demo")
