# cython: language_level=3
"""Conjunctions of primitive classes in the compiled kernel (see _conjunction.pyx)."""

cimport cython
from cpython.ref cimport PyObject

from ecq.kernel._bitset cimport Bits
from ecq.kernel._filters cimport SlotIndex


# A simple conjunction has at most this many components (a bit each in a C word).
cdef enum:
    MAX_COMPS = 64


@cython.final
@cython.no_gc
cdef class _Entry:
    # A noted instance: the event and what the assembly reads of it, in C. Not tracked
    # by the cyclic collector (nothing it holds can lead back to it): the presence holds
    # one per stored instance, and each would make every collection longer.
    cdef object e
    cdef double start, end, prob
    cdef long long moment, arrival
    cdef bint derived  # a derived instance: its conjunctions are assembled in Python
    cdef Bits own


@cython.final
cdef class _Present:
    # One source's noted instances of one class, in arrival order, their latest start
    # and the union of their own bits.
    cdef list entries
    cdef double latest
    cdef Bits union


@cython.final
cdef class _Query:
    # What the assembly reads of one conjunction node, made once per generation of queries.
    cdef object qs
    cdef bint simple, never, mode_all, bounded
    cdef double window, least
    cdef long long reg
    cdef Py_ssize_t length
    cdef tuple classes  # simple: each component's class, in component order
    cdef tuple checks  # the conditions across events (predicates on the binding)


@cython.final
cdef class Klass:
    # What the conjunctions of one class are, for one generation of queries: their
    # filters' index, their bits, and whether the kernel's event loop may take the
    # class's instances (no other composite pattern, no disjunction uses the class).
    cdef readonly object ecq
    cdef SlotIndex index
    cdef Bits final, loose
    cdef bint loop


cdef struct _Pick:
    # A pool member: an instance the query may see, the component it fills.
    PyObject *e  # borrowed: its _Entry holds it during the call
    double start, end, prob
    long long moment, arrival
    int j


cdef class Conjunctions:
    cdef object network
    cdef dict presence  # src -> {class: _Present}
    cdef dict queries  # bit number -> _Query, made on first use after queries changed
    cdef dict classes  # class -> Klass or None (no conjunction), likewise
    cdef _Pick *pool
    cdef Py_ssize_t npool, cap
    # Counters for tests and profiles: conjunctions assembled here (their pools made),
    # and handed back to the network.
    cdef public long long assembled, handed

    cdef Klass klass(self, object cls)
    cdef int note_bits(self, object e, object cls, Bits bits) except -1
    cdef object complete_bits(self, Klass k, object e, Bits own, double hclock, list completed)
    cdef int _room(self, Py_ssize_t n) except -1
    cdef int _assemble(
        self, _Query q, Py_ssize_t bitno, object x, dict present, dict horizons, double hclock, list out
    ) except -2
    cdef int _combine(
        self, _Query q, Py_ssize_t xi, object x, double xs, double xe, double xprob,
        Py_ssize_t start, Py_ssize_t depth, Py_ssize_t m, unsigned long long used, double lo, double hi,
        Py_ssize_t *chosen, list out
    ) except -1
    cdef int _emit(
        self, _Query q, Py_ssize_t xi, object x, double xs, double xe, double xprob,
        Py_ssize_t *chosen, Py_ssize_t m, list out
    ) except -1
