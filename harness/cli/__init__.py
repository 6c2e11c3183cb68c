"""L4: the command line (`delta-jepsen`)."""

from harness.cli.main import entry, main

__all__ = ["entry", "main"]
