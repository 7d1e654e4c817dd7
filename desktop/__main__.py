"""`python -m hivenote.desktop`: the same launcher as the `hivenote` script."""

from .main import main

raise SystemExit(main())
