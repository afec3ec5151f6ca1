# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Conjunctions of primitive classes in the compiled kernel (ecq.conjunction's presence
and candidates, and ecq.composite's assembly of a conjunction, in C).

Per source and class that conjunctions use, ``Conjunctions`` keeps the stored instances
that passed some conjunction's filter on the class, each with its *own bits* (the
conjunctions whose filter it passed, found once when it arrived: ``Kernel.slot_passing``),
plus the latest start and the union of the own bits (the presence of ecq.conjunction).
An arriving instance ``x`` with own bits ``own``:

- finds where each class present at its source is, once (a table by class number);
- per conjunction ``q`` of ``own`` (lowest bit first) tests the presence in C: every
  other positive component's class present, ``q``'s bit in its union, its latest start
  within ``q``'s window of ``x`` (``conjunction._by_query``, by class number);
- a *simple* conjunction that passes (every component positive, of one primitive class,
  the classes distinct: the paper's CNJ templates and the demo's conjunctions) is
  assembled here. Each class's visible instances for ``x`` (start at or above the
  class's drop horizon, arrived before ``x``) are read once per arriving instance and
  shared by every conjunction that needs the class (the paper's sub-pattern sharing);
  a query's pool takes those of them it may see (arrived after its registration, its
  bit among their own bits, so its filter is never evaluated again, within its window
  with ``x``). The combinations, one instance per class, are tried most recent first,
  as ``composite._conj_candidates`` tries them (its other combinations fail its first
  assignment), the conditions across events evaluated once per combination, the
  probability and its bound as there; RECENT keeps the first, ALL every one. A match
  that needs nothing more (a top-level query, no RETURN, no probability clause, no
  ``@name`` reader) becomes a compiled ``Match`` here (``made``), which the kernel's
  loop numbers and emits with the sequences' matches; any other becomes a ``Cand``;
- any other conjunction that passes is handed back to the network, which assembles it
  in Python (negation inside the conjunction, repeated classes, several classes per
  component, instances of derived classes).

Cleaning is O(dropped): per class, the noted instances wait in one queue in arrival
order (``fifo``), and ``prune`` takes them from its front while their start is below the
class's drop horizon, as ``SIQ.clean`` does, cutting each from its source's list.

The cost per arriving instance is O(classes present + own conjunctions × their classes)
in C, plus one read of each class that some conjunction's presence test passes and the
pools of those conjunctions; nothing is evaluated per query in Python except the
conditions across events of a combination in the window.
"""

cimport cython
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.mem cimport PyMem_Free
from cpython.ref cimport PyObject
from libc.stdint cimport int32_t, uint64_t

from ecq.kernel._bitset cimport Bits, bits_and, bits_from_int, bits_has, bits_or, ctz64, grow
from ecq.kernel._constants cimport ClassIds, class_id
from ecq.kernel._events cimport Match, ev, ev_float, ev_get, ev_int
from ecq.kernel._filters cimport SlotIndex, slot_index

from collections import deque

from ecq.candidate import Cand

__all__ = ["Conjunctions"]

cdef object _Cand = Cand
cdef object _deque = deque
cdef frozenset _NO_PRIMS = frozenset()
cdef double _INF = float("inf")
cdef double _NEG_INF = float("-inf")


cdef class _Entry:
    """A noted instance (see _conjunction.pxd)."""


cdef class _Present:
    """One source's noted instances of one class (see _conjunction.pxd)."""


cdef class _Query:
    """One conjunction node as the presence test and the assembly read it (see
    _conjunction.pxd)."""


cdef class Klass:
    """The conjunctions of one class for one generation of queries (see _conjunction.pxd)."""


cdef _Query _query_of(object qs, ClassIds classes, object ecqs):
    cdef _Query q = _Query.__new__(_Query)
    cdef Py_ssize_t j
    cq = qs.cq
    comps = cq.comps
    q.qs = qs
    q.name = cq.name
    q.never = bool(cq.never)
    q.mode_all = bool(cq.mode_all)
    q.window = float(cq.window or 0.0)
    q.reg = qs.reg
    q.order = qs.order
    q.length = len(comps)
    q.bounded = bool(cq.top) and cq.probability is not None
    q.least = float(cq.probability) if q.bounded else 0.0
    q.checks = tuple(check for _, check in cq.checks)
    positives = [comps[i] for i in cq.positives]
    q.npos = len(positives)
    q.loose = q.npos > MAX_COMPS or any(len(c.classes) != 1 for c in positives)
    if not q.loose:
        for j, c in enumerate(positives):
            q.cids[j] = <int32_t>class_id(classes, next(iter(c.classes)))
            q.slot[j] = c.index
    q.simple = (
        not q.loose
        and cq.kind == "and"
        and q.npos == q.length
        and all(c.kleene is None and c.sub is None and not next(iter(c.classes)).startswith("@") for c in positives)
        and len({next(iter(c.classes)) for c in positives}) == q.npos
    )
    # As the Python path settles it (Network._finish): nothing to compute, hold or feed.
    q.direct = (
        q.simple and bool(cq.top) and not cq.returns and cq.probability is None and not cq.trailing
        and qs.derived_class not in ecqs
    )
    return q


cdef class Conjunctions:
    """The presence and the assembly of one network's conjunctions (see the module's
    docstring); the compiled kernel's ``note_conjunction``, ``complete_conjunctions``
    and ``prune_conjunctions``."""

    def __cinit__(self, network, ClassIds classes):
        self.network = network
        self.classes = classes
        self.presence = {}
        self.fifo = []
        self.queries = []
        self.klasses = {}
        self.hwin = self.hfrozen = NULL
        self.hset = NULL
        self.hcap = 0
        self.slot_of = NULL
        self.slot_cap = 0
        self.gath = self.pool = NULL
        self.ngath = self.gcap = self.npool = self.cap = 0
        self.goff = NULL
        self.goff_cap = 0
        self.made = []
        self.made_q = []
        self.assembled = self.handed = 0

    def __dealloc__(self):
        PyMem_Free(self.hwin)
        PyMem_Free(self.hfrozen)
        PyMem_Free(self.hset)
        PyMem_Free(self.slot_of)
        PyMem_Free(self.gath)
        PyMem_Free(self.goff)
        PyMem_Free(self.pool)

    def queries_changed(self):
        cdef Py_ssize_t i
        self.queries = []
        self.klasses = {}
        for i in range(self.hcap):
            self.hset[i] = 0

    cdef Klass klass(self, object cls):
        # The conjunctions of ``cls`` (None: none), made once per generation.
        cdef Klass k
        try:
            return self.klasses[cls]
        except KeyError:
            pass
        ecq = self.network.ecqs.get(cls)
        if ecq is None or not ecq.cnj_final or ecq.cnj_filter is None:
            k = None
        else:
            k = Klass.__new__(Klass)
            k.ecq = ecq
            k.index = slot_index(ecq.cnj_filter)
            k.final = bits_from_int(ecq.cnj_final)
            k.loop = not ecq.general_final and not ecq.disj
            k.cid = class_id(self.classes, cls)
        self.klasses[cls] = k
        return k

    cdef _Query query(self, Py_ssize_t bitno):
        # The node with bit ``bitno``, through a list (no dict lookups).
        cdef list qs = self.queries
        if bitno < PyList_GET_SIZE(qs):
            got = <object>PyList_GET_ITEM(qs, bitno)
            if got is not None:
                return <_Query>got
        while PyList_GET_SIZE(qs) <= bitno:
            qs.append(None)
        net = self.network
        q = _query_of(net.by_bit[bitno], self.classes, net.ecqs)
        qs[bitno] = q
        return q

    cdef double low(self, Py_ssize_t cid, double hclock) except? -1.0:
        # The drop horizon of class ``cid`` at ``hclock`` (ECQ.horizon, from its
        # window and frozen value read once per generation); +inf without an ECQ.
        cdef Py_ssize_t i, want
        cdef double moving
        if cid >= self.hcap:
            want = cid + 16
            self.hwin = <double *>grow(self.hwin, want * sizeof(double))
            self.hfrozen = <double *>grow(self.hfrozen, want * sizeof(double))
            self.hset = <char *>grow(self.hset, want * sizeof(char))
            for i in range(self.hcap, want):
                self.hset[i] = 0
            self.hcap = want
        if not self.hset[cid]:
            ecq = self.network.ecqs.get(self.classes.names[cid])
            if ecq is None:
                self.hwin[cid] = _NEG_INF
                self.hfrozen[cid] = _INF
            else:
                self.hwin[cid] = ecq.drop.window
                self.hfrozen[cid] = ecq.drop.frozen
            self.hset[cid] = 1
        moving = hclock - self.hwin[cid]
        return moving if moving > self.hfrozen[cid] else self.hfrozen[cid]

    def sources(self):
        """The presence in ecq.conjunction's form: ``{src: {class: (latest start,
        union of own bits)}}``."""
        names = self.classes.names
        return {
            src: {names[(<_Present>p).cid]: ((<_Present>p).latest, (<_Present>p).union.to_int()) for p in plist}
            for src, plist in self.presence.items()
        }

    # ------------------------------------------------------------- presence

    def note(self, e, str cls, own):
        """A stored instance ``e`` of ``cls`` passing the conjunctions' filters of
        ``own`` (an int); one that passes none is not noted. O(1)."""
        if own:
            self.note_bits(e, cls, bits_from_int(own))

    cdef int note_bits(self, object e, object cls, Bits bits) except -1:
        cdef _Entry x = _Entry.__new__(_Entry)
        cdef Py_ssize_t i, cid = class_id(self.classes, cls)
        cdef _Present p = None
        cdef list plist
        f = ev(e)
        x.e = e
        x.start = ev_float(f.start, "start")
        x.end = ev_float(f.end, "end")
        x.prob = ev_float(f.prob, "prob")
        x.moment = ev_int(f.moment, "moment")
        x.arrival = ev_int(f.arrival, "arrival")
        x.derived = f.prims != NULL and <object>f.prims is not None
        x.own = bits
        src = ev_get(f.src, "src")
        plist = self.presence.get(src)
        if plist is None:
            plist = self.presence[src] = []
        for i in range(PyList_GET_SIZE(plist)):
            if (<_Present>PyList_GET_ITEM(plist, i)).cid == cid:
                p = <_Present>PyList_GET_ITEM(plist, i)
                break
        if p is None:
            p = _Present.__new__(_Present)
            p.entries = [x]
            p.latest = x.start
            p.union = bits
            p.cid = cid
            p.src = src
            plist.append(p)
        else:
            p.entries.append(x)
            if x.start > p.latest:
                p.latest = x.start
            p.union = bits_or(p.union, bits)
        cdef list fifo = self.fifo
        while PyList_GET_SIZE(fifo) <= cid:
            fifo.append(None)
        queue = <object>PyList_GET_ITEM(fifo, cid)
        if queue is None:
            queue = fifo[cid] = _deque()
        queue.append(p)
        return 0

    def prune(self, double clock):
        """Drop the noted instances below their class's drop horizon at ``clock``: per
        class, from the front of its queue while their start is below it (as
        ``SIQ.clean`` does), each cut from its source's list, and the classes and
        sources left with none. O(classes + dropped)."""
        cdef Py_ssize_t cid
        cdef double low
        cdef _Present p
        cdef list plist
        for cid in range(PyList_GET_SIZE(self.fifo)):
            queue = self.fifo[cid]
            if not queue:
                continue
            low = self.low(cid, clock)
            while queue:
                p = <_Present>queue[0]
                if not (<_Entry>PyList_GET_ITEM(p.entries, 0)).start < low:
                    break
                queue.popleft()
                del p.entries[0]
                if not p.entries:
                    plist = <list>self.presence[p.src]
                    plist.remove(p)
                    if not plist:
                        del self.presence[p.src]

    # ------------------------------------------------------------- candidates

    def complete(self, ecq, e, own, double hclock, list completed):
        """The conjunctions ``e`` (of ``ecq``'s class, passing the conjunctions'
        filters of ``own``) may complete: the simple ones assembled here, their
        candidates appended to ``completed`` as ``(node, Cand)``; returns the bits of
        the others that pass the presence test, for the network to assemble."""
        cdef Klass k = self.klass(ecq.cls)
        if k is None or not own:
            return 0
        return self.complete_bits(k, e, bits_from_int(own), hclock, completed, False)

    cdef object complete_bits(self, Klass k, object e, Bits own, double hclock, list completed, bint direct):
        # complete() with the own bits as Bits, for the kernel's event loop too; with
        # ``direct`` the matches that need nothing more go to ``made`` as compiled
        # Matches, the others to ``completed`` as ``(node, Cand)``.
        cdef Bits bits = bits_and(own, k.final)
        if not bits.n:
            return 0
        f = ev(e)
        cdef long long moment = ev_int(f.moment, "moment")
        cdef double end = ev_float(f.end, "end")
        cdef bint derived = f.prims != NULL and <object>f.prims is not None
        src = ev_get(f.src, "src")
        cdef list plist = self.presence.get(src)
        cdef Py_ssize_t i, j, bitno, xi, np = 0, ncls = len(self.classes.names)
        cdef Py_ssize_t cid, si, want
        cdef bint ok, skipped
        cdef uint64_t w
        cdef _Query q
        cdef _Present p
        cdef int got
        # Where each class present at the source is (its _Present's index), once.
        if ncls > self.slot_cap:
            want = ncls + 16
            self.slot_of = <int32_t *>grow(self.slot_of, want * sizeof(int32_t))
            for i in range(self.slot_cap, want):
                self.slot_of[i] = -1
            self.slot_cap = want
        if plist is not None:
            np = PyList_GET_SIZE(plist)
            if 2 * np > self.goff_cap:
                self.goff_cap = 2 * np + 16
                self.goff = <Py_ssize_t *>grow(self.goff, self.goff_cap * sizeof(Py_ssize_t))
            for i in range(np):
                self.slot_of[(<_Present>PyList_GET_ITEM(plist, i)).cid] = <int32_t>i
                self.goff[2 * i] = -1
        self.ngath = 0
        rest = 0
        try:
            for i in range(bits.n):
                w = bits.w[i]
                while w:
                    bitno = (i << 6) + ctz64(w)
                    w &= w - 1
                    q = self.query(bitno)
                    if q.loose:
                        rest |= 1 << bitno
                        continue
                    if q.never or moment <= q.reg:
                        continue
                    # The presence test (conjunction._by_query): every other positive
                    # component's class present, serving q within its window.
                    ok = True
                    skipped = False
                    xi = -1
                    for j in range(q.npos):
                        cid = q.cids[j]
                        if cid == k.cid and not skipped:
                            skipped = True  # the arriving instance's component
                            xi = j
                            continue
                        si = self.slot_of[cid] if cid < self.slot_cap else -1
                        if si < 0:
                            ok = False
                            break
                        p = <_Present>PyList_GET_ITEM(plist, si)
                        if not bits_has(p.union, <size_t>bitno) or end - p.latest > q.window:
                            ok = False
                            break
                    if not ok:
                        continue
                    if q.simple and not derived:
                        got = self._assemble(q, bitno, xi, e, plist, hclock, completed, direct)
                        if got >= 0:
                            continue
                    rest |= 1 << bitno
                    self.handed += 1
        finally:
            for i in range(np):
                self.slot_of[(<_Present>PyList_GET_ITEM(plist, i)).cid] = -1
        return rest

    cdef int hand_made(self, object x, list completed) except -1:
        # The matches in ``made`` as ``(node, Cand)`` on ``completed``, for the network
        # to settle (some other match of ``x`` needs Python).
        cdef Match m
        cdef Py_ssize_t i
        for i in range(PyList_GET_SIZE(self.made)):
            m = <Match>PyList_GET_ITEM(self.made, i)
            completed.append(
                ((<_Query>PyList_GET_ITEM(self.made_q, i)).qs, _Cand(m._events, m.start, m.end, m.prob, x, (), _NO_PRIMS))
            )
        self.made = []
        self.made_q = []
        return 0

    cdef int _room(self, _Pick **buf, Py_ssize_t *cap, Py_ssize_t n) except -1:
        if n > cap[0]:
            cap[0] = n if n > 2 * cap[0] else 2 * cap[0]
            buf[0] = <_Pick *>grow(buf[0], cap[0] * sizeof(_Pick))
        return 0

    cdef int _gather(self, Py_ssize_t si, _Present p, double low, long long xm, long long xa) except -1:
        # The source's instances of p's class visible to the arriving instance (start at
        # or above the horizon, arrived before it), latest first, read once: gath from
        # goff[2 * si], goff[2 * si + 1] of them.
        cdef list entries = p.entries
        cdef Py_ssize_t k, count = 0
        cdef _Entry y
        cdef _Pick *pick
        self.goff[2 * si] = self.ngath
        for k in range(PyList_GET_SIZE(entries) - 1, -1, -1):
            y = <_Entry>PyList_GET_ITEM(entries, k)
            if y.start < low:
                continue
            if y.moment > xm or (y.moment == xm and y.arrival >= xa):
                continue
            self._room(&self.gath, &self.gcap, self.ngath + 1)
            pick = &self.gath[self.ngath]
            pick.e = <PyObject *>y.e
            pick.own = <PyObject *>y.own
            pick.start = y.start
            pick.end = y.end
            pick.prob = y.prob
            pick.moment = y.moment
            pick.arrival = y.arrival
            pick.derived = y.derived
            pick.j = -1
            self.ngath += 1
            count += 1
        self.goff[2 * si + 1] = count
        return 0

    cdef int _assemble(
        self, _Query q, Py_ssize_t bitno, Py_ssize_t xi, object x, list plist, double hclock,
        list out, bint direct
    ) except -2:
        # A simple conjunction that x may complete (its presence test passed): its
        # pool, then the combinations. Returns 1 when assembled, 0 when some class has
        # no instance q may see, -1 when the pool holds a derived instance (Python
        # assembles).
        f = ev(x)
        cdef double xs = ev_float(f.start, "start"), xe = ev_float(f.end, "end")
        cdef long long xm = ev_int(f.moment, "moment"), xa = ev_int(f.arrival, "arrival")
        cdef double window = q.window
        cdef Py_ssize_t n = q.length, j, k, count, a, si, off, cnt
        cdef _Pick pick
        cdef _Pick *g
        cdef double lo, hi
        if xi < 0 or xe - xs > window:
            return 0
        self.npool = 0
        for j in range(n):
            if j == xi:
                continue
            si = self.slot_of[q.cids[j]]
            if self.goff[2 * si] < 0:
                self._gather(si, <_Present>PyList_GET_ITEM(plist, si), self.low(q.cids[j], hclock), xm, xa)
            off = self.goff[2 * si]
            cnt = self.goff[2 * si + 1]
            count = 0
            for k in range(off, off + cnt):
                g = &self.gath[k]
                if g.moment <= q.reg:
                    break  # arrival order: the rest came before q
                if not bits_has(<Bits>g.own, <size_t>bitno):
                    continue
                lo = g.start if g.start < xs else xs
                hi = g.end if g.end > xe else xe
                if hi - lo > window:
                    continue
                if g.derived:
                    return -1
                pick = g[0]
                pick.j = <int>j
                # Insertion into the pool, latest first (moment, then arrival): each
                # class comes latest first already, so this is a merge.
                self._room(&self.pool, &self.cap, self.npool + 1)
                a = self.npool
                while a > 0 and (
                    self.pool[a - 1].moment < pick.moment
                    or (self.pool[a - 1].moment == pick.moment and self.pool[a - 1].arrival < pick.arrival)
                ):
                    self.pool[a] = self.pool[a - 1]
                    a -= 1
                self.pool[a] = pick
                self.npool += 1
                count += 1
            if count == 0:
                return 0
        cdef Py_ssize_t chosen[MAX_COMPS]
        self.assembled += 1
        self._combine(
            q, xi, x, xs, xe, ev_float(f.prob, "prob"), 0, 0, n - 1, (<uint64_t>1) << xi, xs, xe, chosen, out,
            direct
        )
        return 1

    cdef int _combine(
        self, _Query q, Py_ssize_t xi, object x, double xs, double xe, double xprob,
        Py_ssize_t start, Py_ssize_t depth, Py_ssize_t m, unsigned long long used, double lo, double hi,
        Py_ssize_t *chosen, list out, bint direct
    ) except -1:
        # composite._windowed_combinations over the pool, one instance per class (the
        # others fail the first assignment): 1 when RECENT has its match.
        cdef Py_ssize_t idx, last
        cdef _Pick *p
        cdef double nlo, nhi
        if depth == m:
            return self._emit(q, xi, x, xs, xe, xprob, chosen, m, out, direct)
        last = self.npool - (m - depth) + 1
        for idx in range(start, last):
            p = &self.pool[idx]
            if used >> p.j & 1:
                continue
            nlo = p.start if p.start < lo else lo
            nhi = p.end if p.end > hi else hi
            if nhi - nlo > q.window:
                continue
            chosen[depth] = idx
            if self._combine(
                q, xi, x, xs, xe, xprob, idx + 1, depth + 1, m, used | ((<uint64_t>1) << p.j), nlo, nhi, chosen,
                out, direct
            ):
                return 1
        return 0

    cdef int _emit(
        self, _Query q, Py_ssize_t xi, object x, double xs, double xe, double xprob,
        Py_ssize_t *chosen, Py_ssize_t m, list out, bint direct
    ) except -1:
        # One combination: the binding, the conditions across events, the probability
        # (in component order, as composite.probability) and its bound; then a compiled
        # Match (``made``) or a candidate.
        cdef double probs[MAX_COMPS]
        cdef double start = xs, end = xe, prob = 1.0
        cdef Py_ssize_t d, j
        cdef _Pick *p
        cdef Match match
        binding = [None] * q.length
        binding[xi] = x
        probs[xi] = xprob
        for d in range(m):
            p = &self.pool[chosen[d]]
            binding[p.j] = <object>p.e
            probs[p.j] = p.prob
            if p.start < start:
                start = p.start
            if p.end > end:
                end = p.end
        for check in q.checks:
            if not check(binding):
                return 0
        for j in range(q.length):
            prob *= probs[j]
        if q.bounded:
            if not prob >= q.least:
                return 0
        elif not prob > 0.0:
            return 0
        if direct and q.direct:
            # Match(name, src, start, end, events, None, prob, seq, trigger); seq is
            # given when the loop emits it.
            f = ev(x)
            match = Match.__new__(Match)
            match.query = q.name
            match.src = ev_get(f.src, "src")
            match.start = start
            match.end = end
            match._events = binding
            match.prob = prob
            match.seq = -1
            match.trigger = ev_int(f.arrival, "arrival")
            self.made.append(match)
            self.made_q.append(q)
        else:
            out.append((q.qs, _Cand(binding, start, end, prob, x, (), _NO_PRIMS)))
        return 0 if q.mode_all else 1
