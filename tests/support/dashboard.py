"""What the dashboard tests share: seeding a notebook, reading the page's cards, saving screenshots."""

from __future__ import annotations

import json
import random
import urllib.request
from pathlib import Path
from typing import Any

from playwright.sync_api import Page

from hivenote.server.core.model import Author, Op
from hivenote.server.notebook import Notebook
from tests.support.live import Running

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "dashboard"
CLIENT = "hivenote-dashboard/test"
CURSOR = Author(agent="cursor", client="cursor-vscode 1.7.0", person="")
CLAUDE = Author(agent="claude-code", client="claude-code 2.0.1", person="ana")
CODEX = Author(agent="codex", client="codex-mcp-client 0.42", person="")

SEED = [  # kind, title, body, tags, project, by
    ("decision", "Use Drizzle, not Prisma", "Prisma was **too slow** in cold starts.", ["db"], "shop-api", CURSOR),
    ("fact", "Drizzle migrations live in db/migrations", "Run `pnpm db:migrate` first.", ["db"], "shop-api", CLAUDE),
    ("preference", "Ana prefers small pull requests", "Under 400 lines.", ["review"], None, CLAUDE),
    ("project", "Billing moves to Stripe Checkout", "Replaces the card form.\n\n- phase 1: web", [], "billing", CODEX),
    ("fact", "Postgres runs 16.4 in production", "Upgrades on the first Monday.", ["postgres"], "infra", CURSOR),
    ("decision", "Redis only as a cache, never a queue", "Queues use Postgres.", ["redis"], "shop-api", CODEX),
    ("fact", "The staging deploy needs the VPN", "WireGuard profile: staging-vpn.", ["deploy"], "infra", CLAUDE),
    ("preference", "Café names stay accented in the UI", "Never strip accents.", ["i18n"], "web", CURSOR),
]  # fmt: skip


def seed(running: Running) -> list[str]:
    """A small notebook with a few agents, people and projects; returns the ids, oldest first."""
    notebook = Notebook(running.store)
    ids = []
    for kind, title, body, tags, project, by in SEED:
        done = notebook.remember(kind=kind, title=title, body=body, tags=tags, project=project, by=by)
        ids.append(done.note.id)
    return ids


def write_log(data_dir: Path, count: int) -> None:
    """`count` realistic notes written straight into a shard (fsync'd appends one by one would take minutes)."""
    rnd = random.Random(5)
    words = ["drizzle", "prisma", "postgres", "redis", "deploy", "auth", "token", "cache", "queue", "billing"]
    words += ["".join(rnd.choice("abcdefghijklmnoprstuvwy") for _ in range(rnd.randint(3, 9))) for _ in range(3000)]
    (data_dir / "log").mkdir(parents=True, exist_ok=True)
    with open(data_dir / "log" / "seed-0001.jsonl", "wb") as fh:
        for i in range(1, count + 1):
            fields = {
                "kind": rnd.choice(["fact", "decision", "preference", "project"]),
                "title": " ".join(rnd.choices(words, k=rnd.randint(3, 8))).capitalize(),
                "body": " ".join(rnd.choices(words, k=rnd.randint(10, 60))) + ".",
                "tags": rnd.sample(words[:100], k=rnd.randint(0, 3)),
                "project": rnd.choice(["shop-api", "auth-svc", "web", "infra", None]),
            }
            op = Op(
                "seed-0001",
                i,
                1_760_000_000_000 + i * 1000,
                0,
                "note.set",
                {"id": f"01SEED{i:020d}", "fields": fields},
                CURSOR,
            )
            fh.write(op.encode())


def api(running: Running, path: str) -> Any:
    """A GET on the REST API, as the dashboard would make it."""
    headers = {"Authorization": f"Bearer {running.token}", "X-Hivenote-Client": CLIENT}
    with urllib.request.urlopen(urllib.request.Request(running.url + path, headers=headers), timeout=10) as response:
        return json.loads(response.read())


def card_ids(page: Page) -> list[str]:
    ids: list[str] = page.locator(".cards .card").evaluate_all("cards => cards.map(c => c.dataset.id)")
    return ids


def screenshot(page: Page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"))
