"""`python -m dshkit ...` is the `dshkit` command."""

from dshkit.cli import main

raise SystemExit(main())
