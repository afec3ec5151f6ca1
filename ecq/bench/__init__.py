"""The benchmark harness: the SCEMon paper's evaluation (§7, Figures 7-14) reproduced
with the shared engine and the separate-processing baseline side by side.

:mod:`ecq.bench.runner` measures (interleaved engines, the paper's metrics);
:mod:`ecq.bench.figures` defines each figure's sweep and returns
:class:`~ecq.bench.table.Table` values. Pure: ``scemon bench`` prints, writes CSV and
plots them.
"""
