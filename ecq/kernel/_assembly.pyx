# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Assembling the matches of a plain sequence that an arriving instance completes
(``ecq.matching.assembly.assemble_seq`` is the pure form): binding components from the last back
to the first along the source's back chains, MODE RECENT taking the first, most
recent, valid match.

Candidates are tried PMB by PMB: each native PMB holds what is read of its instance
(start, end, probability, moment as C numbers) and links to the previous instance of
its class at the source (``NativePMB.prev``), so an event is touched only when it is
bound. A match's events go into ``Found`` (owned references); the lists the assembly
binds them in never leave it, and are reused."""

from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.mem cimport PyMem_Free
from cpython.ref cimport PyObject, Py_INCREF, Py_XDECREF
from libc.math cimport INFINITY

from ecq.kernel._bitset cimport bits_has, grow, prefetch_lines
from ecq.kernel._constants cimport INLINE_POS, Ecq, Net, Plan, ecq_at, ecq_in
from ecq.kernel._events cimport ev, ev_float, ev_get, ev_int
from ecq.kernel._negation cimport Blockers, Wait, Waiting, bound_ok, inner_factor, trailing_factor
from ecq.kernel._pmb cimport Groups, NativePMB, find_in
from ecq.kernel._summary cimport SrcSummary, summary_head

from ecq.matching.assembly import by_recency as _by_recency

__all__ = ["Found"]


cdef class Found:
    """The matches one instance completes (see _assembly.pxd); emptied by ``clear``
    after each instance."""

    def __dealloc__(self):
        self.clear()
        PyMem_Free(self.ev)
        PyMem_Free(self.off)
        PyMem_Free(self.plan)
        PyMem_Free(self.prob)
        PyMem_Free(self.start)

    cdef int add(self, Plan plan, list env, Py_ssize_t length, double prob, double start) except -1:
        cdef Py_ssize_t k
        cdef PyObject *p
        if self.n + 1 >= self.cap:
            self.cap = 2 * self.cap + 8
            self.off = <Py_ssize_t *>grow(self.off, (self.cap + 1) * sizeof(Py_ssize_t))
            self.plan = <PyObject **>grow(self.plan, self.cap * sizeof(PyObject *))
            self.prob = <double *>grow(self.prob, self.cap * sizeof(double))
            self.start = <double *>grow(self.start, self.cap * sizeof(double))
        if self.n == 0:
            self.off[0] = 0
        if self.nev + length > self.cap_ev:
            self.cap_ev = 2 * (self.nev + length) + 16
            self.ev = <PyObject **>grow(self.ev, self.cap_ev * sizeof(PyObject *))
        for k in range(length):
            p = PyList_GET_ITEM(env, k)
            Py_INCREF(<object>p)
            self.ev[self.nev + k] = p
        self.nev += length
        Py_INCREF(plan)
        self.plan[self.n] = <PyObject *>plan
        self.prob[self.n] = prob
        self.start[self.n] = start
        self.n += 1
        self.off[self.n] = self.nev
        return 0

    cdef int add_one(self, Plan plan, object e, double prob, double start) except -1:
        # A match of one event (a single-component query).
        cdef list env = [e]
        return self.add(plan, env, 1, prob, start)

    cdef void clear(self) noexcept:
        cdef Py_ssize_t i
        for i in range(self.nev):
            Py_XDECREF(self.ev[i])
        for i in range(self.n):
            Py_XDECREF(self.plan[i])
        self.nev = 0
        self.n = 0

    cdef list pairs(self):
        # [(node, entries, probability)] for each match (what Network.settle_plain takes).
        cdef Py_ssize_t i, k
        return [
            (
                (<Plan>self.plan[i]).qs,
                [<object>self.ev[k] for k in range(self.off[i], self.off[i + 1])],
                self.prob[i],
            )
            for i in range(self.n)
        ]


cdef class Chains:
    """The probe of ``Network._probe`` for one instance, walking the chains directly: a
    source's visible instances of a class (start at or above the class's horizon),
    latest first. One per kernel, moved on to each instance by ``at``."""

    def __cinit__(self):
        self.blk = Blockers()

    cdef void at(self, Net n, object src, double hclock, SrcSummary summary) noexcept:
        self.n = n
        self.chains = None
        self.src = src
        self.hclock = hclock
        self.summary = summary
        self.blk.reset(n, src, hclock)

    cdef PyObject *head(self, Py_ssize_t cid, object cls, double *horizon) except? NULL:
        # The head of the source's chain of ``cls`` (class id ``cid``) as its summary
        # keeps it (borrowed: nothing changes while one instance's matches are
        # assembled), NULL when none; ``horizon``: the least start visible.
        if self.summary is None:
            return NULL
        cdef Ecq q = ecq_at(self.n, cid, cls)
        if q.ecq is None:
            return NULL
        cdef double h = self.hclock - q.window
        horizon[0] = q.frozen if q.frozen > h else h
        return summary_head(self.summary, cid)

    cdef list chain(self, object cls):
        # As a list, cached for the instance being processed (Network._probe).
        cdef list out
        if self.chains is None:
            self.chains = {}
        out = self.chains.get(cls)
        if out is not None:
            return out
        out = []
        self.chains[cls] = out
        cdef Ecq q = ecq_in(self.n, cls)
        if q.ecq is None:
            return out
        cdef double horizon = self.hclock - q.window
        if q.frozen > horizon:
            horizon = q.frozen
        p = q.last.get(self.src)
        while p is not None:
            if ev_float(ev(p).start, "start") >= horizon:
                out.append(p)
            p = ev_get(ev(p).prev, "prev")
        return out


cdef class Assembly:
    """One kernel's assembly: the node's constants and the match being built."""

    def __cinit__(self):
        self.envs = [[] for _ in range(INLINE_POS + 1)]
        self.probe = Chains()
        self.pyprobe = ChainsProbe(self.probe)
        self.found = Found()
        self.waiting = Waiting()
        self.due = Found()

    cdef bint fill(self, Py_ssize_t i, long long nxt_moment, double nxt_start) except -1:
        # Bind position i (each earlier one recursively) to the latest valid candidate
        # arrived before the instance bound next (its moment and start given); whether
        # the assembly is over.
        cdef PyObject *one = self.plan.pos[i].cls
        cdef tuple classes
        cdef PyObject *p
        cdef double horizon
        cdef int r
        # A Kleene group's latest element only (QState.latest_only, as
        # ecq.matching.assembly.assemble_seq): the largest start of the later candidates, which
        # any group holding an older one with a start no later would hold too, so the
        # leaf would reject it. Without this, B+ in MODE ALL tries every B of the window
        # as the group's latest element.
        cdef double later_start = -INFINITY
        cdef double *later = &later_start if self.plan.pos[i].latest_only else NULL
        if one != NULL:
            # The source's chain of the class, from PMB to PMB.
            p = self.probe.head(self.plan.pos[i].cid, <object>one, &horizon)
            while p != NULL:
                if (<NativePMB>p).start >= horizon:
                    r = self._try_native(i, <NativePMB>p, nxt_moment, nxt_start, later)
                    if r:
                        return r > 0
                p = <PyObject *>(<NativePMB>p).prev
                if <object>p is None:
                    break
            return False
        classes = <tuple>PyList_GET_ITEM(self.plan.classes_at, i)
        for c in _by_recency([self.probe.chain(cls) for cls in classes]):
            r = self._try(i, c, nxt_moment, nxt_start, later)
            if r:
                return r > 0
        return False

    cdef int _try_native(
        self, Py_ssize_t i, NativePMB pmb, long long nxt_moment, double nxt_start, double *later
    ) except -2:
        # Candidate ``pmb``'s instance at position i: 1 when the assembly is over, 0 to
        # go on to the next (older) candidate, -1 when no older candidate can do.
        # ``later``: the latest-element rule's running start (fill), NULL without it.
        cdef double t
        if pmb.event is None:
            return 0  # dropped
        if pmb.moment >= nxt_moment:
            return 0
        if pmb.moment <= self.reg:
            return -1  # everything further back arrived before the query existed
        if pmb.end > nxt_start:
            return 0
        if later != NULL:
            if later[0] >= pmb.start:
                return 0  # any group holding it holds a later candidate too
            later[0] = pmb.start
        if i == 0 and bits_has(pmb.init_bits, self.bitno):
            if pmb.start < self.bound:
                return 0
        elif i == 1:
            if pmb.g1block == NULL or not find_in(pmb.g1block, pmb.g1n, self.bitno, &t) or t < self.bound:
                return 0
        else:
            groups = pmb.groups_at(i)
            if groups is None or not find_in((<Groups>groups).block, (<Groups>groups).n, self.bitno, &t):
                return 0
            if t < self.bound:
                return 0
        return self._bind(i, pmb.event, pmb.prob, pmb.moment, pmb.start)

    cdef int _try(self, Py_ssize_t i, object p, long long nxt_moment, double nxt_start, double *later) except -2:
        # Candidate event ``p`` (a position of several classes): as _try_native, on its
        # PMB (every instance the kernel stores has a native PMB; None once dropped).
        pmb = ev_get(ev(p).pmb, "pmb")
        if pmb is None:
            return 0
        return self._try_native(i, <NativePMB?>pmb, nxt_moment, nxt_start, later)

    cdef int _bind(self, Py_ssize_t i, object p, double prob, long long moment, double start) except -2:
        # ``p`` (its probability, moment and start given) takes position i: the
        # conditions checked there, then the positions before it, or the match is
        # complete. As _try.
        cdef Plan plan = self.plan
        if plan.remap:
            self.env[plan.pos[i].slot] = p
        else:
            self.env[i] = p
        self.probs[i] = prob
        if plan.pos[i].checked:
            for check in <tuple>PyList_GET_ITEM(plan.checks_at, i):
                if not check(self.env):
                    return 0
        if i:
            return 1 if self.fill(i - 1, moment, start) else 0
        return self._complete(start)

    cdef int _complete(self, double start) except -2:
        # The skeleton is bound (its first event starting at ``start``): a match, or
        # through ecq.matching.skeleton.leaf a candidate or none. 1 when the assembly is over.
        cdef double t
        cdef Py_ssize_t k
        cdef Plan plan = self.plan
        cdef list ents
        if plan.leaf is not None:
            got = plan.leaf(plan.qs, self.env, self.last, self.pyprobe)
            if got is None:
                return 0
            ents = <list>got[0]
            first = ents[0]
            if type(first) is list:
                start = min([ev_float(ev(x).start, "start") for x in <list>first])
            else:
                start = ev_float(ev(first).start, "start")
            self.found.add(plan, ents, len(ents), <double>got[1], start)
            return 0 if self.mode_all else 1
        # The match's probability: its events' product, in their order.
        t = 1.0
        for k in range(plan.length):
            t *= self.probs[k]
        if plan.inner:
            # Middle and leading negation, checked here (_negation.pyx).
            t *= inner_factor(self.probe.blk, plan, self.env, self.last_end)
            if not bound_ok(plan, t):
                return 0
        elif self.min_prob is not None and t < <double>self.min_prob:
            return 0
        if plan.held:
            return self._hold(t, start)
        if plan.remap:
            ents = [self.env[plan.pos[k].slot] for k in range(plan.length)]
            self.found.add(plan, ents, plan.length, t, start)
        else:
            self.found.add(plan, self.env, plan.length, t, start)
        return 0 if self.mode_all else 1

    cdef int _hold(self, double prob, double start) except -2:
        # A match of a node with trailing negation (``plan.held``), selected: it waits for
        # the clock to pass its deadline in the kernel's heap (Network._settle's rule),
        # or, past it already (an event late in time), goes to found for Python to settle.
        cdef Plan plan = self.plan
        cdef Py_ssize_t k
        cdef double deadline = start + plan.window
        cdef list ents = [self.env[plan.pos[k].slot] for k in range(plan.length)]
        if self.probe.hclock > deadline:
            self.found.add(plan, ents, plan.length, prob, start)
        else:
            self.waiting.push(deadline, plan, ents, prob, start)
        return 0 if self.mode_all else 1


cdef list release(Assembly a, Net n, double clock_before, double clock, bint python):
    # Phase 0 of an op (docs/semantics.md): the waiting matches whose deadline ``clock``
    # exceeds, in deadline order, checked for trailing blockers with the horizons of
    # ``clock_before``; those of unregistered nodes are dropped. Without ``python`` they
    # go to ``a.due`` (their probability bound checked) and None is returned, unless one
    # needs Python (some query reads its node's @name class); then, as with ``python``,
    # all are returned as [(node, events, probability)] for Network.release.
    cdef Waiting w = a.waiting
    cdef Blockers b = a.probe.blk
    cdef Wait *taken = NULL
    cdef Py_ssize_t i, m = 0, cap = 0
    cdef Plan plan
    cdef double prob
    cdef list rest = None
    cdef bint at_src = False
    cur = None
    try:
        while w.n and clock > w.h[0].deadline:
            if m == cap:
                cap = 2 * cap + 8
                taken = <Wait *>grow(taken, cap * sizeof(Wait))
            w.pop(&taken[m])
            m += 1
            plan = <Plan>taken[m - 1].plan
            if not python and not plan.dead and plan.derived_class in n.ecqs:
                python = True
        if python:
            rest = []
        # What the checks read is cold (the matches came in a window ago): asked for
        # all at once, so that the misses overlap.
        for i in range(m):
            prefetch_lines(<const void *>taken[i].ents, 1)
            prefetch_lines(<const void *>taken[i].plan, 1)
        for i in range(m):
            ents = <list>taken[i].ents
            last = <PyObject *>PyList_GET_ITEM(ents, PyList_GET_SIZE(ents) - 1)
            prefetch_lines(<const void *>last, 1)
            prefetch_lines(<const void *>PyList_GET_ITEM(ents, 0), 1)
            if ev(<object>last).pmb != NULL:
                prefetch_lines(<const void *>ev(<object>last).pmb, 1)
        for i in range(m):
            plan = <Plan>taken[i].plan
            if plan.dead:
                continue
            ents = <list>taken[i].ents
            src = ev_get(ev(<object>PyList_GET_ITEM(ents, 0)).src, "src")
            if not at_src or src != cur:
                # Due matches of one source share the walk of its chains.
                b.reset(n, src, clock_before)
                at_src = True
                cur = src
            prob = taken[i].prob * trailing_factor(b, plan, ents, taken[i].deadline)
            if python:
                rest.append((plan.qs, ents, prob))
            elif bound_ok(plan, prob):
                a.due.add(plan, ents, len(ents), prob, taken[i].start)
    finally:
        for i in range(m):
            Py_XDECREF(taken[i].plan)
            Py_XDECREF(taken[i].ents)
        PyMem_Free(taken)
    return rest


cdef class ChainsProbe:
    """``Chains`` as Python calls it (``ecq.kernel.interface.Probe``): what
    ``ecq.matching.skeleton.leaf`` reads the source's chains with."""

    cdef Chains chains

    def __cinit__(self, Chains chains):
        self.chains = chains

    def __call__(self, cls):
        return self.chains.chain(cls)

    def again(self, cls):
        return list(self.chains.chain(cls))


cdef list _env(Assembly a, Py_ssize_t n, object last):
    # [last] * n, in the list kept for that length.
    cdef list env
    cdef Py_ssize_t k
    if n > INLINE_POS:
        return [last] * n
    env = <list>PyList_GET_ITEM(a.envs, n)
    if len(env) != n:
        env[:] = [last] * n
    else:
        for k in range(n):
            env[k] = last
    return env


cdef int assemble(Assembly a, Plan plan, object last, double last_end, double last_start, double last_prob,
                  long long last_moment) except -1:
    # The matches of ``plan``'s node that ``last`` completes go to ``a.found``. The
    # chains probe (``a.probe``) is at ``last``'s source already.
    cdef Py_ssize_t n = plan.length, k
    a.plan = plan
    a.last = last
    a.last_end = last_end
    a.env = _env(a, plan.nslots, last)
    a.probs = &a.small_probs[0] if n <= INLINE_POS else <double *>grow(NULL, n * sizeof(double))
    try:
        a.probs[n - 1] = last_prob
        a.bound = last_end - plan.window
        a.reg = plan.reg
        a.bitno = plan.bitno
        a.mode_all = plan.mode_all
        a.min_prob = plan.probability
        if n == 1:
            # One positive component (and a negation): only the last event is bound.
            if last_start < a.bound:
                return 0
            if plan.pos[0].checked:
                for check in <tuple>PyList_GET_ITEM(plan.checks_at, 0):
                    if not check(a.env):
                        return 0
            a._complete(last_start)
        else:
            a.fill(n - 2, last_moment, last_start)
    finally:
        if a.probs != &a.small_probs[0]:
            PyMem_Free(a.probs)
        a.probs = NULL
        # The bound events are found's now (or nobody's): the list lets them go.
        for k in range(plan.nslots):
            a.env[k] = None
        a.env = None
        a.last = None
    return 0
