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
from cpython.ref cimport PyObject, Py_DECREF, Py_INCREF
from libc.stdint cimport int32_t, uint64_t
from libc.string cimport memmove

from ecq.kernel._bitset cimport Bits, bits_from_int, bits_has, bits_or, ctz64, grow, words_has
from ecq.kernel._constants cimport ClassIds, class_id
from ecq.kernel._events cimport Match, ev, ev_float, ev_get, ev_int
from ecq.kernel._filters cimport SlotIndex, slot_index

from ecq.candidate import Cand

__all__ = ["Conjunctions"]

cdef object _Cand = Cand
cdef frozenset _NO_PRIMS = frozenset()
cdef double _INF = float("inf")
cdef double _NEG_INF = float("-inf")


cdef class _Present:
    """One source's noted instances of one class (see _conjunction.pxd)."""

    def __dealloc__(self):
        while self.head < self.n:
            self.drop_first()
        PyMem_Free(self.notes)

    cdef int append(self, _Note note) except -1:
        # The note takes its references (the caller's).
        if self.n == self.cap:
            if self.head:
                memmove(self.notes, self.notes + self.head, (self.n - self.head) * sizeof(_Note))
                self.n -= self.head
                self.head = 0
            else:
                self.cap = 2 * self.cap if self.cap else 2
                self.notes = <_Note *>grow(self.notes, self.cap * sizeof(_Note))
        self.notes[self.n] = note
        self.n += 1
        return 0

    cdef void drop_first(self) noexcept:
        cdef _Note *x = &self.notes[self.head]
        Py_DECREF(<object>x.e)
        Py_DECREF(<object>x.own)
        self.head += 1
        if self.head == self.n:
            self.head = self.n = 0


cdef class _Source:
    """One source's presence, one _Present per class (see _conjunction.pxd)."""

    def __cinit__(self):
        self.present = []

    def __dealloc__(self):
        PyMem_Free(self.cids)
        PyMem_Free(self.latest)
        PyMem_Free(self.w)
        PyMem_Free(self.nw)

    cdef Py_ssize_t find(self, Py_ssize_t cid) noexcept:
        cdef Py_ssize_t i
        for i in range(self.n):
            if self.cids[i] == cid:
                return i
        return -1

    cdef int add(self, _Present p) except -1:
        if self.n == self.cap:
            self.cap = 2 * self.cap if self.cap else 8
            self.cids = <int32_t *>grow(self.cids, self.cap * sizeof(int32_t))
            self.latest = <double *>grow(self.latest, self.cap * sizeof(double))
            self.w = <uint64_t **>grow(self.w, self.cap * sizeof(uint64_t *))
            self.nw = <Py_ssize_t *>grow(self.nw, self.cap * sizeof(Py_ssize_t))
        self.present.append(p)
        self.cids[self.n] = <int32_t>p.cid
        self.sync(self.n, p)
        self.n += 1
        return 0

    cdef void sync(self, Py_ssize_t i, _Present p) noexcept:
        # After p's latest start or union changed (the union's words move with it).
        self.latest[i] = p.latest
        self.w[i] = p.union.w
        self.nw[i] = p.union.n

    cdef int remove(self, _Present p) except -1:
        # The last one takes p's place.
        cdef Py_ssize_t i = self.find(p.cid), last = self.n - 1
        if i != last:
            self.present[i] = self.present[last]
            self.cids[i] = self.cids[last]
            self.latest[i] = self.latest[last]
            self.w[i] = self.w[last]
            self.nw[i] = self.nw[last]
        del self.present[last]
        self.n = last
        return 0


cdef class _Queue:
    """One class's noted instances in arrival order (see _conjunction.pxd)."""

    def __dealloc__(self):
        while self.head < self.n:
            self.pop()
        PyMem_Free(self.items)
        PyMem_Free(self.starts)

    cdef int push(self, _Present p, double start) except -1:
        if self.n == self.cap:
            if self.head:
                memmove(self.items, self.items + self.head, (self.n - self.head) * sizeof(PyObject *))
                memmove(self.starts, self.starts + self.head, (self.n - self.head) * sizeof(double))
                self.n -= self.head
                self.head = 0
            if self.n == self.cap:
                self.cap = 2 * self.cap if self.cap else 64
                self.items = <PyObject **>grow(self.items, self.cap * sizeof(PyObject *))
                self.starts = <double *>grow(self.starts, self.cap * sizeof(double))
        Py_INCREF(p)
        self.items[self.n] = <PyObject *>p
        self.starts[self.n] = start
        self.n += 1
        return 0

    cdef void pop(self) noexcept:
        Py_DECREF(<object>self.items[self.head])
        self.head += 1
        if self.head == self.n:
            self.head = self.n = 0


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
        self.qtab = NULL
        self.qcap = 0
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
        PyMem_Free(self.qtab)
        PyMem_Free(self.gath)
        PyMem_Free(self.goff)
        PyMem_Free(self.pool)

    def queries_changed(self):
        cdef Py_ssize_t i
        self.queries = []
        self.klasses = {}
        for i in range(self.hcap):
            self.hset[i] = 0
        for i in range(self.qcap):
            self.qtab[i].npos = -1

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

    cdef _QC *qc(self, Py_ssize_t bitno) except NULL:
        # The presence test's view of the node with bit ``bitno``, made with its _Query.
        cdef Py_ssize_t i, want
        cdef _QC *c
        cdef _Query q
        if bitno >= self.qcap:
            want = 2 * bitno + 64
            self.qtab = <_QC *>grow(self.qtab, want * sizeof(_QC))
            for i in range(self.qcap, want):
                self.qtab[i].npos = -1
            self.qcap = want
        c = &self.qtab[bitno]
        if c.npos < 0:
            q = self.query(bitno)
            c.reg = q.reg
            c.window = q.window
            c.flags = (Q_NEVER if q.never else 0) | (Q_LOOSE if q.loose else 0) | (Q_SIMPLE if q.simple else 0)
            if not q.loose:
                for i in range(q.npos if q.npos < Q_INLINE else Q_INLINE):
                    c.cids[i] = q.cids[i]
            c.npos = <int32_t>q.npos
        return c

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
            src: {
                names[(<_Present>p).cid]: ((<_Present>p).latest, (<_Present>p).union.to_int())
                for p in (<_Source>s).present
            }
            for src, s in self.presence.items()
        }

    def noted(self):
        """The noted instances, ``{src: {class: [event, ...]}}`` in arrival order (tests)."""
        names = self.classes.names
        return {
            src: {
                names[(<_Present>p).cid]: [
                    <object>(<_Present>p).notes[i].e for i in range((<_Present>p).head, (<_Present>p).n)
                ]
                for p in (<_Source>s).present
            }
            for src, s in self.presence.items()
        }

    # ------------------------------------------------------------- presence

    def note(self, e, str cls, own):
        """A stored instance ``e`` of ``cls`` passing the conjunctions' filters of
        ``own`` (an int); one that passes none is not noted. O(1)."""
        if own:
            self.note_bits(e, class_id(self.classes, cls), bits_from_int(own))

    cdef int note_bits(self, object e, Py_ssize_t cid, Bits bits) except -1:
        # note() for the kernel's loop, with the class's number.
        cdef _Note x
        cdef Py_ssize_t i
        cdef _Present p
        cdef _Source s
        f = ev(e)
        x.start = ev_float(f.start, "start")
        x.end = ev_float(f.end, "end")
        x.prob = ev_float(f.prob, "prob")
        x.moment = ev_int(f.moment, "moment")
        x.arrival = ev_int(f.arrival, "arrival")
        x.derived = f.prims != NULL and <object>f.prims is not None
        src = ev_get(f.src, "src")
        got = self.presence.get(src)
        if got is None:
            s = _Source.__new__(_Source)
            self.presence[src] = s
        else:
            s = <_Source>got
        i = s.find(cid)
        if i < 0:
            p = _Present.__new__(_Present)
            p.latest = x.start
            p.union = bits
            p.cid = cid
            p.src = src
            s.add(p)
        else:
            p = <_Present>PyList_GET_ITEM(s.present, i)
            if x.start > p.latest:
                p.latest = x.start
            p.union = bits_or(p.union, bits)
            s.sync(i, p)
        Py_INCREF(e)
        Py_INCREF(bits)
        x.e = <PyObject *>e
        x.own = <PyObject *>bits
        p.append(x)
        cdef list fifo = self.fifo
        while PyList_GET_SIZE(fifo) <= cid:
            fifo.append(None)
        queue = <object>PyList_GET_ITEM(fifo, cid)
        if queue is None:
            queue = fifo[cid] = _Queue.__new__(_Queue)
        (<_Queue>queue).push(p, x.start)
        return 0

    def prune(self, double clock):
        """Drop the noted instances below their class's drop horizon at ``clock``: per
        class, from the front of its queue while their start is below it (as
        ``SIQ.clean`` does), each from the front of its source's notes, and the classes
        and sources left with none. O(classes + dropped)."""
        cdef Py_ssize_t cid
        cdef double low
        cdef _Present p
        cdef _Queue queue
        cdef _Source s
        for cid in range(PyList_GET_SIZE(self.fifo)):
            got = self.fifo[cid]
            if got is None:
                continue
            queue = <_Queue>got
            if queue.head == queue.n:
                continue
            low = self.low(cid, clock)
            while queue.head < queue.n and queue.starts[queue.head] < low:
                p = <_Present>queue.items[queue.head]
                p.drop_first()
                if p.head == p.n:
                    s = <_Source>self.presence[p.src]
                    s.remove(p)
                    if not s.n:
                        del self.presence[p.src]
                queue.pop()

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
        cdef Bits final = k.final
        cdef Py_ssize_t nw = own.n if own.n < final.n else final.n
        f = ev(e)
        cdef long long moment = ev_int(f.moment, "moment")
        cdef double end = ev_float(f.end, "end")
        cdef bint derived = f.prims != NULL and <object>f.prims is not None
        src = ev_get(f.src, "src")
        got_s = self.presence.get(src)
        cdef _Source s = <_Source>got_s if got_s is not None else None
        cdef Py_ssize_t i, j, bitno, xi, np = 0
        cdef Py_ssize_t si, xcid = k.cid
        cdef int32_t cid
        cdef const int32_t *cids
        cdef uint64_t w
        cdef _QC *c
        cdef _Query q
        cdef int got
        if s is not None:
            np = s.n
            self._slots(s)
        self.ngath = 0
        rest = 0
        try:
            for i in range(nw):
                w = own.w[i] & final.w[i]
                while w:
                    bitno = (i << 6) + ctz64(w)
                    w &= w - 1
                    c = self.qc(bitno)
                    if c.flags & Q_LOOSE:
                        rest |= (<object>1) << bitno
                        continue
                    if c.flags & Q_NEVER or moment <= c.reg:
                        continue
                    # The presence test (conjunction._by_query): every other positive
                    # component's class present at the source, serving this query
                    # (its bit among the instances' own bits) within its window.
                    if c.npos <= Q_INLINE:
                        cids = c.cids
                    else:
                        q = self.query(bitno)
                        cids = q.cids
                    xi = -1
                    for j in range(c.npos):
                        cid = cids[j]
                        if cid == xcid and xi < 0:
                            xi = j  # the arriving instance's component
                            continue
                        si = self.slot_of[cid] if cid < self.slot_cap else -1
                        if (
                            si < 0
                            or end - s.latest[si] > c.window
                            or not words_has(s.w[si], s.nw[si], <size_t>bitno)
                        ):
                            break
                    else:
                        if c.flags & Q_SIMPLE and not derived:
                            got = self._assemble(self.query(bitno), bitno, xi, e, s, hclock, completed, direct)
                            if got >= 0:
                                continue
                        rest |= (<object>1) << bitno
                        self.handed += 1
        finally:
            for i in range(np):
                self.slot_of[s.cids[i]] = -1
        return rest

    cdef int _slots(self, _Source s) except -1:
        # Where each class present at a source is (its index in ``s``), once per
        # arriving instance.
        cdef Py_ssize_t i, want, ncls = len(self.classes.names)
        if ncls > self.slot_cap:
            want = ncls + 16
            self.slot_of = <int32_t *>grow(self.slot_of, want * sizeof(int32_t))
            for i in range(self.slot_cap, want):
                self.slot_of[i] = -1
            self.slot_cap = want
        if s.n > self.goff_cap:
            self.goff_cap = 2 * s.n + 16
            self.goff = <Py_ssize_t *>grow(self.goff, 2 * self.goff_cap * sizeof(Py_ssize_t))
        for i in range(s.n):
            self.slot_of[s.cids[i]] = <int32_t>i
            self.goff[2 * i] = -1
        return 0

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
        cdef Py_ssize_t k, count = 0
        cdef _Note *y
        cdef _Pick *pick
        self.goff[2 * si] = self.ngath
        for k in range(p.n - 1, p.head - 1, -1):
            y = &p.notes[k]
            if y.start < low:
                continue
            if y.moment > xm or (y.moment == xm and y.arrival >= xa):
                continue
            self._room(&self.gath, &self.gcap, self.ngath + 1)
            pick = &self.gath[self.ngath]
            pick.e = y.e
            pick.own = y.own
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
        self, _Query q, Py_ssize_t bitno, Py_ssize_t xi, object x, _Source s, double hclock,
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
                self._gather(si, <_Present>PyList_GET_ITEM(s.present, si), self.low(q.cids[j], hclock), xm, xa)
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
