"""Questions to the evaluation notebook (notes.py), asked the way an agent or a person would, in five categories:

- zero: shares no content word with its answer (synonyms, a purpose described);
- one: shares exactly one content word with its answer, and that word is in other notes too;
- ident: an exact identifier (env var, port, package, bucket, ...), bare or inside a short question;
- newer: a decision that was replaced; the first answer is the newer note, `older` the one it replaced;
- none: the notebook cannot answer it (search must return no exact result).

run.py checks the word-overlap rules of the first two categories against the notes."""

from __future__ import annotations

from typing import NamedTuple


class Q(NamedTuple):
    category: str
    text: str
    answers: tuple[str, ...] = ()  # any of these counts as found; for "newer", the newer note
    older: str | None = None


def _q(category: str, *rows: tuple[str, ...]) -> list[Q]:
    out = []
    for row in rows:
        text, *keys = row
        if category == "newer":
            out.append(Q(category, text, (keys[0],), keys[1]))
        else:
            out.append(Q(category, text, tuple(keys)))
    return out


QUESTIONS: list[Q] = [
    *_q(
        "zero",
        ("where can I see why the phone application keeps dying for users?", "pocket-02"),
        ("how should amounts of euros be kept in the db to avoid precision bugs?", "shop-05"),
        ("how long is stock held for a shopper who is paying?", "shop-11"),
        ("who calculates sales levies when a customer buys something?", "shop-15"),
        ("is there a four-eyes rule when reimbursing large amounts to a buyer?", "shop-18"),
        ("when does a back office employee get logged out?", "shop-23"),
        ("which company gives us parcel delivery prices?", "shop-24"),
        ("how are user credentials protected in storage?", "shop-29"),
        ("does the basket keep its items without a connection?", "pocket-09"),
        ("can customers sign in with a thumbprint on their handset?", "pocket-13"),
        ("what tool automates user journeys on smartphones?", "pocket-15"),
        ("where does product usage tracking go?", "pocket-12"),
        ("which local time do we render moments in for the back office?", "web-10"),
        ("how big can a spreadsheet download of purchases get?", "web-11"),
        ("how do we make sure the UI works with screen readers?", "web-12"),
        ("how is customer-identifying information protected in reporting tables?", "data-06"),
        ("where do I hear about stale warehouse tables?", "data-12"),
        ("how are euros turned into dollars in reports?", "data-14"),
        ("what stops one analyst from running up a huge cloud bill?", "data-15"),
        ("who gets woken up at night when production breaks?", "infra-06"),
        ("how long are the nightly db dumps retained?", "infra-11"),
        ("how do I connect to internal hosts remotely?", "infra-12"),
        ("are docker pictures checked for known vulnerabilities?", "infra-14"),
        ("what will our calls look like from a vendor's firewall?", "infra-16"),
        ("what happens when a customer's card is declined?", "bill-05", "bill-16"),
        ("how do we confirm a European business registration is genuine?", "bill-08"),
        ("is yearly payment cheaper?", "bill-09"),
        ("what voice should guides be written in?", "docs-03"),
        ("what happens if a page points to something that doesn't exist?", "docs-08"),
        ("how are brand-new items ranked with no history?", "ml-08"),
        ("how long must a split test of the recommender last?", "ml-07"),
        ("where is the user based?", "me-06"),
        ("may you remove things you didn't make?", "me-07"),
        ("how big should a change request be?", "me-03"),
        ("what computer am I on?", "me-18"),
        ("where do customers learn about outages?", "infra-17"),
        ("how do new goods from the vendor get into the store?", "shop-28"),
        ("can people buy without registering?", "shop-30"),
        ("how do we get a hotfix to users without waiting for review?", "pocket-11"),
        ("which languages does the mobile client ship in?", "pocket-23"),
        ("where is the admin site hosted?", "web-08"),
        ("are snippets in the documentation checked?", "docs-05"),
        ("which database backs the live feature lookups?", "ml-06"),
        ("which package manager for node?", "me-16"),
    ),
    *_q(
        "one",
        ("how do we avoid charging twice when the buyer retries the checkout?", "shop-07"),
        ("how many calls per minute can a client make?", "shop-08"),
        ("where do product photos live?", "shop-09"),
        ("why does running the tests need containers?", "shop-13"),
        ("do promo codes care about capital letters?", "shop-19"),
        ("what format do order ids follow?", "shop-21"),
        ("where do backend exceptions show up?", "shop-22"),
        ("what throughput should staging sustain under stress?", "shop-25"),
        ("how do I follow a single request across services?", "shop-27"),
        ("can someone pay without an account?", "shop-30"),
        ("which service sends messages to users' phones?", "pocket-03"),
        ("what is the oldest Android version we support?", "pocket-06"),
        ("why was the iPhone release refused by Apple?", "pocket-10"),
        ("what CSS approach does the admin use?", "web-03"),
        ("how is user input validated on the dashboard?", "web-06"),
        ("how heavy may the scripts be on first visit?", "web-14"),
        ("where do we write the SQL models?", "data-03"),
        ("when is a sale counted in revenue?", "data-09"),
        ("how is the raw clickstream physically organised?", "data-13"),
        ("where do pull request builds put their dbt output?", "data-16"),
        ("which region hosts the production cluster?", "infra-02"),
        ("how do services get their secrets in the cluster?", "infra-05"),
        ("how long do we keep metrics?", "infra-08"),
        ("who issues our HTTPS certificates?", "infra-10"),
        ("is Redis persistent?", "infra-18"),
        ("when do customers receive their invoices?", "bill-03"),
        ("what stops the same usage from being billed twice?", "bill-10"),
        ("who is allowed to issue credit?", "bill-13"),
        ("where do the endpoint docs come from?", "docs-02"),
        ("where does the ranker run and how fast must it answer?", "ml-03"),
        ("where are trained models saved?", "ml-10"),
        ("how long can a commit title be?", "me-02"),
        ("should I format code before committing?", "me-05"),
    ),
    *_q(
        "ident",
        ("STRIPE_WEBHOOK_SECRET", "shop-06"),
        ("5433", "shop-02"),
        ("FEATURE_FLAGS_URL", "shop-16"),
        ("where is NEXT_PUBLIC_API_URL set?", "web-07"),
        ("GOOGLE_APPLICATION_CREDENTIALS", "data-04"),
        ("what does BILLING_DB_DSN point to?", "bill-11"),
        ("8085", "bill-04"),
        ("what runs on port 8700?", "ml-03"),
        ("3001", "web-02"),
        ("acme-shop-media", "shop-09"),
        ("@acme/ui-kit", "pocket-14"),
        ("expo-local-authentication", "pocket-13"),
        ("argon2id parameters", "shop-29"),
        ("52.18.40.7", "infra-16"),
        ("acmeshop://", "pocket-16"),
        ("X-Request-ID", "shop-27"),
        ("dev.acme.pocket", "pocket-21"),
        ("customer_ltv.sql", "data-17"),
        ("cache.r6g.large", "infra-18"),
        ("acme-tf-state", "infra-01"),
        ("require_partition_filter", "data-13"),
        ("who enforces prettier-plugin-tailwindcss?", "web-03"),
    ),
    *_q(
        "newer",
        ("which task queue do background jobs use?", "shop-33", "shop-17"),
        ("which provider sends transactional emails?", "shop-34", "shop-14"),
        ("what powers product search?", "shop-35", "shop-10"),
        ("how is local UI state managed in the mobile client?", "pocket-24", "pocket-30"),
        ("minimum iOS version for the mobile app", "pocket-25", "pocket-18"),
        ("which chart library does the dashboard use?", "web-18", "web-04"),
        ("how do staff log in to the dashboard?", "web-19", "web-05"),
        ("what orchestrates the nightly loads?", "data-21", "data-02"),
        ("how are orders replicated from Postgres to the warehouse?", "data-22", "data-05"),
        ("where are logs shipped?", "infra-23", "infra-07"),
        ("how are services deployed to the cluster?", "infra-24", "infra-03"),
        ("how long is the free trial?", "bill-17", "bill-14"),
        ("how does the billing service access the database?", "bill-18", "bill-07"),
        ("what runs the docs search?", "docs-11", "docs-04"),
        ("where are ML experiments tracked?", "ml-13", "ml-04"),
        ("how often is the ranker retrained?", "ml-14", "ml-01"),
        ("which tool manages Python environments?", "me-17", "me-04"),
        ("what time is standup?", "me-20", "me-13"),
    ),
    *_q(
        "none",
        ("which GraphQL gateway does the storefront use?",),
        ("what is the Kafka topic for order events?",),
        ("who is the product owner of the billing service?",),
        ("what is the SLA for enterprise customers?",),
        ("how do we rotate the Apple push certificate?",),
        ("what is the wifi password in the office?",),
        ("which Kubernetes version runs in staging?",),
        ("when is the next company offsite?",),
        ("what is the maximum upload size for product videos?",),
        ("which Elasticsearch version is used for logs?",),
        ("how do we handle chargebacks from PayPal?",),
        ("what font does the docs site use?",),
        ("what is the budget for the ml team's GPUs?",),
        ("who approves holiday requests?",),
        ("how do we deploy to Azure?",),
        ("mobile dark mode toggle",),
    ),
]
