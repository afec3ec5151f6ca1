"""The Python client in use: register a query, post events, follow the matches, resume
from a cursor. Against a running service (``scemon serve``):

    python examples/client.py http://127.0.0.1:8080 [TOKEN]

docs/service.md shows this file ("The Python client"); tests/service/server/test_client_example.py
runs it against a real server.
"""

from __future__ import annotations

import sys

from api.client import Client, SyncSubscription

url = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8080"
token = sys.argv[2] if len(sys.argv) > 2 else None  # an admin's, when the service has tokens

with Client(url, token=token) as client:
    # Register: a name and the query's text (or pattern=, its AST JSON).
    query = client.register("a_then_b", text="PATTERN SEQ(A, B)\nWITHIN 10 s")
    print("registered", query.name, query.kind, query.classes, query.window)

    # Post: a batch is named by (producer, batch_id), so sending it again is harmless.
    result = client.post_events(
        "example",
        1,
        [
            {"id": "a1", "src": "card-1", "type": "A", "start": 1},
            {"id": "b1", "src": "card-1", "type": "B", "start": 2},
            {"id": "a2", "src": "card-2", "type": "A", "start": 3},
            {"id": "b2", "src": "card-2", "type": "B", "start": 5},
        ],
    )
    print("accepted", result.accepted, "events,", result.matches, "matches")

# Subscribe: the matches from seq 0, then live ones as they come. A subscription is a
# live feed: without idle_timeout the loop waits for the next match for ever (break out
# of it, or cancel its task, to stop). Here it ends after 2 seconds without a match.
subscription = SyncSubscription(url, from_seq=0, token=token, idle_timeout=2)
for match in subscription:
    print("match", match["seq"], match["query"], match["src"], match["events"])
cursor = subscription.next_seq  # the seq after the last one seen: keep it to resume

# Meanwhile more events come in...
with Client(url, token=token) as client:
    client.post_events(
        "example",
        2,
        [
            {"id": "a3", "src": "card-3", "type": "A", "start": 6},
            {"id": "b3", "src": "card-3", "type": "B", "start": 7},
        ],
    )

# Resume from the cursor: only the matches not seen yet, none twice.
for match in SyncSubscription(url, from_seq=cursor, token=token, idle_timeout=2):
    print("resumed", match["seq"], match["query"], match["src"], match["events"])
