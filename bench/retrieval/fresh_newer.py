"""Superseded decisions written after the 18 of questions.py, in other words than theirs ("dropped X for Y", "Y takes
over from X", "cut to", "going forward"), and before the words that say a note replaces another were widened: kept
apart as a check on that list, never to choose it. Each pair is an older note and the newer one that changes it,
with no `replaces` link unless run.py adds them; the newer notes are written after every other note.

run.py asks these on their own notebook: notes.py's notes, then the older notes below, then the newer ones (so the
figures of questions.py's categories stay those of notes.py alone)."""

from __future__ import annotations

from bench.retrieval.notes import N
from bench.retrieval.questions import Q

# (project (None: a personal note), older key, older title, older body, newer key, newer title, newer body, question)
_PAIRS: list[tuple[str | None, str, str, str, str, str, str, str]] = [
    (
        "web-dashboard",
        "fn-web-1",
        "Web unit tests run on Jest",
        "jsdom environment; snapshot tests live beside the components.",
        "fn-web-2",
        "Dropped Jest for Vitest in the dashboard",
        "Vitest shares the Vite config, so the transform setup is gone; snapshots were carried over as they were.",
        "which test runner does the dashboard use?",
    ),
    (
        "infra",
        "fn-infra-1",
        "Pull requests to the infra repo need one approval",
        "Any member of the platform team can approve.",
        "fn-infra-2",
        "Infra pull requests need two approvals from now on",
        "After the March outage a second reviewer from another team must sign off on every change.",
        "how many approvals does an infra pull request need?",
    ),
    (
        "infra",
        "fn-infra-3",
        "Uptime is checked by Pingdom every minute",
        "Checks hit /healthz on each public service from three regions.",
        "fn-infra-4",
        "Uptime checks: Pingdom out, Better Stack in",
        "Better Stack also hosts the status page, which Pingdom could not do for us.",
        "what checks that our public services are up?",
    ),
    (
        "shop-api",
        "fn-shop-1",
        "Product pages are cached for 10 minutes at the CDN",
        "Cache keys include the currency and the language.",
        "fn-shop-2",
        "CDN cache time for product pages cut to 60 seconds",
        "Stale prices after a sale started were the most common support complaint.",
        "how long are product pages cached at the CDN?",
    ),
    (
        "web-dashboard",
        "fn-web-3",
        "Feature toggles are managed in LaunchDarkly",
        "One project per environment; toggles are named after the ticket.",
        "fn-web-4",
        "Going forward, feature toggles live in Unleash",
        "Self-hosted Unleash is cheaper at our seat count; toggle names stay the same.",
        "where are feature toggles managed?",
    ),
    (
        "web-dashboard",
        "fn-web-5",
        "Monorepo tasks run with Turborepo",
        "Remote caching on Vercel; pipelines are declared in turbo.json.",
        "fn-web-6",
        "Monorepo tasks: Nx in favour of Turborepo",
        "Nx's project graph finds affected packages better; the remote cache is self-hosted.",
        "what runs the monorepo tasks?",
    ),
    (
        "shop-api",
        "fn-shop-3",
        "Product images are resized by a Lambda on upload",
        "Three sizes are written next to the original in the media bucket.",
        "fn-shop-4",
        "Product image resizing is done by imgproxy on request now",
        "No more pre-made sizes: imgproxy resizes and caches whatever size the page asks for.",
        "how are product images resized?",
    ),
    (
        "billing-service",
        "fn-bill-1",
        "Support tickets about invoices are tracked in Zendesk",
        "Billing questions get the billing tag and go to the finance queue.",
        "fn-bill-2",
        "Invoice support tickets: Zendesk retired, Linear takes them",
        "Finance works in Linear already; the Zendesk queue was closed on 1 June.",
        "where are support tickets about invoices tracked?",
    ),
    (
        "billing-service",
        "fn-bill-3",
        "Sellers are paid out monthly",
        "Payouts run on the first business day of the month through Stripe Connect.",
        "fn-bill-4",
        "Seller payouts updated to weekly",
        "Sellers asked for faster payouts; they now run every Monday through Stripe Connect.",
        "how often are sellers paid out?",
    ),
    (
        None,
        "fn-me-1",
        "Dependabot opens dependency update PRs",
        "Weekly, grouped by ecosystem.",
        "fn-me-2",
        "Adopted Renovate over Dependabot for dependency updates",
        "Renovate groups monorepo packages and automerges patch releases that pass CI.",
        "what opens the dependency update PRs?",
    ),
    (
        "billing-service",
        "fn-bill-5",
        "The billing service is linted with staticcheck",
        "Run by make lint and in CI.",
        "fn-bill-6",
        "Linting: golangci-lint takes over from staticcheck",
        "golangci-lint runs staticcheck among its linters, plus errcheck and revive.",
        "what lints the billing service?",
    ),
    (
        None,
        "fn-me-3",
        "The product demo is every Tuesday afternoon",
        "Thirty minutes, recorded for the people in other timezones.",
        "fn-me-4",
        "Product demo shifted to Thursdays",
        "Tuesdays clashed with the sprint planning.",
        "when is the product demo?",
    ),
    (
        "data-pipeline",
        "fn-data-1",
        "The newsletter is sent with Mailchimp",
        "Audience lists are synced from the warehouse every night.",
        "fn-data-2",
        "The newsletter goes out through Buttondown, Mailchimp was dropped",
        "Buttondown takes Markdown and costs a tenth; the nightly audience sync now targets its API.",
        "which tool sends the newsletter?",
    ),
    (
        "ml-ranker",
        "fn-ml-1",
        "Ranker features are computed in Spark jobs",
        "Daily EMR cluster, features written as Parquet to S3.",
        "fn-ml-2",
        "Ranker features: Spark jobs replaced by DuckDB",
        "The feature set fits on one machine; DuckDB reads and writes the same Parquet files.",
        "what computes the ranker features?",
    ),
]

OLDER: list[N] = [N(old, project, "decision", title, body) for project, old, title, body, *_ in _PAIRS]
NEWER: list[N] = [
    N(new, project, "decision", title, body, (), old) for project, old, _, _, new, title, body, _ in _PAIRS
]
FRESH_NEWER: list[Q] = [Q("fresh newer", question, (new,), old) for _, old, _, _, new, _, _, question in _PAIRS]
