"""``python -m service.cli``: the ``scemon`` command without its console script."""

from service.cli.app import cli

cli()
