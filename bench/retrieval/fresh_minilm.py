"""Questions written on 2026-12-07, before the sentence model was tuned in any way (fusion weight, replace
thresholds), kept for checking only: a setting of this round is chosen on questions.py and must hold here too. Same
rules as questions.py's "zero" and "one" categories (run.py checks them). They ask about notes no earlier question
asks about."""

from __future__ import annotations

from bench.retrieval.questions import Q

FRESH_ZERO: list[Q] = [
    Q("fresh zero", text, (key,))
    for text, key in (
        ("which engine lets shoppers look up goods despite misspellings?", "shop-10"),
        ("which vendor delivers receipts by electronic mail?", "shop-14"),
        ("what queues asynchronous work, and what is its message middleman?", "shop-17"),
        ("how long is fetched information considered fresh on phones?", "pocket-08"),
        ("what is the oldest Apple handset OS we still run on?", "pocket-18"),
        ("which plotting library renders graphs on the admin site?", "web-04"),
        ("how do employees sign in to the back office?", "web-05"),
        ("what product stores our BI facts?", "data-01"),
        ("how do releases reach the cluster?", "infra-03"),
        ("where do containers' print statements end up, and for how long?", "infra-07"),
        ("when do we get the cloud spending summary?", "infra-19"),
        ("where do recurring plans live?", "bill-02"),
        ("how long can someone try the product free?", "bill-14"),
        ("what powers the find box in the manual?", "docs-04"),
        ("where are model training trials recorded?", "ml-04"),
        ("when is the morning meetup each workday?", "me-13"),
        ("can I commit straight onto the primary branch?", "me-14"),
        ("how long can a quiet connection stay open at the traffic distributor?", "infra-25"),
        ("which standard gives nation abbreviations?", "shop-36"),
        ("which module lets our handset client use the lens?", "pocket-31"),
        ("must containers declare how much processor and RAM they need?", "infra-27"),
        ("what label does every bill start with?", "bill-19"),
    )
]

FRESH_ONE: list[Q] = [
    Q("fresh one", text, (key,))
    for text, key in (
        ("how are deploys of the app to Apple's store authenticated?", "pocket-05"),
        ("which tool copies purchases out of Postgres for reporting?", "data-05"),
        ("where do permissions of employees in the back office come from?", "web-05"),
        ("what happens to malformed events at intake?", "data-18"),
        ("how do we keep the nightly jobs from being starved by a big reload?", "data-11"),
        ("which machines build the container images?", "infra-04"),
        ("how is a repeated Stripe notification kept from being processed twice?", "bill-15"),
        ("where is the list of plan costs kept before it reaches Stripe?", "bill-12"),
        ("who writes up what changed in each version?", "docs-09"),
        ("how far back do the sessions used to fit the recommender go?", "ml-02"),
        ("how do we try a ranker safely without affecting shoppers?", "ml-15"),
        ("is a merge request needed for one-letter corrections?", "me-14"),
    )
]
