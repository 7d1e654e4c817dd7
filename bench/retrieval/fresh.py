"""Zero-overlap questions written after the first 44 (questions.py) and before any lever of this round was measured,
kept apart as a check on the tuning: a change to meaning search is chosen on questions.py's zero-overlap questions
(one half of them, by split()), and these only say whether it holds on questions nobody tuned on. Same rule as the
"zero" category: no content word shared with the answering note (run.py checks it).

Most answer notes that no question in questions.py asks about."""

from __future__ import annotations

from bench.retrieval.questions import Q

FRESH: list[Q] = [
    Q("fresh", text, (key,))
    for text, key in (
        ("which relational engine holds purchases?", "shop-01"),
        ("what object-relational mapper does the backend talk through?", "shop-03"),
        ("how do we evolve the schema?", "shop-04"),
        ("what library checks incoming JSON payloads?", "shop-12"),
        ("what framework is the smartphone application made with?", "pocket-01"),
        ("how do alerts reach people's phones?", "pocket-03"),
        ("which React framework powers the back-office site?", "web-01"),
        ("which glyph library do the admin pages use for symbols?", "web-13"),
        ("how should analytics code be formatted?", "data-07"),
        ("is there a rehearsal environment that mirrors the live system?", "infra-09"),
        ("how do we vet cloud resource edits before they take effect?", "infra-13"),
        ("what is the smallest number of machines in the compute pool?", "infra-15"),
        ("where do we configure the domain's name resolution?", "infra-20"),
        ("which programming language is the invoicing backend coded in?", "bill-01"),
        ("what generator produces our product manuals web pages?", "docs-01"),
        ("how do we make flowcharts in guides?", "docs-10"),
        ("how is the recommender judged before release?", "ml-05"),
        ("which spelling conventions should I follow?", "me-01"),
        ("what IDE and command prompt do I use?", "me-10"),
        ("where do I record my time off?", "me-15"),
        ("how do we tell whether the backend instance is alive?", "shop-26"),
        ("do sensitive billing details pass through our machines?", "shop-37"),
        ("how do audience lists reach the sales platform?", "data-19"),
        ("how are lookalike items found before the final ordering?", "ml-16"),
    )
]
