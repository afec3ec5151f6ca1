# cython: language_level=3
"""Assembling sequence matches in the compiled kernel (see _assembly.pyx)."""

from cpython.ref cimport PyObject

from ecq.kernel._constants cimport INLINE_POS, Net, Plan
from ecq.kernel._negation cimport Blockers, Waiting
from ecq.kernel._pmb cimport NativePMB
from ecq.kernel._summary cimport SrcSummary


cdef class Found:
    # The matches completed by one instance: their events (owned references, match i's
    # at ev[off[i]:off[i + 1]]), their node's plan (owned), probability and start.
    cdef PyObject **ev
    cdef Py_ssize_t nev, cap_ev
    cdef Py_ssize_t *off
    cdef PyObject **plan
    cdef double *prob
    cdef double *start
    cdef Py_ssize_t n, cap
    cdef int add(self, Plan plan, list env, Py_ssize_t length, double prob, double start) except -1
    cdef int add_one(self, Plan plan, object e, double prob, double start) except -1
    cdef void clear(self) noexcept
    cdef list pairs(self)


cdef class Chains:
    # The probe of a source's instances for the instance being processed.
    cdef Net n
    cdef dict chains
    cdef object src
    cdef double hclock
    cdef SrcSummary summary
    cdef Blockers blk  # the negated classes' instances, as C records (_negation.pyx)
    cdef void at(self, Net n, object src, double hclock, SrcSummary summary) noexcept
    cdef PyObject *head(self, Py_ssize_t cid, object cls, double *horizon) except? NULL
    cdef list chain(self, object cls)


cdef class Assembly:
    cdef Chains probe
    cdef object pyprobe  # the probe as Python calls it (ecq.matching.skeleton.leaf)
    cdef object last  # the instance being assembled
    cdef Plan plan
    cdef list env
    cdef list envs  # env lists by length, reused (they never leave the assembly)
    cdef Found found
    cdef Waiting waiting  # trailing negation's matches waiting for the clock
    cdef Found due  # the waiting matches a release of phase 0 emits
    cdef double last_end
    cdef double *probs
    cdef double small_probs[INLINE_POS]
    cdef double bound
    cdef long long reg
    cdef Py_ssize_t bitno
    cdef bint mode_all
    cdef object min_prob
    cdef bint fill(self, Py_ssize_t i, long long nxt_moment, double nxt_start) except -1
    cdef int _try_native(self, Py_ssize_t i, NativePMB pmb, long long nxt_moment, double nxt_start, double *later) except -2
    cdef int _try(self, Py_ssize_t i, object p, long long nxt_moment, double nxt_start, double *later) except -2
    cdef int _bind(self, Py_ssize_t i, object p, double prob, long long moment, double start) except -2
    cdef int _complete(self, double start) except -2
    cdef int _hold(self, double prob, double start) except -2


cdef list release(Assembly a, Net n, double clock_before, double clock, bint python)
cdef int assemble(Assembly a, Plan plan, object last, double last_end, double last_start, double last_prob,
                  long long last_moment) except -1
