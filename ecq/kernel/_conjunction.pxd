# cython: language_level=3
"""Conjunctions of primitive classes in the compiled kernel (see _conjunction.pyx)."""

cimport cython
from cpython.ref cimport PyObject
from libc.stdint cimport int32_t, uint64_t

from ecq.kernel._bitset cimport Bits
from ecq.kernel._constants cimport ClassIds
from ecq.kernel._filters cimport SlotIndex


# A conjunction the kernel assembles has at most this many positive components (a bit
# each in a C word).
cdef enum:
    MAX_COMPS = 64


cdef struct _Note:
    # A noted instance: the event and what the assembly reads of it, in C.
    PyObject *e  # owned
    PyObject *own  # its own bits (Bits), owned
    double start, end, prob
    long long moment, arrival
    bint derived  # a derived instance: its conjunctions are assembled in Python


@cython.final
@cython.no_gc
cdef class _Present:
    # One source's noted instances of one class, in arrival order (notes[head:n]),
    # their latest start and the union of their own bits; the class's number and the
    # source, for cleaning. Not tracked by the cyclic collector (nothing it holds can
    # lead back to it): the presence holds one per source and class.
    cdef _Note *notes
    cdef Py_ssize_t head, n, cap
    cdef double latest
    cdef Bits union
    cdef Py_ssize_t cid
    cdef object src

    cdef int append(self, _Note note) except -1
    cdef void drop_first(self) noexcept


@cython.final
@cython.no_gc
cdef class _Source:
    # One source's _Present, one per class (``present``), and beside them in arrays
    # what the presence test reads of each: its class number, latest start and the
    # words of its union (one contiguous read per arriving instance, not one object
    # per class).
    cdef list present
    cdef int32_t *cids
    cdef double *latest
    cdef uint64_t **w
    cdef Py_ssize_t *nw
    cdef Py_ssize_t n, cap

    cdef Py_ssize_t find(self, Py_ssize_t cid) noexcept
    cdef int add(self, _Present p) except -1
    cdef void sync(self, Py_ssize_t i, _Present p) noexcept
    cdef int remove(self, _Present p) except -1


@cython.final
@cython.no_gc
cdef class _Queue:
    # One class's noted instances in arrival order, as their _Present (owned) and start:
    # what cleaning takes from the front (items[head:n]).
    cdef PyObject **items
    cdef double *starts
    cdef Py_ssize_t head, n, cap

    cdef int push(self, _Present p, double start) except -1
    cdef void pop(self) noexcept


@cython.final
cdef class _Query:
    # What the presence test and the assembly read of one conjunction node, made once
    # per generation of queries.
    cdef object qs, name
    cdef bint kernel  # assembled here (ecq.matching.conjunction.kernel_shape)
    cdef bint loose  # some positive component takes several classes: not counted
    cdef bint never, mode_all, bounded
    cdef bint direct  # its matches are emitted as found (see Conjunctions.made)
    # Its policy's state (ecq.matching.policy.PolicyState) when the compiled kernel
    # chooses its matches (QState.kernel_policy), else None.
    cdef object policy
    cdef double window, least
    cdef long long reg, order
    cdef Py_ssize_t length  # components (the binding's length)
    cdef Py_ssize_t npos  # positive components
    cdef int32_t cids[MAX_COMPS]  # each positive component's class number (counted nodes)
    cdef Py_ssize_t slot[MAX_COMPS]  # each positive component's index in the binding
    # Role groups (ecq.matching.conjunction.Shape): per group its size and where its positive
    # components (their numbers among the positives, by rank) start in gpos; the
    # positive classes (ccid, ncls of them) with their group (cgrp); per group None or
    # the filters by rank (gfilt).
    cdef Py_ssize_t ngrp
    cdef int32_t gsize[MAX_COMPS]
    cdef int32_t gbase[MAX_COMPS]
    cdef int32_t gpos[MAX_COMPS]
    cdef int32_t *ccid
    cdef int32_t *cgrp
    cdef Py_ssize_t ncls
    cdef list gfilt
    # Negated components: their index in the binding, their classes' numbers
    # (ncid[nbase[k]:nbase[k + 1]]) and blocker conditions (nconds[k], a tuple).
    cdef Py_ssize_t nneg
    cdef Py_ssize_t nslot[MAX_COMPS]
    cdef Py_ssize_t nbase[MAX_COMPS + 1]
    cdef int32_t *ncid
    cdef tuple nconds
    # The conditions across events; per check its number in the shared evaluation
    # (cmemo, -1: none) and the positives it reads in role order (carg[cbase[i]:cbase[i + 1]]).
    cdef tuple checks
    cdef Py_ssize_t nchecks
    cdef int32_t *cmemo
    cdef int32_t *carg
    cdef Py_ssize_t *cbase


@cython.final
cdef class Klass:
    # What the conjunctions of one class are, for one generation of queries: their
    # filters' index, their bits, and whether the kernel's event loop may take the
    # class's instances (no other composite pattern, no disjunction uses the class).
    cdef readonly object ecq
    cdef SlotIndex index
    cdef Bits final
    cdef bint loop
    cdef Py_ssize_t cid


cdef enum:
    Q_NEVER = 1
    Q_LOOSE = 2
    Q_KERNEL = 4
    Q_INLINE = 4  # positive components whose class numbers _QC holds


cdef struct _QC:
    # What the presence test reads of a conjunction node, per bit number in one array
    # (a few cache lines for thousands of queries; the _Query is read only by those
    # that pass).
    long long reg
    double window
    int32_t npos  # positive components; -1: not made in this generation
    int32_t flags  # Q_*
    int32_t cids[Q_INLINE]  # npos <= Q_INLINE; else the _Query's


cdef struct _Pick:
    # An instance some query may see: what the assembly reads of it; in a query's pool,
    # its role group and the ranks of the group it may fill (bits).
    PyObject *e  # borrowed: its _Note (a blocker: its SIQ) holds it during the call
    PyObject *own  # the entry's own bits (Bits), borrowed likewise (NULL: a blocker)
    double start, end, prob
    long long moment, arrival
    int g
    uint64_t fill
    bint derived


cdef struct _Memo:
    # One evaluated check of the shared evaluation: valid while stamp is the current
    # arriving instance's; its key, the check's number and the arrivals of the events
    # it read (args[off:off + n] of Conjunctions.margs), and the result.
    long long stamp
    uint64_t h
    int32_t id
    int32_t n
    Py_ssize_t off
    int result


cdef class Conjunctions:
    cdef object network
    cdef ClassIds classes  # the kernel's class numbers
    cdef dict presence  # src -> _Source
    cdef list fifo  # per class number: its _Queue (None: none yet)
    cdef list queries  # per bit number: _Query (None: not made in this generation)
    cdef _QC *qtab  # per bit number, likewise (npos -1: not made)
    cdef Py_ssize_t qcap
    cdef dict klasses  # class -> Klass or None (no conjunction), this generation
    # Per class number, this generation: its horizon's window and frozen value
    # (ecq.time.horizon.Horizon), hset[cid] once read.
    cdef double *hwin
    cdef double *hfrozen
    cdef char *hset
    cdef Py_ssize_t hcap
    # Per class number, this generation: its SIQ's index of each source's latest
    # instance (SIQ.last; None without an ECQ), read with the horizon.
    cdef list hlast
    # Scratch, per arriving instance: the index of each class in its _Source (-1:
    # absent), and each of those classes' visible instances read once (gath, at
    # goff[2 * index], goff[2 * index + 1] of them; -1: not read yet).
    cdef int32_t *slot_of
    cdef Py_ssize_t slot_cap
    cdef _Pick *gath
    cdef Py_ssize_t ngath, gcap
    cdef Py_ssize_t *goff
    cdef Py_ssize_t goff_cap
    cdef _Pick *pool
    cdef Py_ssize_t npool, cap
    # Blockers, per arriving instance: each negated class's visible instances at the
    # source, read once (blk at boff[cid], bcnt[cid] of them; boff -1: not read yet;
    # btouched: the classes read), and a query's blockers of each negated component in
    # the order their factors are taken (nblk from noff[k], ncnt[k] of them).
    cdef _Pick *blk
    cdef Py_ssize_t nblk, bcap
    cdef Py_ssize_t *boff
    cdef Py_ssize_t *bcnt
    cdef int32_t *btouched
    cdef Py_ssize_t nbt, bslot_cap
    cdef _Pick *nb
    cdef Py_ssize_t nnb, nbcap
    cdef Py_ssize_t noff[MAX_COMPS]
    cdef Py_ssize_t ncnt[MAX_COMPS]
    # The shared evaluation of checks (per arriving instance): a table by check number
    # and events read, and the numbers of the checks' keys in this generation.
    cdef _Memo *memo
    cdef Py_ssize_t mcap, mused
    cdef long long mstamp
    cdef long long *margs
    cdef Py_ssize_t nmargs, margs_cap
    cdef dict check_ids
    # The matches of the instance being processed that need nothing more, as compiled
    # Matches (no seq yet), with their nodes: the kernel's loop emits them with the
    # sequences' matches.
    cdef readonly list made
    cdef list made_q
    # Counters for tests and profiles: conjunctions assembled here (their pools made),
    # and handed back to the network; checks evaluated, and taken from the shared
    # evaluation instead.
    cdef public long long assembled, handed, evaluated, shared

    cdef Klass klass(self, object cls)
    cdef _Query query(self, Py_ssize_t bitno)
    cdef _QC *qc(self, Py_ssize_t bitno) except NULL
    cdef double low(self, Py_ssize_t cid, double hclock) except? -1.0
    cdef int note_bits(self, object e, Py_ssize_t cid, Bits bits) except -1
    cdef object complete_bits(self, Klass k, object e, Bits own, double hclock, list completed, bint direct)
    cdef int hand_made(self, object x, list completed) except -1
    cdef int _room(self, _Pick **buf, Py_ssize_t *cap, Py_ssize_t n) except -1
    cdef int _gather(self, Py_ssize_t si, _Present p, double low, long long xm, long long xa) except -1
    cdef int _gather_blockers(self, Py_ssize_t cid, object src, double hclock, long long xm) except -1
    cdef int _assemble(
        self, _Query q, Py_ssize_t bitno, Py_ssize_t xcid, object x, _Source s, double hclock,
        list out, bint direct
    ) except -2
    cdef int _blockers(self, _Query q, object src, double hclock, long long xm) except -1
    cdef int _slots(self, _Source s) except -1
    cdef int _combine(
        self, _Query q, Py_ssize_t gx, uint64_t xfill, object x, double xs, double xe, double xprob,
        Py_ssize_t start, Py_ssize_t depth, Py_ssize_t m, int32_t *need, double lo, double hi,
        Py_ssize_t *chosen, list out, bint direct
    ) except -1
    cdef int _emit(
        self, _Query q, Py_ssize_t gx, uint64_t xfill, object x, double xs, double xe, double xprob,
        Py_ssize_t *chosen, Py_ssize_t m, list out, bint direct
    ) except -1
    cdef int _check(self, _Query q, Py_ssize_t i, list binding, long long *arrivals) except -1
    cdef double _factor(
        self, _Query q, list binding, double start, double end, PyObject **members, Py_ssize_t nmem
    ) except? -1.0
