"""The files users hand scemon and get back, read and written the same way by every
command and by the Spark job.

- ``queries``: queries files (query text or JSON), and an engine with them registered;
- ``events``: events files (JSON Lines, CSV), and the CSV cell rules the Spark job shares;
- ``matches``: matches as JSON Lines, to stdout or to a file written only on success.

May import ``ecq`` only.
"""
