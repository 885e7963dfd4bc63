"""``python -m quantscope`` runs the same entry point as the ``quantscope`` command."""

from quantscope.cli import main

raise SystemExit(main())
