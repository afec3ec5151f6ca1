"""Compiling queries: a parsed query's AST into an immutable compiled query
(:mod:`.query`), its WHERE and RETURN expressions into closures (:mod:`.conditions`, no
``eval``), and the one-event filters of many queries into one index (:mod:`.filters`)."""
