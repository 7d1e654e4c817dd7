"""Connect snippets: every client's text parses in its own format to exactly the expected config, for any token and
URL characters, with and without a token, for the notebook and the graph endpoint; plus where, steps and errors."""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from hivenote.server.connect import CLIENTS, Snippet, all_snippets, snippet
from hivenote.server.core.errors import InvalidInput

URL = "http://127.0.0.1:7788/mcp"
GRAPH_URL = "http://127.0.0.1:7788/mcp/graph"
TOKEN = "tok"
HOSTILE_TOKEN = (
    "t'o\"k\\en $HOME `x` ${AUTH} %APPDATA% 'quoted' #hash: [a] {b} ü 東京 😀 \u2018smart\u2019 \u2028 \u00a0 \ufeff"
)
HOSTILE_URL = 'https://notes.example/mcp?q="a\'b"&x=$HOME\\ü 😀#frag: {x}'
BRIDGE = ("hivenote", "stdio")
EXPECTED_KEYS = {"linux", "macos", "windows"}


def parse(s: Snippet) -> Any:
    """The snippet's text read back with a real parser for its format."""
    if s.format == "json":
        return json.loads(s.text)
    if s.format == "toml":
        return tomllib.loads(s.text)
    if s.format == "yaml":
        return yaml.safe_load(s.text)
    assert s.format == "shell"
    return shlex.split(s.text)


def expected(client: str, *, url: str, token: str | None, graph: bool) -> Any:
    """What each client's config must say, written out in full: the exact keys the client reads."""
    name = "hivenote-graph" if graph else "hivenote"
    auth = {"Authorization": f"Bearer {token}"}
    headers: dict[str, Any] = {} if token is None else {"headers": auth}
    bridge = {"command": "hivenote", "args": ["stdio", "--graph"] if graph else ["stdio"]}
    if client == "cursor":
        return {"mcpServers": {name: {"url": url, **headers}}}
    if client in ("claude-desktop", "junie"):
        return {"mcpServers": {name: bridge}}
    if client == "claude-desktop-remote":
        if token is None:
            return {"mcpServers": {name: {"command": "npx", "args": ["-y", "mcp-remote", url]}}}
        args = ["-y", "mcp-remote", url, "--header", "Authorization:${AUTH_HEADER}"]
        return {"mcpServers": {name: {"command": "npx", "args": args, "env": {"AUTH_HEADER": f"Bearer {token}"}}}}
    if client == "claude-code":
        argv = ["claude", "mcp", "add", "--transport", "http", "--scope", "user", name, url]
        return argv if token is None else [*argv, "--header", f"Authorization: Bearer {token}"]
    if client in ("claude-code-json", "gemini-cli"):
        return {"mcpServers": {name: {"type": "http", "url": url, **headers}}}
    if client == "codex":
        env = {} if token is None else {"bearer_token_env_var": "HIVENOTE_TOKEN"}
        return {"mcp_servers": {name: {"url": url, **env}}}
    if client == "vscode":
        return {"servers": {name: {"type": "http", "url": url, **headers}}}
    if client == "windsurf":
        return {"mcpServers": {name: {"serverUrl": url, **headers}}}
    if client == "zed":
        return {"context_servers": {name: {"url": url, **headers}}}
    if client == "cline":
        entry = {"type": "streamableHttp", "url": url, **headers, "disabled": False, "autoApprove": []}
        return {"mcpServers": {name: entry}}
    if client == "continue":
        options = {} if token is None else {"requestOptions": {"headers": auth}}
        return {"mcpServers": [{"name": name, "type": "streamable-http", "url": url, **options}]}
    assert client == "opencode", f"no expectation written for {client}"
    return {"mcp": {name: {"type": "remote", "url": url, "enabled": True, "oauth": False, **headers}}}


def ps_literal(text: str) -> str:
    """Read back a PowerShell single-quoted literal: any of its four quote characters doubled stands for itself."""
    assert text[0] == "'" and text[-1] == "'", text
    out, inner, i = [], text[1:-1], 0
    while i < len(inner):
        if inner[i] in "'\u2018\u2019\u201a\u201b":
            assert inner[i + 1] == inner[i], f"undoubled quote in {text}"
            i += 1
        out.append(inner[i])
        i += 1
    return "".join(out)


@pytest.mark.parametrize("graph", [False, True], ids=["notebook", "graph"])
@pytest.mark.parametrize("token", [TOKEN, None], ids=["token", "no-token"])
@pytest.mark.parametrize("client", CLIENTS)
def test_every_snippet_parses_to_exactly_the_config_its_client_reads(
    client: str, token: str | None, graph: bool
) -> None:
    url = GRAPH_URL if graph else URL
    s = snippet(client, url=url, token=token, graph=graph)
    assert s.client == client
    assert parse(s) == expected(client, url=url, token=token, graph=graph)


@pytest.mark.parametrize("client", CLIENTS)
def test_hostile_token_and_url_characters_round_trip_through_every_format(client: str) -> None:
    s = snippet(client, url=HOSTILE_URL, token=HOSTILE_TOKEN)
    assert parse(s) == expected(client, url=HOSTILE_URL, token=HOSTILE_TOKEN, graph=False)


printable = st.characters(blacklist_categories=("Cc", "Cs"))


@settings(max_examples=60, deadline=None)
@given(token=st.text(printable, min_size=1), path=st.text(printable))
def test_any_token_and_url_without_control_characters_round_trip_through_every_client(token: str, path: str) -> None:
    url = "https://notes.example/" + path
    for s in all_snippets(url=url, token=token):
        assert parse(s) == expected(s.client, url=url, token=token, graph=False), s.client


@pytest.mark.parametrize("graph", [False, True], ids=["notebook", "graph"])
@pytest.mark.parametrize("client", CLIENTS)
def test_snippets_without_a_token_mention_no_authorization_anywhere(client: str, graph: bool) -> None:
    s = snippet(client, url=GRAPH_URL if graph else URL, token=None, graph=graph)
    everything = json.dumps(s.to_json()).lower()
    for word in ("authorization", "bearer", "auth_header", "hivenote_token", "token_env", "inputs"):
        assert word not in everything, f"{client} mentions {word!r} with auth off"


@pytest.mark.parametrize("client", CLIENTS)
def test_every_client_says_where_on_linux_macos_and_windows(client: str) -> None:
    s = snippet(client, url=URL, token=TOKEN)
    assert set(s.where) == EXPECTED_KEYS
    assert all(place.strip() for place in s.where.values())
    assert not s.where["windows"].startswith("~"), "Windows has no ~; use %USERPROFILE% or %APPDATA%"
    assert s.steps and all(step.strip() for step in s.steps)


def test_claude_desktop_config_lives_where_each_os_keeps_it() -> None:
    for client in ("claude-desktop", "claude-desktop-remote"):
        assert snippet(client, url=URL, token=TOKEN).where == {
            "linux": "~/.config/Claude/claude_desktop_config.json",
            "macos": "~/Library/Application Support/Claude/claude_desktop_config.json",
            "windows": "%APPDATA%\\Claude\\claude_desktop_config.json",
        }


def test_dotfile_clients_name_their_home_folder_file_on_every_os() -> None:
    files = {
        "cursor": ".cursor/mcp.json",
        "codex": ".codex/config.toml",
        "gemini-cli": ".gemini/settings.json",
        "windsurf": ".codeium/windsurf/mcp_config.json",
        "continue": ".continue/config.yaml",
        "opencode": ".config/opencode/opencode.json",
        "junie": ".junie/mcp/mcp.json",
    }
    for client, relative in files.items():
        where = snippet(client, url=URL, token=TOKEN).where
        assert where["linux"] == where["macos"] == f"~/{relative}", client
        assert where["windows"] == "%USERPROFILE%\\" + relative.replace("/", "\\"), client


def test_codex_steps_export_the_token_under_the_variable_the_config_names() -> None:
    s = snippet("codex", url=URL, token=HOSTILE_TOKEN)
    variable = tomllib.loads(s.text)["mcp_servers"]["hivenote"]["bearer_token_env_var"]
    exports = [step for step in s.steps if step.startswith("export ")]
    assert len(exports) == 1
    assert shlex.split(exports[0]) == ["export", f"{variable}={HOSTILE_TOKEN}"]
    [windows] = [step for step in s.steps if "SetEnvironmentVariable" in step]
    literal = windows.split(f"('{variable}', ", 1)[1].removesuffix(", 'User')")
    assert ps_literal(literal) == HOSTILE_TOKEN


def test_codex_steps_offer_the_codex_mcp_add_command_with_the_same_settings() -> None:
    s = snippet("codex", url=URL, token=TOKEN, graph=True)
    [step] = [step for step in s.steps if "codex mcp add" in step]
    argv = shlex.split(step.split(": ", 1)[1])
    assert argv == ["codex", "mcp", "add", "hivenote-graph", "--url", URL, "--bearer-token-env-var", "HIVENOTE_TOKEN"]


def test_claude_code_adds_a_powershell_line_only_when_its_quoting_differs() -> None:
    plain = snippet("claude-code", url=URL, token="abc_DEF-123")
    assert not any("PowerShell" in step for step in plain.steps)
    hostile = snippet("claude-code", url=URL, token="it's $HOME")
    [step] = [step for step in hostile.steps if step.startswith("In PowerShell use: ")]
    assert step.endswith(" --header 'Authorization: Bearer it''s $HOME'")


def test_vscode_mentions_the_inputs_prompt_alternative_when_there_is_a_token() -> None:
    s = snippet("vscode", url=URL, token=TOKEN)
    assert any('"inputs"' in step and "${input:hivenote-token}" in step for step in s.steps)
    assert "${input:" not in s.text, "the token is filled in by default"


def test_mcp_remote_allows_plain_http_only_where_it_would_refuse_it() -> None:
    def args(url: str) -> list[str]:
        entry = json.loads(snippet("claude-desktop-remote", url=url, token=None).text)["mcpServers"]["hivenote"]
        return list(entry["args"])

    assert args("http://localhost:7788/mcp") == ["-y", "mcp-remote", "http://localhost:7788/mcp"]
    assert args("https://notes.example/mcp") == ["-y", "mcp-remote", "https://notes.example/mcp"]
    lan = "http://192.168.1.20:7788/mcp"
    assert args(lan) == ["-y", "mcp-remote", lan, "--allow-http"]


def test_stdio_clients_run_the_given_bridge_command_and_add_graph_to_it() -> None:
    command = ("C:\\Program Files\\Hivenote\\hivenote.exe", "stdio", "--port", "7790")
    for client in ("claude-desktop", "junie"):
        data = json.loads(snippet(client, url=GRAPH_URL, token=TOKEN, graph=True, stdio_command=command).text)
        assert data["mcpServers"]["hivenote-graph"] == {"command": command[0], "args": [*command[1:], "--graph"]}


def test_stdio_bridge_snippets_never_carry_the_token() -> None:
    for client in ("claude-desktop", "junie"):
        assert HOSTILE_TOKEN not in json.dumps(snippet(client, url=URL, token=HOSTILE_TOKEN).to_json())


def test_all_snippets_cover_every_client_in_order() -> None:
    snippets = all_snippets(url=URL, token=TOKEN)
    assert [s.client for s in snippets] == list(CLIENTS)
    assert len(set(CLIENTS)) == len(CLIENTS)
    assert {s.format for s in snippets} == {"json", "toml", "yaml", "shell"}


def test_to_json_is_a_plain_json_object_with_every_field() -> None:
    s = snippet("cursor", url=URL, token=TOKEN)
    doc = json.loads(json.dumps(s.to_json()))
    assert doc == {
        "client": "cursor",
        "title": "Cursor",
        "format": "json",
        "text": s.text,
        "where": s.where,
        "steps": s.steps,
    }


def test_an_unknown_client_is_invalid_input_listing_the_known_ids() -> None:
    with pytest.raises(InvalidInput) as caught:
        snippet("notepad", url=URL, token=TOKEN)
    assert "notepad" in str(caught.value)
    assert all(client in str(caught.value) for client in CLIENTS)


@pytest.mark.parametrize(
    ("url", "token", "command", "message"),
    [
        (URL, "tok\nen", BRIDGE, "token contains control characters (U+000A)"),
        (URL, "", BRIDGE, "token is empty"),
        ("http://127.0.0.1:7788/mcp\r\n", TOKEN, BRIDGE, "url contains control characters"),
        ("127.0.0.1:7788/mcp", TOKEN, BRIDGE, "must be an http:// or https:// URL"),
        ("http://[::1/mcp", TOKEN, BRIDGE, "is not a valid URL"),
        (URL, TOKEN, (), "stdio_command must be a non-empty list"),
        (URL, TOKEN, "hivenote stdio", "stdio_command must be a non-empty list"),
    ],
)
def test_inputs_no_client_could_use_are_refused_saying_what_to_fix(
    url: str, token: str, command: tuple[str, ...], message: str
) -> None:
    with pytest.raises(InvalidInput, match=re.escape(message)):
        snippet("cursor", url=url, token=token, stdio_command=command)
