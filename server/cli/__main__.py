"""`python -m hivenote.server.cli`: the command line (the stdio snippets pasted into agents' configs run this)."""

from .main import main

raise SystemExit(main())
