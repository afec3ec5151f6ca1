"""``python -m service.cli``: the ``scemon`` command without its console script."""

import sys

from service.cli.app import app

sys.exit(app())
