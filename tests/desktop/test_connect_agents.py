"""Connecting an agent from the real tray app (issue 35): a fresh install on a private desktop, whose home already has
Claude Code's, Cursor's and Gemini CLI's own config files with other servers and settings in them. Each agent is
connected in three actions (open the tray menu, choose Connect an agent > the agent, press Enter in the window that
shows the change), by the real `claude` and `gemini` commands (tests/tools) and a merge into Cursor's real file;
nothing else in those files is lost. The window is screenshotted at each step (test-artifacts/desktop/connect-*)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from PIL import Image

from tests.support.harness import Desktop, start_desktop
from tests.support.live import free_port
from tests.support.tray import App, has_brand_colour, title
from tests.support.wait import eventually

WAIT_S = 60
TOOLS = Path(__file__).resolve().parents[1] / "tools" / "node_modules" / ".bin"
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "desktop"
CLAUDE_BEFORE: dict[str, Any] = {
    "numStartups": 12,  # (Claude Code moves some keys itself as it writes, e.g. "theme": not ours to keep)
    "mcpServers": {"github": {"type": "http", "url": "https://api.githubcopilot.com/mcp/"}},
    "projects": {"/home/ana/shop": {"allowedTools": ["Bash(git status)"]}},
}
GEMINI_BEFORE = (
    '{\n    "theme": "Dracula",\n    "mcpServers": {\n        "fs": {"command": "npx", "args": ["-y"]}\n    }\n}\n'
)
CURSOR_BEFORE = '{\n  "mcpServers": {\n    "linear": {"url": "https://mcp.linear.app/sse"}\n  }\n}\n'


def save(image: Image.Image, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    image.save(ARTIFACTS / f"{name}.png")


def connect_from_the_tray(desktop: Desktop, agent: str, shot: str) -> str:
    """Actions 1 and 2: the menu, Connect an agent > agent (a panel opens the menu and the submenu on the way).
    Action 3: Enter in the window, on the Connect button the dialog has focused once it shows the change (the page's
    title, which the window takes, says so). Returns the window."""
    desktop.tray_item().click("Connect an agent", agent)
    window = desktop.find_window(f"^Hivenote — connect {agent}$", WAIT_S)
    assert window is not None, f"the window shows no connect dialog for {agent}\n{desktop.output('app')}"
    assert eventually(lambda: has_brand_colour(desktop.screenshot(window)), WAIT_S), "the dashboard did not render"
    save(desktop.screenshot(window), f"connect-{shot}-1-shown")
    desktop.xdotool("windowfocus", window)
    desktop.key("Return")
    assert desktop.find_window(f"^Hivenote — {agent} connected$", WAIT_S) == window, desktop.output("app")
    save(desktop.screenshot(window), f"connect-{shot}-2-done")
    return window


def test_claude_code_cursor_and_gemini_cli_connect_in_three_actions_each(tmp_path: Path) -> None:
    with start_desktop(tmp_path) as desktop:
        home = desktop.home
        (home / ".claude.json").write_text(json.dumps(CLAUDE_BEFORE, indent=2), encoding="utf-8")
        (home / ".gemini").mkdir()
        (home / ".gemini" / "settings.json").write_text(GEMINI_BEFORE, encoding="utf-8")
        (home / ".cursor").mkdir()
        (home / ".cursor" / "mcp.json").write_text(CURSOR_BEFORE, encoding="utf-8")
        desktop.env["PATH"] = f"{TOOLS}{os.pathsep}{desktop.env.get('PATH', '')}"  # the real claude and gemini
        port = free_port()
        app = App(desktop, tmp_path / "data", port)
        desktop.tray_item().wait_for(lambda i: title(i).startswith("Hivenote — running"), what="running")
        url = f"http://127.0.0.1:{port}/mcp"
        token = json.loads((app.data_dir / "tokens.json").read_text(encoding="utf-8"))["default"]

        connect_from_the_tray(desktop, "Claude Code", "claude-code")

        def claude_has_it() -> bool:
            servers = json.loads((home / ".claude.json").read_text(encoding="utf-8")).get("mcpServers", {})
            return "hivenote" in servers

        assert eventually(claude_has_it, WAIT_S), desktop.output("app")
        claude = json.loads((home / ".claude.json").read_text(encoding="utf-8"))
        assert claude["mcpServers"]["hivenote"] == {
            "type": "http",
            "url": url,
            "headers": {"Authorization": f"Bearer {token}"},
        }
        assert claude["mcpServers"]["github"] == CLAUDE_BEFORE["mcpServers"]["github"]  # nothing else lost
        assert claude["projects"] == CLAUDE_BEFORE["projects"] and claude["numStartups"] == 12

        connect_from_the_tray(desktop, "Cursor", "cursor")
        cursor_file = home / ".cursor" / "mcp.json"
        assert eventually(lambda: "hivenote" in cursor_file.read_text(encoding="utf-8"), WAIT_S), desktop.output("app")
        text = cursor_file.read_text(encoding="utf-8")
        assert text.startswith('{\n  "mcpServers": {\n    "linear": {"url": "https://mcp.linear.app/sse"},\n')
        assert json.loads(text)["mcpServers"]["hivenote"] == {
            "url": url,
            "headers": {"Authorization": f"Bearer {token}"},
        }
        assert (home / ".cursor" / "mcp.json.hivenote-backup").read_text(encoding="utf-8") == CURSOR_BEFORE

        connect_from_the_tray(desktop, "Gemini CLI", "gemini-cli")
        gemini_file = home / ".gemini" / "settings.json"
        assert eventually(lambda: "hivenote" in gemini_file.read_text(encoding="utf-8"), WAIT_S), desktop.output("app")
        gemini = json.loads(gemini_file.read_text(encoding="utf-8"))
        assert gemini["mcpServers"]["hivenote"]["url"] == url and gemini.get("theme") == "Dracula", gemini
        assert gemini["mcpServers"]["fs"] == {"command": "npx", "args": ["-y"]}

        desktop.tray_item().click("Quit Hivenote")
        assert app.exit_code() == 0
