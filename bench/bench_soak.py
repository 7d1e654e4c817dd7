"""Soak: the tray app doing what a day of ordinary use does (agents connecting and leaving over MCP and stdio, the
dashboard window opened and closed, a snippet copied, the server stopped and started, another machine's ops arriving
through the synced folder), round after round, with the tray's RSS and PSS after each round. The driver is
tests/support/soak.py (tests/desktop/test_soak.py runs it for a few rounds); this prints the curve, the growth
after the warm-up rounds, and what the soaked tray holds beyond a fresh tray started on the notebook the soak wrote
(a soak writes ~23 notes a round, far more than a day of use, and the notebook's own memory grows with them). The
fresh tray runs the same warm-up rounds first, so the two are compared in the same state.

    python bench/bench_soak.py [--minutes 120 | --rounds N] [--warmup 3] [--agents 3] [--no-meaning] [--fresh 3]
        [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # run as a script, the project root is put on sys.path
    from tests.support.soak import growth, soak
else:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tests.support.soak import growth, soak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=120)
    parser.add_argument("--rounds", type=int, help="a number of rounds instead of a duration")
    parser.add_argument("--warmup", type=int, default=3, help="rounds not counted in the growth")
    parser.add_argument("--agents", type=int, default=3)
    parser.add_argument("--pause", type=float, default=2.0, help="seconds idle after each round")
    parser.add_argument("--json", help="write the samples to this file")
    parser.add_argument("--no-meaning", action="store_true", help="meaning search off (settings.json)")
    parser.add_argument(
        "--fresh",
        type=int,
        default=3,
        help="then rounds of a fresh tray on the same notebook, after its own warm-up rounds, to compare against",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hivenote-soak-") as tmp:
        samples = soak(
            Path(tmp),
            args.rounds,
            args.minutes,
            args.agents,
            args.pause,
            meaning=not args.no_meaning,
            fresh_rounds=args.warmup + args.fresh if args.fresh else 0,
        )
    result = growth(samples, args.warmup)
    print(json.dumps(result))
    if args.json:
        Path(args.json).write_text(json.dumps({"samples": samples, **result}, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
