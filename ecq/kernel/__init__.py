"""The engine's kernel: the hot path of the shared network behind one interface.

- ``interface.py``: what the network needs of a kernel (``Kernel``, a Protocol) and what
  a kernel may read of the network and the engine (``NetworkView``, ``LoopHost``).
- ``pure.py``: the pure-Python kernel (every ablation level; what runs where the
  compiled one is not built, or with ``SCEMON_PURE=1``).
- ``_*.pyx``: the compiled kernel (Cython, level "summary"), one module per concern:
  ``_bitset`` (query bitsets as 64-bit words), ``_pmb`` (PMB groups), ``_summary``
  (per-source summaries), ``_events`` (events, matches, reading and writing them),
  ``_constants`` (what is derived from the registered queries), ``_assembly``,
  ``_conjunction`` (conjunctions: presence and assembly), ``_phases`` (test and insert
  phases) and ``_kernel`` (the kernel object and its event loop); built with them,
  ``_lexer`` (the query lexer's common path and a query's shape key, for
  ``ecq.language``).
- ``select.py``: which kernel runs, and why (``status()``); the only module that
  imports the compiled modules.
- ``make.py``: a network's kernel (``make_kernel``), the event reader and the match
  writer (compiled or pure, as ``select`` says).

docs/architecture.md, "The kernel", says why each piece is as it is.
"""
