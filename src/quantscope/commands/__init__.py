"""Subcommands of the ``quantscope`` command line, one module each."""
