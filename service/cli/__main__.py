"""``python -m service.cli``: the ``scemon`` command without its console script."""

from service.cli.process import cli

cli()
