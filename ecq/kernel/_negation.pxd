# cython: language_level=3
"""Negation in the compiled kernel: the blocker probe and the waiting matches of
trailing negation (see _negation.pyx)."""

from cpython.ref cimport PyObject

from ecq.kernel._constants cimport Net, Plan


cdef struct Blk:
    # A visible instance of a class at the source: a possible blocker.
    PyObject *e  # borrowed: the SIQ holds it while the instance is processed
    long long moment
    double start, end, prob


cdef class Blockers:
    # The source's visible instances of each class probed, latest first, for one
    # instance (or one release of waiting matches): one walk of a class's chain serves
    # every node that probes it. Class id c's are recs[off[c]:off[c] + cnt[c]] when
    # gen[c] == now.
    cdef Blk *recs
    cdef Py_ssize_t used, cap
    cdef Py_ssize_t *off
    cdef Py_ssize_t *cnt
    cdef long long *gen
    cdef Py_ssize_t ncls
    cdef long long now
    cdef Net n
    cdef object src
    cdef double hclock
    cdef void reset(self, Net n, object src, double hclock) noexcept
    cdef Py_ssize_t of(self, Py_ssize_t cid, object cls, Py_ssize_t *count) except -1


cdef double inner_factor(Blockers b, Plan plan, list env, double last_end) except -1.0
cdef double trailing_factor(Blockers b, Plan plan, list ents, double deadline) except -1.0
cdef bint bound_ok(Plan plan, double prob) except -1


cdef struct Wait:
    # A match waiting for the clock: the deadline, the order it came in, its node's
    # plan and its events (a list; both owned), its probability and start.
    double deadline
    long long count
    PyObject *plan
    PyObject *ents
    double prob, start


cdef class Waiting:
    cdef Wait *h  # a binary heap on (deadline, count)
    cdef Py_ssize_t n, cap
    cdef long long count
    cdef list plans  # by node number: the plans of the nodes whose matches came in
    cdef int push(self, double deadline, Plan plan, list ents, double prob, double start) except -1
    cdef void pop(self, Wait *out) noexcept
    cdef double earliest(self) noexcept
