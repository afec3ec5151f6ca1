# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Negation in the compiled kernel, for the nodes whose negated components have one
primitive class each and no Kleene closure (``QState.negs``; the pure forms are
``ecq.matching.skeleton.negation_factor`` and ``ecq.matching.composite.trailing_factor``):

- **the blocker probe** (``Blockers``): a source's visible instances of a class, latest
  first, as C records, walked once per arriving instance (or per release of waiting
  matches) and shared by every node that probes the class, whatever the number of
  queries. ``inner_factor`` checks the middle and leading negations of one skeleton
  match on it: each negated component's records from the right neighbour back to the
  left one (or the registration), where the walk stops: the chain is in arrival order.
- **the waiting matches of trailing negation** (``Waiting``): one binary heap on
  (deadline, arrival order) for every node the kernel holds, as ``ecq.matching.deadlines`` is for
  the network's; ``trailing_factor`` checks a match when the clock passes its deadline.

The rules are docs/semantics.md §5's, as ``ecq.matching.composite.blockers`` applies them: the
same instances in the same order, so that the probability factors multiply to the same
last bit (a certain blocker ends the walk: 0 times anything left is 0)."""

from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.mem cimport PyMem_Free
from cpython.ref cimport PyObject, Py_INCREF, Py_XDECREF

from ecq.kernel._bitset cimport grow
from ecq.kernel._constants cimport Ecq, Neg, ecq_at
from ecq.kernel._events cimport ev, ev_float, ev_get, ev_int
from ecq.kernel._pmb cimport NativePMB

__all__ = ["Blockers", "Waiting"]


cdef class Blockers:
    """See _negation.pxd."""

    def __dealloc__(self):
        PyMem_Free(self.recs)
        PyMem_Free(self.off)
        PyMem_Free(self.cnt)
        PyMem_Free(self.gen)

    cdef void reset(self, Net n, object src, double hclock) noexcept:
        # On to another instance (or source, or horizon): every class is walked anew.
        self.n = n
        self.src = src
        self.hclock = hclock
        self.used = 0
        self.now += 1

    cdef Py_ssize_t of(self, Py_ssize_t cid, object cls, Py_ssize_t *count) except -1:
        # The records of class ``cls`` (id ``cid``): their offset in recs, their number in
        # ``count``. The visible instances are those at or above the class's drop
        # horizon at ``hclock`` (Chains.chain, ChainProbe).
        cdef Py_ssize_t i, want, first
        cdef double start, horizon
        cdef Ecq q
        cdef PyObject *pmb
        cdef Blk *r
        if cid >= self.ncls:
            want = cid + 8
            self.off = <Py_ssize_t *>grow(self.off, want * sizeof(Py_ssize_t))
            self.cnt = <Py_ssize_t *>grow(self.cnt, want * sizeof(Py_ssize_t))
            self.gen = <long long *>grow(self.gen, want * sizeof(long long))
            for i in range(self.ncls, want):
                self.gen[i] = -1
            self.ncls = want
        if self.gen[cid] == self.now:
            count[0] = self.cnt[cid]
            return self.off[cid]
        first = self.used
        q = ecq_at(self.n, cid, cls)
        if q.ecq is not None:
            horizon = self.hclock - q.window
            if q.frozen > horizon:
                horizon = q.frozen
            p = q.last.get(self.src)
            while p is not None:
                f = ev(p)
                # Its numbers from its PMB, which holds them as C numbers (the event's
                # are four objects, each a cache miss): every stored instance has one
                # until it is dropped.
                pmb = f.pmb
                if pmb != NULL and type(<object>pmb) is NativePMB:
                    start = (<NativePMB>pmb).start
                else:
                    start = ev_float(f.start, "start")
                if start >= horizon:
                    if self.used == self.cap:
                        self.cap = 2 * self.cap + 16
                        self.recs = <Blk *>grow(self.recs, self.cap * sizeof(Blk))
                    r = &self.recs[self.used]
                    r.e = <PyObject *>p
                    r.start = start
                    if pmb != NULL and type(<object>pmb) is NativePMB:
                        r.moment = (<NativePMB>pmb).moment
                        r.end = (<NativePMB>pmb).end
                        r.prob = (<NativePMB>pmb).prob
                    else:
                        r.moment = ev_int(f.moment, "moment")
                        r.end = ev_float(f.end, "end")
                        r.prob = ev_float(f.prob, "prob")
                    self.used += 1
                p = ev_get(f.prev, "prev")
        self.off[cid] = first
        self.cnt[cid] = self.used - first
        self.gen[cid] = self.now
        count[0] = self.used - first
        return first


cdef bint _passes(Neg *g, list env, PyObject *x) except -1:
    # The conditions that mention negated component g, with ``x`` bound to it; the
    # component's entry is given back (an equivalence test reads the others').
    cdef Py_ssize_t k = g.index
    held = <object>PyList_GET_ITEM(env, k)
    env[k] = <object>x
    try:
        for cond in <tuple>g.conds:
            if not cond(env):
                return False
        return True
    finally:
        env[k] = held


cdef double inner_factor(Blockers b, Plan plan, list env, double last_end) except -1.0:
    # docs/semantics.md §5, middle and leading negation of a skeleton match bound in
    # ``env`` (indexed by component) whose last event ends at ``last_end``: the product
    # of 1 - prob of the blockers (ecq.matching.skeleton.negation_factor).
    cdef double factor = 1.0, rb_start, lb_end, low = last_end - plan.window
    cdef long long rb_moment, floor
    cdef Py_ssize_t k, i, off, count
    cdef Neg *g
    cdef Blk *x
    for k in range(plan.nneg):
        g = &plan.neg[k]
        if g.right < 0:
            continue  # trailing: at its deadline
        rb = <object>PyList_GET_ITEM(env, g.right)
        rb_moment = ev_int(ev(rb).moment, "moment")
        rb_start = ev_float(ev(rb).start, "start")
        if g.left >= 0:
            lb = <object>PyList_GET_ITEM(env, g.left)
            floor = ev_int(ev(lb).moment, "moment")
            lb_end = ev_float(ev(lb).end, "end")
        else:
            floor = plan.reg
            lb_end = low
        off = b.of(g.cid, <object>g.cls, &count)
        for i in range(off, off + count):
            x = &b.recs[i]
            if x.moment >= rb_moment:
                continue
            if x.moment <= floor:
                break  # the chain is in arrival order: the rest came before
            if x.end > rb_start or lb_end > x.start:
                continue
            if g.conds != NULL and not _passes(g, env, x.e):
                continue
            factor *= 1.0 - x.prob
            if factor == 0.0:
                return factor
    return factor


cdef double trailing_factor(Blockers b, Plan plan, list ents, double deadline) except -1.0:
    # docs/semantics.md §5, trailing negation at the deadline of a match whose positive
    # events are ``ents``: blockers arrived after the last of them, starting after it
    # ends and ending by ``deadline`` (ecq.matching.composite.trailing_factor). ``b`` is at the
    # match's source, with the horizons of the clock before the op.
    cdef double factor = 1.0, lb_end
    cdef long long lb_moment
    cdef Py_ssize_t k, i, j, off, count
    cdef Neg *g
    cdef Blk *x
    cdef list env = None
    cdef PyObject *pmb
    lb = <object>PyList_GET_ITEM(ents, PyList_GET_SIZE(ents) - 1)
    pmb = ev(lb).pmb
    if pmb != NULL and type(<object>pmb) is NativePMB:
        lb_moment = (<NativePMB>pmb).moment
        lb_end = (<NativePMB>pmb).end
    else:
        lb_moment = ev_int(ev(lb).moment, "moment")
        lb_end = ev_float(ev(lb).end, "end")
    for k in range(plan.nneg):
        g = &plan.neg[k]
        if g.right >= 0:
            continue
        off = b.of(g.cid, <object>g.cls, &count)
        for i in range(off, off + count):
            x = &b.recs[i]
            if x.moment <= lb_moment:
                break
            if lb_end > x.start or x.end > deadline:
                continue
            if g.conds != NULL:
                if env is None:
                    # The binding by component (ecq.matching.skeleton.fast_cand's).
                    env = [None] * plan.nslots
                    for j in range(plan.length):
                        env[plan.pos[j].slot] = <object>PyList_GET_ITEM(ents, j)
                if not _passes(g, env, x.e):
                    continue
            factor *= 1.0 - x.prob
            if factor == 0.0:
                return factor
    return factor


cdef bint bound_ok(Plan plan, double prob) except -1:
    # ecq.matching.composite.bound_ok: a query's PROBABILITY >= p, else > 0.
    if plan.top and plan.probability is not None:
        return prob >= <double>plan.probability
    return prob > 0.0


# ------------------------------------------------------------------ waiting matches


cdef inline bint _before(Wait *a, Wait *b) noexcept:
    return a.deadline < b.deadline or (a.deadline == b.deadline and a.count < b.count)


cdef class Waiting:
    """The matches of trailing negation waiting for the clock (see _negation.pxd):
    O(log n) in and out, O(1) to read the earliest deadline. A node that is
    unregistered drops its matches as they come out (its ``QState.live``)."""

    def __cinit__(self):
        self.plans = []

    def __dealloc__(self):
        cdef Py_ssize_t i
        for i in range(self.n):
            Py_XDECREF(self.h[i].plan)
            Py_XDECREF(self.h[i].ents)
        PyMem_Free(self.h)

    cdef int push(self, double deadline, Plan plan, list ents, double prob, double start) except -1:
        cdef Py_ssize_t i, up
        cdef Wait w
        cdef list plans = self.plans
        if plan.bitno >= PyList_GET_SIZE(plans):
            plans.extend([None] * (plan.bitno + 1 - PyList_GET_SIZE(plans)))
        if <object>PyList_GET_ITEM(plans, plan.bitno) is not plan:
            plans[plan.bitno] = plan
        if self.n == self.cap:
            self.cap = 2 * self.cap + 16
            self.h = <Wait *>grow(self.h, self.cap * sizeof(Wait))
        self.count += 1
        w.deadline = deadline
        w.count = self.count
        Py_INCREF(plan)
        w.plan = <PyObject *>plan
        Py_INCREF(ents)
        w.ents = <PyObject *>ents
        w.prob = prob
        w.start = start
        i = self.n
        self.n += 1
        while i > 0:
            up = (i - 1) >> 1
            if not _before(&w, &self.h[up]):
                break
            self.h[i] = self.h[up]
            i = up
        self.h[i] = w
        return 0

    cdef void pop(self, Wait *out) noexcept:
        # The earliest entry (there is one) goes to ``out``, with its references.
        cdef Py_ssize_t i = 0, c
        cdef Wait last
        out[0] = self.h[0]
        self.n -= 1
        if self.n == 0:
            return
        last = self.h[self.n]
        while True:
            c = 2 * i + 1
            if c >= self.n:
                break
            if c + 1 < self.n and _before(&self.h[c + 1], &self.h[c]):
                c += 1
            if not _before(&self.h[c], &last):
                break
            self.h[i] = self.h[c]
            i = c
        self.h[i] = last

    cdef double earliest(self) noexcept:
        return self.h[0].deadline if self.n else float("inf")

    def forget(self, Py_ssize_t bitno):
        """Node ``bitno`` is unregistered: its matches are dropped as they come out,
        and those on top at once, so that the earliest deadline is a live one's."""
        cdef Wait w
        if bitno < PyList_GET_SIZE(self.plans) and self.plans[bitno] is not None:
            (<Plan>self.plans[bitno]).dead = True
            self.plans[bitno] = None
        while self.n and (<Plan>self.h[0].plan).dead:
            self.pop(&w)
            Py_XDECREF(w.plan)
            Py_XDECREF(w.ents)

    def live(self):
        """Matches held for live nodes. O(n)."""
        cdef Py_ssize_t i
        return sum([1 for i in range(self.n) if not (<Plan>self.h[i].plan).dead])

    def _check(self):
        cdef Py_ssize_t i
        for i in range(1, self.n):
            assert not _before(&self.h[i], &self.h[(i - 1) >> 1]), "the waiting matches must form a heap"
