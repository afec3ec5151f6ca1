"""The ``scemon`` command: a Typer app (``app``), one module per command.

``app`` assembles; ``parse``, ``replay``, ``serve``, ``openapi``, ``stream``, ``demo``,
``queries`` (``queries register``), ``generate`` and ``bench`` (``bench ...``) each hold
one command (or group) and turn its options into calls to the package doing the work.
Shared: ``options`` (options several commands take), ``errors`` (a user's mistake →
one line on stderr, exit 1) and ``progress`` (a progress bar only where it helps).

May import everything in ``service``, ``api`` and ``ecq``; nothing imports it.
"""
