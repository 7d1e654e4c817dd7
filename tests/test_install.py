"""Connecting an agent for the person (server/install.py, issue 35) against real files in a temporary home: the entry
merged with every other entry and the file's text kept, a backup beside it, an entry updated rather than doubled, a
file that does not parse left alone, the install links, what is installed and connected, `hivenote connect --install`;
and the real Claude Code and Gemini CLI commands (tests/tools) where the client's own command is the way."""

from __future__ import annotations

import base64
import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hivenote.server.install import BACKUP_SUFFIX, Machine, agents, apply, install_link, merged, plan

URL = "http://127.0.0.1:7788/mcp"
TOKEN = "hn_test-token-0123456789abcdef"
TOOLS = Path(__file__).resolve().parent / "tools" / "node_modules" / ".bin"
BRIDGE = ["/opt/hivenote/bin/hivenote", "stdio"]


def machine(home: Path, path: str = "/nonexistent") -> Machine:
    return Machine(home, platform="linux", environ={"PATH": path})


def test_cursor_gets_the_entry_merged_every_other_entry_and_the_text_kept_with_a_backup(tmp_path: Path) -> None:
    config = tmp_path / ".cursor" / "mcp.json"
    config.parent.mkdir()
    before = (
        '{\n    "mcpServers": {\n        "linear": {"url": "https://mcp.linear.app/sse"},\n'
        '        "db": {"command": "npx", "args": ["-y", "pg"], "env": {"PGHOST": "café"}}\n    },\n'
        '    "theme": "dark"\n}\n'
    )
    config.write_text(before, encoding="utf-8")
    config.chmod(0o644)
    here = machine(tmp_path)
    planned = plan("cursor", here, url=URL, token=TOKEN)
    assert planned.way == "file" and not planned.update and not planned.connected
    assert planned.path == "~/.cursor/mcp.json" and '+        "hivenote": {' in planned.diff
    assert config.read_text(encoding="utf-8") == before  # planning changes nothing
    done = apply(planned, here)
    assert done.ok, done.message
    after = config.read_text(encoding="utf-8")
    # Every line of the file as it was is still there, byte for byte (one comma added after the last entry).
    assert after.startswith(before.split('        "db"')[0])
    assert '"env": {"PGHOST": "café"}},\n        "hivenote": {\n            "url"' in after
    assert after.endswith('\n    },\n    "theme": "dark"\n}\n')
    document = json.loads(after)
    assert document["mcpServers"]["hivenote"] == {"url": URL, "headers": {"Authorization": f"Bearer {TOKEN}"}}
    assert list(document["mcpServers"]) == ["linear", "db", "hivenote"] and document["theme"] == "dark"
    assert (config.parent / f"mcp.json{BACKUP_SUFFIX}").read_text(encoding="utf-8") == before
    assert stat.S_IMODE(config.stat().st_mode) == 0o644  # the file's mode is kept
    assert "mcp.json.hivenote-backup" in done.message

    again = plan("cursor", here, url="http://127.0.0.1:7950/mcp", token=None)  # another port, auth off
    assert again.update and not again.connected  # the entry is there, naming the old address
    assert apply(again, here).ok
    document = json.loads(config.read_text(encoding="utf-8"))
    assert list(document["mcpServers"]) == ["linear", "db", "hivenote"]  # updated where it stood, not doubled
    assert document["mcpServers"]["hivenote"] == {"url": "http://127.0.0.1:7950/mcp"}
    assert plan("cursor", here, url="http://127.0.0.1:7950/mcp", token=None).connected


def test_a_new_file_is_made_private_in_a_new_folder(tmp_path: Path) -> None:
    here = machine(tmp_path)
    planned = plan("windsurf", here, url=URL, token=TOKEN)
    assert planned.diff.startswith("--- /dev/null\n+++ ~/.codeium/windsurf/mcp_config.json")
    assert apply(planned, here).ok
    written = tmp_path / ".codeium" / "windsurf" / "mcp_config.json"
    assert json.loads(written.read_text(encoding="utf-8"))["mcpServers"]["hivenote"]["serverUrl"] == URL
    assert stat.S_IMODE(written.stat().st_mode) == 0o600  # it holds the token
    assert not (written.parent / f"mcp_config.json{BACKUP_SUFFIX}").exists()  # nothing to back up


def test_a_file_that_does_not_parse_is_left_alone_with_a_clear_message(tmp_path: Path) -> None:
    settings_file = tmp_path / ".config" / "zed" / "settings.json"
    settings_file.parent.mkdir(parents=True)
    text = '// Zed settings\n{\n  "theme": "One Dark", // the theme\n  "context_servers": {},\n}\n'
    settings_file.write_text(text, encoding="utf-8")
    here = machine(tmp_path)
    planned = plan("zed", here, url=URL, token=TOKEN)
    assert planned.way == "none" and planned.diff == ""
    assert "~/.config/zed/settings.json is not plain JSON (line 1, column 1" in planned.summary
    assert "leaves it alone" in planned.summary and "copy the snippet" in planned.summary
    done = apply(planned, here)
    assert not done.ok and done.message == planned.summary
    assert settings_file.read_text(encoding="utf-8") == text
    assert sorted(p.name for p in settings_file.parent.iterdir()) == ["settings.json"]  # no backup, no temp file


def test_a_file_changed_since_the_change_was_shown_is_not_written(tmp_path: Path) -> None:
    config = tmp_path / ".cursor" / "mcp.json"
    config.parent.mkdir()
    config.write_text('{"mcpServers": {}}\n', encoding="utf-8")
    here = machine(tmp_path)
    planned = plan("cursor", here, url=URL, token=TOKEN)
    config.write_text('{"mcpServers": {"new": {"url": "https://x"}}}\n', encoding="utf-8")  # Cursor wrote meanwhile
    done = apply(planned, here)
    assert not done.ok and "changed since the change was shown" in done.message
    assert json.loads(config.read_text(encoding="utf-8")) == {"mcpServers": {"new": {"url": "https://x"}}}


def test_a_linked_dotfile_is_written_where_it_lives(tmp_path: Path) -> None:
    dotfiles = tmp_path / "dotfiles" / "mcp.json"
    dotfiles.parent.mkdir()
    dotfiles.write_text('{"mcpServers": {}}\n', encoding="utf-8")
    (tmp_path / ".cursor").mkdir()
    (tmp_path / ".cursor" / "mcp.json").symlink_to(dotfiles)
    here = machine(tmp_path)
    assert apply(plan("cursor", here, url=URL, token=None), here).ok
    assert (tmp_path / ".cursor" / "mcp.json").is_symlink()
    assert json.loads(dotfiles.read_text(encoding="utf-8"))["mcpServers"]["hivenote"] == {"url": URL}


servers = st.dictionaries(
    st.text(min_size=1, max_size=8),
    st.dictionaries(
        st.text(max_size=6), st.one_of(st.integers(), st.text(max_size=6), st.lists(st.booleans())), max_size=3
    ),
    max_size=4,
)
documents = st.dictionaries(st.text(max_size=8), st.one_of(st.integers(), st.text(max_size=8), servers), max_size=4)


@settings(max_examples=200, deadline=None)
@given(
    document=documents,
    section=st.sampled_from(["mcpServers", "servers", "mcp"]),
    entry=servers,
    indent=st.sampled_from([2, 4, "\t"]),
)
def test_a_merge_is_the_document_with_the_entries_set_and_nothing_else_changed(
    document: dict[str, Any], section: str, entry: dict[str, Any], indent: int | str
) -> None:
    """The law: whatever the file held (any keys, any entries, any indent), the merged text parses to the file's
    document with the snippet's entries set under its key, in the file's own indent."""
    if not isinstance(document.get(section, {}), dict):
        document[section] = {}
    text = json.dumps(document, indent=indent, ensure_ascii=False) + "\n"
    addition = {section: entry}
    result, replaced = merged(text, addition)
    expected = dict(document)
    expected[section] = {**document.get(section, {}), **entry}
    assert json.loads(result) == expected
    assert replaced == any(name in document.get(section, {}) for name in entry)
    assert result.endswith("\n")


def test_install_links_carry_the_entry_cursor_and_vscode_read() -> None:
    cursor = plan("cursor", machine(Path("/nonexistent")), url=URL, token=TOKEN).link
    parts = urlsplit(cursor)
    assert (parts.scheme, parts.netloc, parts.path) == ("cursor", "anysphere.cursor-deeplink", "/mcp/install")
    query = parse_qs(parts.query)
    assert query["name"] == ["hivenote"]
    assert json.loads(base64.b64decode(query["config"][0])) == {
        "url": URL,
        "headers": {"Authorization": f"Bearer {TOKEN}"},
    }
    vscode = install_link("vscode", json.dumps({"servers": {"hivenote": {"type": "http", "url": URL}}}))
    assert vscode.startswith("vscode:mcp/install?")
    assert json.loads(unquote(vscode.removeprefix("vscode:mcp/install?"))) == {
        "name": "hivenote",
        "type": "http",
        "url": URL,
    }


def test_agents_says_what_is_installed_and_what_names_this_hivenote(tmp_path: Path) -> None:
    (tmp_path / ".cursor").mkdir()
    desktop_config = tmp_path / ".config" / "Claude" / "claude_desktop_config.json"
    desktop_config.parent.mkdir(parents=True)
    desktop_config.write_text(
        json.dumps({"mcpServers": {"notes": {"command": BRIDGE[0], "args": BRIDGE[1:]}}}), "utf-8"
    )
    (tmp_path / ".gemini").mkdir()
    (tmp_path / ".gemini" / "settings.json").write_text(
        '{"mcpServers": {"x": {"httpUrl": "http://elsewhere/mcp"}}}', "utf-8"
    )
    found = {a.client: a for a in agents(machine(tmp_path), url=URL, stdio_command=BRIDGE)}
    assert (found["cursor"].installed, found["cursor"].connected) == (True, False)
    assert (found["claude-desktop"].installed, found["claude-desktop"].connected) == (True, True)  # runs our bridge
    assert (found["gemini-cli"].installed, found["gemini-cli"].connected) == (True, False)  # another server only
    assert not found["zed"].installed and not found["codex"].installed
    assert found["continue"].way == "none" and found["cursor"].way == "file"
    assert found["claude-code"].way == "none"  # its command is not on this PATH: the snippet, and why
    assert "claude-code-json" not in found and "claude-desktop-remote" not in found  # variants, not agents
    why = plan("claude-code", machine(tmp_path), url=URL, token=TOKEN).summary
    assert "`claude` is not on PATH" in why


def hivenote(home: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(home), "PATH": "/nonexistent"}
    argv = [sys.executable, "-m", "hivenote.server.cli", "--data-dir", str(home / "data"), *args]
    return subprocess.run(argv, env=env, capture_output=True, text=True, encoding="utf-8", input=stdin, check=False)


@pytest.mark.system  # the command line as a process
def test_hivenote_connect_install_asks_first_and_does_it_with_yes(tmp_path: Path) -> None:
    asked = hivenote(tmp_path, "connect", "cursor", "--install")  # no terminal: nobody can be asked
    assert asked.returncode != 0 and "--yes" in asked.stderr, asked.stderr
    assert not (tmp_path / ".cursor").exists()
    done = hivenote(tmp_path, "connect", "cursor", "--install", "--yes")
    assert done.returncode == 0, done.stderr
    assert "Creates ~/.cursor/mcp.json" in done.stdout and "+++ ~/.cursor/mcp.json" in done.stdout
    assert "Cursor is connected to Hivenote" in done.stdout
    entry = json.loads((tmp_path / ".cursor" / "mcp.json").read_text(encoding="utf-8"))["mcpServers"]["hivenote"]
    assert entry["url"] == URL and entry["headers"]["Authorization"].startswith("Bearer hn_")
    yaml = hivenote(tmp_path, "connect", "continue", "--install", "--yes")
    assert yaml.returncode == 1 and "YAML" in yaml.stdout and "hivenote connect continue" in yaml.stdout


@pytest.mark.system  # the real Claude Code and Gemini CLI (npm, tests/tools)
@pytest.mark.parametrize(
    ("client", "config"), [("claude-code", ".claude.json"), ("gemini-cli", ".gemini/settings.json")]
)
def test_the_clients_own_command_adds_the_entry_and_updates_it_without_doubling(
    tmp_path: Path, client: str, config: str
) -> None:
    command = TOOLS / {"claude-code": "claude", "gemini-cli": "gemini"}[client]
    assert command.exists(), f"{command} is missing: scripts/install-test-deps (npm ci --prefix tests/tools)"
    here = machine(tmp_path, path=f"{TOOLS}{os.pathsep}{os.environ.get('PATH', '')}")
    file = tmp_path / config
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(
        json.dumps({"mcpServers": {"other": {"type": "http", "url": "https://other.example/mcp"}}}), "utf-8"
    )
    planned = plan(client, here, url=URL, token=TOKEN)
    assert planned.way == "command" and not planned.update
    assert all(TOKEN not in line for line in planned.shown)  # the token is shortened where it is shown
    done = apply(planned, here)
    assert done.ok, done.output
    assert "hivenote" in done.output  # the client's own words, shown to the person
    servers = json.loads(file.read_text(encoding="utf-8"))["mcpServers"]
    assert servers["hivenote"]["url"] == URL and servers["hivenote"]["headers"] == {"Authorization": f"Bearer {TOKEN}"}
    assert servers["other"]["url"] == "https://other.example/mcp"
    assert plan(client, here, url=URL, token=TOKEN).connected

    moved = plan(client, here, url="http://127.0.0.1:7950/mcp", token=TOKEN)  # another port: replaced, not doubled
    assert moved.update
    assert apply(moved, here).ok
    servers = json.loads(file.read_text(encoding="utf-8"))["mcpServers"]
    assert sorted(servers) == ["hivenote", "other"] and servers["hivenote"]["url"] == "http://127.0.0.1:7950/mcp"
