# cython: language_level=3
"""The test and insert phases of the compiled kernel (see _phases.pyx)."""

from ecq.kernel._assembly cimport Assembly
from ecq.kernel._bitset cimport Bits, Words
from ecq.kernel._constants cimport ClassIds, Ecq, Net
from ecq.kernel._pmb cimport GroupScratch, NativePMB, Groups
from ecq.kernel._summary cimport SrcSummary, SummaryScratch


cdef class State:
    # One kernel's state besides the ECQs: the per-source summaries and the working
    # memory of its phases (never shared with another kernel).
    cdef dict summaries  # source -> SrcSummary
    cdef ClassIds classes
    cdef GroupScratch groups
    cdef SummaryScratch sums
    cdef Words done  # the queries the instance being tested completes
    cdef Assembly assembly


cdef dict extend(State s, Net n, Ecq q, SrcSummary summary, double e_end, object passed, bint to_done)
cdef dict test(
    State s, Net n, Ecq q, object e, object src, SrcSummary summary, double end, object passed, double hclock,
    bint *direct
)
cdef bint insert(
    State s, Net n, Ecq q, object e, object src, SrcSummary summary, object cls, double start, object passed,
    dict extended, double hclock
) except -1
cdef int summarise(
    State s, Net n, SrcSummary summary, NativePMB pmb, object src, object cls, Py_ssize_t cid, double start,
    Bits init, Groups g1, dict rest, double cutoff
) except -1
