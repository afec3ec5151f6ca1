# cython: language_level=3
"""What the compiled kernel derives from the registered queries, made once per
generation of queries (see _constants.pyx)."""

from cpython.ref cimport PyObject
from libc.stdint cimport int32_t, uint16_t, uint32_t

from ecq.kernel._bitset cimport Bits, WindowMasks


cdef class ClassIds:
    # Small numbers for class names, for good (rows and plans carry them).
    cdef dict ids
    cdef list names


cdef Py_ssize_t class_id(ClassIds c, object cls) except -1


cdef struct Pos:
    # One position of a node's skeleton (its positive components: QState.slots).
    PyObject *cls  # its class when it has only one (borrowed from classes_at), else NULL
    Py_ssize_t cid  # that class's number, else -1; set by plan_at
    Py_ssize_t slot  # the component it binds (the environment is indexed by component)
    bint checked  # conditions are checked there
    bint latest_only  # a Kleene group's latest element only (QState.latest_only)


cdef struct Neg:
    # A negated component the kernel checks itself (ecq.structures.qstate.Neg; _negation.pyx).
    Py_ssize_t index  # the component
    Py_ssize_t left, right  # its positive neighbours' components (-1: none)
    Py_ssize_t cid  # its class's number; set by plan_at
    PyObject *cls  # its class (borrowed from Plan.negs)
    PyObject *conds  # the conditions that mention it (a tuple, borrowed), NULL: none


cdef enum:
    INLINE_POS = 4  # positions kept inside the plan object
    BTAB_KEYS = 8  # positions whose buckets Net tables (further ones: from the plan)
    HCID_UNSET = -2  # Net.hcid
    HCID_LONG = -3


cdef class Plan:
    cdef Py_ssize_t length, bitno  # length: the skeleton's positions
    cdef Py_ssize_t nslots  # the components (the environment's length)
    cdef bint remap  # some position binds another component than its own number
    cdef object leaf  # ecq.matching.skeleton.leaf when a skeleton match needs it, else None
    cdef bint single  # a one-event match, no condition to check (a filter)
    cdef long long reg, order
    cdef double window
    cdef bint never, top, mode_all, simple
    cdef bint direct  # matches emitted as found (simple, no query reads @name): per generation
    cdef bint cids  # pos[i].cid set
    cdef readonly long long matches
    cdef readonly object name
    cdef object probability
    cdef Pos *pos
    cdef Pos inline_pos[INLINE_POS]
    cdef object qs, derived_class
    cdef list classes_at, checks_at
    # Negation checked in C (QState.negs): ``inner`` some before the last positive
    # component, checked on each skeleton match; ``held`` a trailing one whose matches
    # wait in the kernel's own heap (_negation.Waiting): a query without RETURN.
    cdef Neg *neg
    cdef Py_ssize_t nneg
    cdef bint inner, held
    cdef bint dead  # the node is unregistered: its waiting matches are dropped
    cdef object negs  # QState.negs, which Neg's pointers borrow from
    # Its policy's state (ecq.matching.policy.PolicyState) when the kernel chooses its
    # matches before emitting them (QState.kernel_policy), else None.
    cdef object policy


cdef class PairTable:
    cdef Py_ssize_t ncls
    cdef Py_ssize_t *at  # 2 per class id: offset into ids, count (-1: not made yet)
    cdef uint32_t *ids
    cdef Py_ssize_t used, cap


cdef class Ecq:
    cdef object ecq  # the ECQ, or None when no query uses the class
    cdef dict final, more  # {position: Bits}
    cdef dict static  # the filter-free positions' sets {position: Bits}, or None
    cdef dict either  # {position: final | more}
    cdef object filters  # the _filters.SlotIndex of its positions (None: static)
    cdef Bits init  # static[0] & more[0]: the initial entries of an unfiltered instance
    cdef Bits more0  # more[0], or the empty set
    cdef bint plain  # every use of the class is a plain sequence (or a one-event filter)
    cdef bint general_uses
    cdef dict last
    cdef object queue
    cdef double window, frozen  # its horizon's (ecq.time.horizon.Horizon)
    cdef PairTable pairs  # made on first use
    cdef Py_ssize_t cid


cdef class Net:
    cdef dict ecqs, by_bit, ecq_plans
    cdef list plans, ecq_ids
    cdef WindowMasks windows
    cdef ClassIds classes
    cdef uint16_t *btab[BTAB_KEYS]
    cdef Py_ssize_t btab_n[BTAB_KEYS]
    cdef int32_t *hcid
    cdef Py_ssize_t hcid_n


cdef Net net_new(object ecqs, object by_bit, WindowMasks windows, ClassIds classes)
cdef Ecq ecq_in(Net n, object cls)
cdef Ecq ecq_at(Net n, Py_ssize_t cid, object cls)
cdef Plan plan_at(Net n, Py_ssize_t bitno)
cdef Py_ssize_t bucket(Net n, Py_ssize_t k, uint32_t q) except -1
cdef const uint32_t *pair_ids(Net n, Ecq q, Py_ssize_t cid, Bits second, Py_ssize_t *count) except? NULL
cdef object passing(Ecq q, object e)
