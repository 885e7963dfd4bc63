"""``python -m quantscope`` runs the same entry point as the ``quantscope`` command."""

try:
    from quantscope.cli import main
except KeyboardInterrupt:  # Ctrl-C while the modules load: the same one line as later
    import sys

    print("quantscope: interrupted", file=sys.stderr)
    raise SystemExit(130) from None

raise SystemExit(main())
