# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""What the compiled kernel reads of the network and of each ECQ and node, and what it
derives from the registered queries: made once per generation of queries and dropped
when a query comes or goes (``CompiledKernel.queries_changed``). Every attribute of a
Python object is a dict lookup, and they were a fifth of an event's time; and the
query bitsets become the kernel's own ``Bits`` here, once, not per event."""

from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.mem cimport PyMem_Free
from cpython.ref cimport PyObject
from libc.stdint cimport int32_t, uint16_t, uint32_t

from ecq.kernel._bitset cimport (
    Bits,
    WindowMasks,
    and_ids,
    bits_and,
    bits_empty,
    bits_from_int,
    bits_or,
    grow,
)
from ecq.kernel._filters cimport SlotIndex, class_index, slots_passing
from ecq.kernel._summary cimport NO_BUCKET

import ecq.matching.skeleton as _skeleton

__all__ = ["ClassIds", "Plan"]


cdef class ClassIds:
    """Class names numbered for good by one kernel."""

    def __cinit__(self):
        self.ids = {}
        self.names = []


cdef Py_ssize_t class_id(ClassIds c, object cls) except -1:
    got = c.ids.get(cls)
    if got is None:
        got = len(c.names)
        c.ids[cls] = got
        c.names.append(cls)
    return got


cdef class Plan:
    """A node's constants, read from its QState and CompiledQuery once (each attribute
    lookup is a dict lookup) and kept on the QState (``QState.plan``), which never
    changes once registered; ``matches`` counts the matches the compiled loop emitted.

    Thousands of nodes complete now and then, so a plan is cold when read: what
    completing, assembling and emitting a match reads comes first, and the positions
    of short sequences are inside the object (one or two cache lines in all)."""

    def __dealloc__(self):
        if self.pos != &self.inline_pos[0]:
            PyMem_Free(self.pos)
        PyMem_Free(self.neg)


cdef Plan _plan_of(qs):
    plan = qs.plan
    if plan is not None:
        return <Plan?>plan
    cdef Plan p = Plan()
    cq = qs.cq
    p.qs = qs
    p.name = cq.name
    p.never = cq.never
    p.top = cq.top
    p.mode_all = cq.mode_all
    p.simple = qs.simple or qs.kernel_policy
    p.policy = qs.policy if qs.kernel_policy else None
    p.length = qs.steps
    p.nslots = cq.length
    # Looked up when the plan is made, not bound at import: tests count its calls.
    p.leaf = _skeleton.leaf if qs.leafy else None
    p.single = qs.steps == 1 and not cq.skeletal and not qs.checks_at[0]
    p.bitno = qs.bitno
    p.reg = qs.reg
    p.order = qs.order
    p.probability = cq.probability
    p.derived_class = qs.derived_class
    p.window = cq.window if cq.window else 0.0
    p.classes_at = list(qs.classes_at)
    p.checks_at = list(qs.checks_at)
    cdef Py_ssize_t i, n = len(p.classes_at)
    if n <= INLINE_POS:
        p.pos = &p.inline_pos[0]
    else:
        p.pos = <Pos *>grow(NULL, n * sizeof(Pos))
    slots = qs.slots
    p.remap = False
    for i in range(n):
        classes = <tuple>p.classes_at[i]
        p.pos[i].cls = <PyObject *>classes[0] if len(classes) == 1 else NULL
        p.pos[i].cid = -1
        p.pos[i].slot = slots[i]
        p.remap = p.remap or p.pos[i].slot != i
        p.pos[i].checked = i < len(p.checks_at) and len(<tuple>p.checks_at[i]) > 0
        p.pos[i].latest_only = bool(qs.latest_only[i])
    _negs_of(p, qs, cq)
    qs.plan = p
    return p


cdef int _negs_of(Plan p, object qs, object cq) except -1:
    # The negated components the kernel checks itself (QState.negs).
    cdef Py_ssize_t i
    negs = qs.negs
    p.negs = negs
    p.nneg = len(negs)
    p.neg = <Neg *>grow(NULL, p.nneg * sizeof(Neg)) if p.nneg else NULL
    p.inner = False
    for i in range(p.nneg):
        g = negs[i]
        p.neg[i].index = g.comp
        p.neg[i].left = g.left
        p.neg[i].right = g.right
        p.neg[i].cid = -1
        p.neg[i].cls = <PyObject *>g.cls
        p.neg[i].conds = <PyObject *>g.conds if g.conds else NULL
        p.inner = p.inner or g.right >= 0
    p.held = p.nneg > 0 and bool(cq.trailing) and cq.top and not cq.returns
    return 0


cdef class PairTable:
    """For a class X, per class id of a class Y: the queries that can have a Y at
    position 0 and an X at position 1. A source's first-position row of class Y holds
    only position-0 queries of Y, so its AND with X's position-1 queries is its AND
    with this set, which has a few queries where X's position-1 set has hundreds; and
    the sets of one X lie in one array, indexed by class id (no lookup, no object per
    pair). Filled on use; dropped with the ECQ constants when queries change."""

    def __dealloc__(self):
        PyMem_Free(self.at)
        PyMem_Free(self.ids)


cdef const uint32_t *pair_ids(Net n, Ecq q, Py_ssize_t cid, Bits second, Py_ssize_t *count) except? NULL:
    # The queries of class id ``cid`` at position 0 that are in ``second`` (the
    # queries of q's class at position 1), as ascending numbers.
    cdef Py_ssize_t i, want, got
    cdef Ecq fq
    cdef Bits both
    if q.pairs is None:
        q.pairs = PairTable()
    cdef PairTable t = q.pairs
    if cid >= t.ncls:
        want = len(n.classes.names) if len(n.classes.names) > cid else cid + 1
        t.at = <Py_ssize_t *>grow(t.at, 2 * want * sizeof(Py_ssize_t))
        for i in range(t.ncls, want):
            t.at[2 * i] = 0
            t.at[2 * i + 1] = -1
        t.ncls = want
    if t.at[2 * cid + 1] < 0:
        fq = ecq_in(n, n.classes.names[cid])
        both = bits_and(fq.more0, second)
        if t.used + both.n * 64 > t.cap:
            t.cap = (t.cap + both.n * 64) * 2
            t.ids = <uint32_t *>grow(t.ids, t.cap * sizeof(uint32_t))
        got = and_ids(both.w, both.n, both.w, both.n, NULL, 0, t.ids + t.used)
        t.at[2 * cid] = t.used
        t.at[2 * cid + 1] = got
        t.used += got
    count[0] = t.at[2 * cid + 1]
    return t.ids + t.at[2 * cid]


cdef dict _bits_by_position(dict masks):
    return {k: bits_from_int(v) for k, v in masks.items()}


cdef class Ecq:
    """An ECQ's sets and queue for the compiled phases (see the module's docstring)."""


cdef Ecq _ecq_of(ecq):
    cdef Ecq q = Ecq.__new__(Ecq)
    q.ecq = ecq
    q.more0 = bits_empty()
    q.init = q.more0
    if ecq is None:
        return q
    q.final = _bits_by_position(ecq.seq_final)
    q.more = _bits_by_position(ecq.seq_more)
    q.either = {}
    for k in set(q.final) | set(q.more):
        q.either[k] = bits_or(q.final.get(k, q.more0), q.more.get(k, q.more0))
    q.more0 = q.more.get(0, q.more0)
    static = ecq.static_pass
    q.filters = None
    if static is not None:
        q.static = _bits_by_position(static)
        if 0 in q.static:
            q.init = bits_and(<Bits>q.static[0], q.more0)
    else:
        q.static = None
        q.filters = class_index(ecq.seq_filters)
    q.plain = not ecq.general_final and not ecq.disj and not ecq.cnj_final
    q.general_uses = bool(ecq.general_uses)
    siq = ecq.siq
    q.last = siq.last
    q.queue = siq.queue
    drop = ecq.drop
    q.window = drop.window
    q.frozen = drop.frozen
    return q


cdef object passing(Ecq q, object e):
    # The queries at each position whose filter ``e`` passes (SlotFilter.passing, from
    # the class's filter index in the kernel's form: one for all its positions), as a
    # _filters.Passing; the static sets (a dict of Bits) when no position has a filter.
    if q.static is not None:
        return q.static
    return slots_passing(<SlotIndex>q.filters, e)


cdef class Net:
    """The network as the compiled phases read it, for one generation of queries."""

    def __dealloc__(self):
        cdef Py_ssize_t i
        for i in range(BTAB_KEYS):
            PyMem_Free(self.btab[i])
        PyMem_Free(self.hcid)


cdef Net net_new(object ecqs, object by_bit, WindowMasks windows, ClassIds classes):
    cdef Net n = Net.__new__(Net)
    n.ecqs = ecqs
    n.by_bit = by_bit
    n.windows = windows
    n.classes = classes
    n.ecq_plans = {}
    n.plans = []
    n.ecq_ids = []
    return n


cdef Ecq ecq_in(Net n, object cls):
    # The ECQ of ``cls`` (its ``ecq`` None when no query uses the class), made once
    # per generation.
    cdef Ecq q = n.ecq_plans.get(cls)
    if q is None:
        q = _ecq_of(n.ecqs.get(cls))
        q.cid = class_id(n.classes, cls)
        n.ecq_plans[cls] = q
    return q


cdef Ecq ecq_at(Net n, Py_ssize_t cid, object cls):
    # ecq_in by class id: a list index.
    cdef list at = n.ecq_ids
    if cid < PyList_GET_SIZE(at):
        got = <object>PyList_GET_ITEM(at, cid)
        if got is not None:
            return <Ecq>got
    cdef Ecq q = ecq_in(n, cls)
    while len(at) <= cid:
        at.append(None)
    at[cid] = q
    return q


cdef Plan plan_at(Net n, Py_ssize_t bitno):
    # The plan of the node with bit ``bitno``, through a list (no dict lookups).
    cdef list plans = n.plans
    cdef Plan p
    cdef Py_ssize_t i
    if bitno < len(plans):
        got = plans[bitno]
        if got is not None:
            return <Plan>got
    p = _plan_of(n.by_bit[bitno])
    p.direct = p.simple and p.derived_class not in n.ecqs
    if not p.cids:
        for i in range(p.length):
            if p.pos[i].cls != NULL:
                p.pos[i].cid = class_id(n.classes, <object>p.pos[i].cls)
        for i in range(p.nneg):
            p.neg[i].cid = class_id(n.classes, <object>p.neg[i].cls)
        p.cids = True
    while len(plans) <= bitno:
        plans.append(None)
    plans[bitno] = p
    _note_cids(n, p)
    return p


cdef int _note_cids(Net n, Plan p) except -1:
    # p's entries of Net.hcid: per query number q, hcid[2q] and hcid[2q + 1] are the
    # class ids of positions 1 and 0 of a sequence of two or three steps (-1: none, or
    # of several classes), HCID_LONG at 2q for longer ones, HCID_UNSET until the plan
    # is made. What the completion's prefetching reads instead of the cold plans.
    cdef Py_ssize_t i, want, b = p.bitno
    if 2 * b + 1 >= n.hcid_n:
        want = 2 * (2 * b + 2) + 64
        n.hcid = <int32_t *>grow(n.hcid, want * sizeof(int32_t))
        for i in range(n.hcid_n, want):
            n.hcid[i] = HCID_UNSET
        n.hcid_n = want
    if p.length > 3:
        n.hcid[2 * b] = HCID_LONG
    else:
        n.hcid[2 * b] = <int32_t>(p.pos[1].cid if p.length == 3 and p.pos[1].cls != NULL else -1)
    n.hcid[2 * b + 1] = <int32_t>(p.pos[0].cid if 2 <= p.length <= 3 and p.pos[0].cls != NULL else -1)
    return 0


cdef Py_ssize_t bucket(Net n, Py_ssize_t k, uint32_t q) except -1:
    # The summary bucket of query q's entries from PMB position k: 1 + the id of the
    # class it waits for at k + 1, or 0 when that position takes several classes.
    cdef Py_ssize_t b, i, want
    cdef uint16_t *tab = NULL
    if k <= BTAB_KEYS:
        if q < n.btab_n[k - 1]:
            b = n.btab[k - 1][q]
            if b != NO_BUCKET:
                return b
        else:
            want = 2 * q + 64
            tab = <uint16_t *>grow(n.btab[k - 1], want * sizeof(uint16_t))
            for i in range(n.btab_n[k - 1], want):
                tab[i] = NO_BUCKET
            n.btab[k - 1] = tab
            n.btab_n[k - 1] = want
    cdef Plan plan = plan_at(n, q)
    b = 0
    if k + 1 < plan.length and plan.pos[k + 1].cls != NULL and plan.pos[k + 1].cid + 1 < NO_BUCKET:
        b = plan.pos[k + 1].cid + 1
    if k <= BTAB_KEYS:
        n.btab[k - 1][q] = <uint16_t>b
    return b
