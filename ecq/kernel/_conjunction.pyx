# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Conjunctions of primitive classes in the compiled kernel (ecq.matching.conjunction's presence
and candidates, and ecq.matching.composite's assembly of a conjunction, in C).

Per source and class that conjunctions use, ``Conjunctions`` keeps the stored instances
that passed some conjunction's filter on the class, each with its *own bits* (the
conjunctions whose filter it passed, found once when it arrived: ``Kernel.slot_passing``),
plus the latest start and the union of the own bits (the presence of ecq.matching.conjunction).
An arriving instance ``x`` with own bits ``own``:

- finds where each class present at its source is, once (a table by class number);
- per conjunction ``q`` of ``own`` (lowest bit first) tests the presence in C: every
  other positive component's class present, ``q``'s bit in its union, its latest start
  within ``q``'s window of ``x`` (``conjunction._by_query``, by class number);
- a conjunction that passes (a conjunction with a component of several classes is not
  counted: it goes straight on) is assembled here when ``ecq.matching.conjunction.kernel_shape``
  says how: primitive classes, class sets that are equal or disjoint (the paper's CNJ
  templates, the demo's conjunctions, negated components, one class in several
  components, ``ANY`` components). Each class's visible instances for ``x`` (start at
  or above the class's drop horizon, arrived before ``x``) are read once per arriving
  instance and shared by every conjunction that needs the class (the paper's
  sub-pattern sharing); a query's pool takes those of them it may see (arrived after
  its registration, its bit among their own bits, so its filter is never evaluated
  again, within its window with ``x``). The combinations, as many instances of each
  role group as it has components, are tried most recent first, as
  ``composite._conj_candidates`` tries them (its other combinations fail its first
  assignment); each has one assignment (a group's events fill its components in
  arrival order), the conditions across events evaluated once per combination for
  every query with the same condition (``_check``), the probability, the negated
  components' blockers (each negated class's chain at the source read once per
  arriving instance, ``_gather_blockers``) and the bound as there; RECENT keeps the
  first, ALL every one. A match that needs nothing more (a top-level query, no RETURN,
  no probability clause, no ``@name`` reader) becomes a compiled ``Match`` here
  (``made``), which the kernel's loop numbers and emits with the sequences' matches;
  any other becomes a ``Cand``;
- any other conjunction that passes is handed back to the network, which assembles it
  in Python (overlapping class sets, instances of derived classes).

Cleaning is O(dropped): per class, the noted instances wait in one queue in arrival
order (``fifo``), and ``prune`` takes them from its front while their start is below the
class's drop horizon, as ``SIQ.clean`` does, cutting each from its source's list.

The cost per arriving instance is O(classes present + own conjunctions × their classes)
in C, plus one read of each class that some conjunction's presence test passes and the
pools of those conjunctions; nothing is evaluated per query in Python except the
conditions across events of a combination in the window (once for every query with the
same one), a negated component's conditions on its blockers, and the filters of a class
in several components.
"""

cimport cython
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE
from cpython.mem cimport PyMem_Free
from cpython.ref cimport PyObject, Py_DECREF, Py_INCREF
from libc.stdint cimport int32_t, uint64_t
from libc.string cimport memmove

from ecq.kernel._bitset cimport Bits, bits_from_int, bits_has, bits_or, ctz64, grow, words_has
from ecq.kernel._constants cimport ClassIds, class_id
from ecq.kernel._events cimport Match, ev, ev_float, ev_get, ev_int
from ecq.kernel._filters cimport SlotIndex, slot_index

from ecq.matching.candidate import Cand
from ecq.matching.conjunction import kernel_shape

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

    def __dealloc__(self):
        PyMem_Free(self.ccid)
        PyMem_Free(self.cgrp)
        PyMem_Free(self.ncid)
        PyMem_Free(self.cmemo)
        PyMem_Free(self.carg)
        PyMem_Free(self.cbase)


cdef class Klass:
    """The conjunctions of one class for one generation of queries (see _conjunction.pxd)."""


cdef _Query _query_of(object qs, ClassIds classes, object ecqs, dict check_ids):
    cdef _Query q = _Query.__new__(_Query)
    cdef Py_ssize_t i, j, g, r, n, at
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
    positives = [comps[i] for i in cq.positives]
    q.npos = len(positives)
    q.loose = q.npos > MAX_COMPS or any(len(c.classes) != 1 for c in positives)
    if not q.loose:
        for j, c in enumerate(positives):
            q.cids[j] = <int32_t>class_id(classes, next(iter(c.classes)))
    shape = kernel_shape(cq)
    q.kernel = shape is not None
    if not q.kernel:
        return q
    # Role groups: the positives' numbers by group and rank, the classes of each.
    which = {}  # component index -> its number among the positives
    for j, c in enumerate(positives):
        q.slot[j] = c.index
        which[c.index] = j
    q.ngrp = len(shape.groups)
    q.ncls = sum(len(names) for names, _ in shape.groups)
    q.ccid = <int32_t *>grow(NULL, (q.ncls + 1) * sizeof(int32_t))
    q.cgrp = <int32_t *>grow(NULL, (q.ncls + 1) * sizeof(int32_t))
    at = n = 0
    for g, (names, members) in enumerate(shape.groups):
        q.gsize[g] = <int32_t>len(members)
        q.gbase[g] = <int32_t>at
        for i in members:
            q.gpos[at] = <int32_t>which[i]
            at += 1
        for name in names:
            q.ccid[n] = <int32_t>class_id(classes, name)
            q.cgrp[n] = <int32_t>g
            n += 1
    q.gfilt = list(shape.filters)
    # Negated components.
    q.nneg = len(shape.negated)
    q.ncid = <int32_t *>grow(NULL, (sum(len(names) for _, names, _ in shape.negated) + 1) * sizeof(int32_t))
    n = 0
    conds = []
    for k, (i, names, preds) in enumerate(shape.negated):
        q.nslot[k] = i
        q.nbase[k] = n
        for name in names:
            q.ncid[n] = <int32_t>class_id(classes, name)
            n += 1
        conds.append(tuple(preds))
    q.nbase[q.nneg] = n
    q.nconds = tuple(conds)
    # Checks, each with its number in the shared evaluation (one per key).
    q.checks = tuple(pred for pred, _, _ in shape.checks)
    q.nchecks = len(q.checks)
    q.cmemo = <int32_t *>grow(NULL, (q.nchecks + 1) * sizeof(int32_t))
    q.cbase = <Py_ssize_t *>grow(NULL, (q.nchecks + 1) * sizeof(Py_ssize_t))
    q.carg = <int32_t *>grow(NULL, (sum(len(reads) for _, _, reads in shape.checks) + 1) * sizeof(int32_t))
    n = 0
    for i, (_, key, reads) in enumerate(shape.checks):
        q.cbase[i] = n
        if key is None:
            q.cmemo[i] = -1
        else:
            q.cmemo[i] = <int32_t>check_ids.setdefault(key, len(check_ids))
            for r in reads:
                q.carg[n] = <int32_t>which[r]
                n += 1
    q.cbase[q.nchecks] = n
    # As the Python path settles it (Network._finish): nothing to compute, hold or feed.
    q.direct = (
        bool(cq.top) and not cq.returns and cq.probability is None and not cq.trailing
        and qs.derived_class not in ecqs
        # A policy the compiled kernel applies (_kernel.pyx, _choose_made), or none.
        and (cq.policy is None or qs.kernel_policy)
    )
    q.policy = qs.policy if qs.kernel_policy else None
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
        self.hlast = []
        self.slot_of = NULL
        self.slot_cap = 0
        self.qtab = NULL
        self.qcap = 0
        self.gath = self.pool = NULL
        self.ngath = self.gcap = self.npool = self.cap = 0
        self.goff = NULL
        self.goff_cap = 0
        self.blk = self.nb = NULL
        self.nblk = self.bcap = self.nnb = self.nbcap = 0
        self.boff = self.bcnt = NULL
        self.btouched = NULL
        self.nbt = self.bslot_cap = 0
        self.memo = NULL
        self.mcap = self.mused = 0
        self.mstamp = 0
        self.margs = NULL
        self.nmargs = self.margs_cap = 0
        self.check_ids = {}
        self.made = []
        self.made_q = []
        self.assembled = self.handed = self.evaluated = self.shared = 0

    def __dealloc__(self):
        PyMem_Free(self.hwin)
        PyMem_Free(self.hfrozen)
        PyMem_Free(self.hset)
        PyMem_Free(self.slot_of)
        PyMem_Free(self.qtab)
        PyMem_Free(self.gath)
        PyMem_Free(self.goff)
        PyMem_Free(self.pool)
        PyMem_Free(self.blk)
        PyMem_Free(self.nb)
        PyMem_Free(self.boff)
        PyMem_Free(self.bcnt)
        PyMem_Free(self.btouched)
        PyMem_Free(self.memo)
        PyMem_Free(self.margs)

    def queries_changed(self):
        cdef Py_ssize_t i
        self.queries = []
        self.klasses = {}
        self.check_ids = {}
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
        q = _query_of(net.by_bit[bitno], self.classes, net.ecqs, self.check_ids)
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
            c.flags = (Q_NEVER if q.never else 0) | (Q_LOOSE if q.loose else 0) | (Q_KERNEL if q.kernel else 0)
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
                self.hlast.append(None)
            self.hcap = want
        if not self.hset[cid]:
            ecq = self.network.ecqs.get(self.classes.names[cid])
            if ecq is None:
                self.hwin[cid] = _NEG_INF
                self.hfrozen[cid] = _INF
                self.hlast[cid] = None
            else:
                self.hwin[cid] = ecq.drop.window
                self.hfrozen[cid] = ecq.drop.frozen
                self.hlast[cid] = ecq.siq.last
            self.hset[cid] = 1
        moving = hclock - self.hwin[cid]
        return moving if moving > self.hfrozen[cid] else self.hfrozen[cid]

    def sources(self):
        """The presence in ecq.matching.conjunction's form: ``{src: {class: (latest start,
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
        filters of ``own``) may complete: those ecq.matching.conjunction.kernel_shape describes
        assembled here, their candidates appended to ``completed`` as ``(node,
        Cand)``; returns the bits of the others that pass the presence test, for the
        network to assemble."""
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
        cdef Py_ssize_t i, j, bitno, np = 0
        cdef Py_ssize_t si, xcid = k.cid
        cdef int32_t cid
        cdef const int32_t *cids
        cdef uint64_t w
        cdef _QC *c
        cdef _Query q
        cdef int got
        cdef bint seen, ok
        if s is not None:
            np = s.n
            self._slots(s)
        self.ngath = 0
        # A new arriving instance: the shared evaluation and the blockers start afresh.
        self.mstamp += 1
        self.mused = 0
        self.nmargs = 0
        self.nblk = 0
        rest = 0
        try:
            for i in range(nw):
                w = own.w[i] & final.w[i]
                while w:
                    bitno = (i << 6) + ctz64(w)
                    w &= w - 1
                    c = self.qc(bitno)
                    if c.flags & Q_LOOSE and not (c.flags & Q_KERNEL and not derived):
                        rest |= (<object>1) << bitno
                        self.handed += 1
                        continue
                    if c.flags & Q_NEVER or moment <= c.reg:
                        continue
                    if not c.flags & Q_LOOSE:
                        # The presence test (conjunction._by_query): every other
                        # positive component's class present at the source, serving
                        # this query (its bit among the instances' own bits) within
                        # its window. (A component of several classes: not counted.)
                        if c.npos <= Q_INLINE:
                            cids = c.cids
                        else:
                            q = self.query(bitno)
                            cids = q.cids
                        seen = False
                        ok = True
                        for j in range(c.npos):
                            cid = cids[j]
                            if cid == xcid and not seen:
                                seen = True  # the arriving instance's component
                                continue
                            si = self.slot_of[cid] if cid < self.slot_cap else -1
                            if (
                                si < 0
                                or end - s.latest[si] > c.window
                                or not words_has(s.w[si], s.nw[si], <size_t>bitno)
                            ):
                                ok = False
                                break
                        if not ok:
                            continue
                    if c.flags & Q_KERNEL and not derived:
                        got = self._assemble(self.query(bitno), bitno, xcid, e, s, hclock, completed, direct)
                        if got >= 0:
                            continue
                    rest |= (<object>1) << bitno
                    self.handed += 1
        finally:
            for i in range(np):
                self.slot_of[s.cids[i]] = -1
            for i in range(self.nbt):
                self.boff[self.btouched[i]] = -1
            self.nbt = 0
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
        cdef _Query q
        cdef Py_ssize_t i, j
        for i in range(PyList_GET_SIZE(self.made)):
            m = <Match>PyList_GET_ITEM(self.made, i)
            q = <_Query>PyList_GET_ITEM(self.made_q, i)
            binding = m._events
            if q.nneg:
                # The match's events are its positive components'; the binding has
                # a place for each component.
                events = binding
                binding = [None] * q.length
                for j in range(q.npos):
                    binding[q.slot[j]] = events[j]
            completed.append((q.qs, _Cand(binding, m.start, m.end, m.prob, x, (), _NO_PRIMS)))
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
            pick.g = -1
            pick.fill = 0
            self.ngath += 1
            count += 1
        self.goff[2 * si + 1] = count
        return 0

    cdef int _gather_blockers(self, Py_ssize_t cid, object src, double hclock, long long xm) except -1:
        # The source's instances of class ``cid`` (a negated component's) visible to the
        # arriving instance (start at or above the class's horizon, arrived before it),
        # latest first, read once per arriving instance from its SIQ's back chain (what
        # ChainProbe gives the Python path): blk from boff[cid], bcnt[cid] of them.
        cdef Py_ssize_t i, want, ncls = len(self.classes.names), count = 0
        cdef double low, start
        cdef long long moment
        cdef _Pick *pick
        if ncls > self.bslot_cap:
            want = ncls + 16
            self.boff = <Py_ssize_t *>grow(self.boff, want * sizeof(Py_ssize_t))
            self.bcnt = <Py_ssize_t *>grow(self.bcnt, want * sizeof(Py_ssize_t))
            self.btouched = <int32_t *>grow(self.btouched, want * sizeof(int32_t))
            for i in range(self.bslot_cap, want):
                self.boff[i] = -1
            self.bslot_cap = want
        if self.boff[cid] >= 0:
            return 0
        self.btouched[self.nbt] = <int32_t>cid
        self.nbt += 1
        self.boff[cid] = self.nblk
        low = self.low(cid, hclock)
        last = self.hlast[cid]
        if last is not None:
            e = (<dict>last).get(src)
            while e is not None:
                f = ev(e)
                start = ev_float(f.start, "start")
                moment = ev_int(f.moment, "moment")
                if start >= low and moment < xm:
                    self._room(&self.blk, &self.bcap, self.nblk + 1)
                    pick = &self.blk[self.nblk]
                    pick.e = <PyObject *>e
                    pick.own = NULL
                    pick.start = start
                    pick.end = ev_float(f.end, "end")
                    pick.prob = ev_float(f.prob, "prob")
                    pick.moment = moment
                    pick.arrival = ev_int(f.arrival, "arrival")
                    pick.g = -1
                    pick.fill = 0
                    pick.derived = False
                    self.nblk += 1
                    count += 1
                e = <object>f.prev if f.prev != NULL else None
        self.bcnt[cid] = count
        return 0

    cdef int _blockers(self, _Query q, object src, double hclock, long long xm) except -1:
        # The instances each negated component of q may be blocked by, in the order
        # composite.blockers takes them (latest first; its classes' chains merged):
        # those q may see (arrived after its registration), from each class's shared
        # read. nb from noff[k], ncnt[k] of them.
        cdef Py_ssize_t k, c, cid, b, a
        cdef _Pick *p
        self.nnb = 0
        for k in range(q.nneg):
            self.noff[k] = self.nnb
            for c in range(q.nbase[k], q.nbase[k + 1]):
                cid = q.ncid[c]
                self._gather_blockers(cid, src, hclock, xm)
                for b in range(self.boff[cid], self.boff[cid] + self.bcnt[cid]):
                    p = &self.blk[b]
                    if p.moment <= q.reg:
                        break  # arrival order: the rest came before q
                    self._room(&self.nb, &self.nbcap, self.nnb + 1)
                    a = self.nnb
                    while a > self.noff[k] and self.nb[a - 1].moment < p.moment:
                        self.nb[a] = self.nb[a - 1]
                        a -= 1
                    self.nb[a] = p[0]
                    self.nnb += 1
            self.ncnt[k] = self.nnb - self.noff[k]
        return 0

    cdef int _assemble(
        self, _Query q, Py_ssize_t bitno, Py_ssize_t xcid, object x, _Source s, double hclock,
        list out, bint direct
    ) except -2:
        # A conjunction of the kernel that x may complete (its presence test passed,
        # or it has a component of several classes): its pool, then the combinations.
        # Returns 1 when assembled, 0 when some role group has too few instances q may
        # see, -1 when the pool holds a derived instance (Python assembles).
        f = ev(x)
        cdef double xs = ev_float(f.start, "start"), xe = ev_float(f.end, "end")
        cdef long long xm = ev_int(f.moment, "moment"), xa = ev_int(f.arrival, "arrival")
        cdef double window = q.window
        cdef Py_ssize_t c, g, gx = -1, k, a, si, off, cnt, cid
        cdef int32_t need[MAX_COMPS]
        cdef int32_t have[MAX_COMPS]
        cdef uint64_t xfill = ~(<uint64_t>0), fill
        cdef _Pick pick
        cdef _Pick *p
        cdef double lo, hi
        if xe - xs > window:
            return 0
        for c in range(q.ncls):
            if q.ccid[c] == xcid:
                gx = q.cgrp[c]
                break
        if gx < 0:
            return 0
        filters = q.gfilt[gx]
        if filters is not None:
            # Which ranks of its group x may fill (composite._fills).
            xfill = _fills(<tuple>filters, x)
            if not xfill:
                return 0
        for g in range(q.ngrp):
            need[g] = q.gsize[g]
            have[g] = 0
        need[gx] -= 1
        self.npool = 0
        for c in range(q.ncls):
            g = q.cgrp[c]
            if need[g] == 0:
                continue
            cid = q.ccid[c]
            si = self.slot_of[cid] if cid < self.slot_cap else -1
            if si < 0:
                continue
            if self.goff[2 * si] < 0:
                self._gather(si, <_Present>PyList_GET_ITEM(s.present, si), self.low(cid, hclock), xm, xa)
            off = self.goff[2 * si]
            cnt = self.goff[2 * si + 1]
            filters = q.gfilt[g]
            for k in range(off, off + cnt):
                p = &self.gath[k]
                if p.moment <= q.reg:
                    break  # arrival order: the rest came before q
                if not bits_has(<Bits>p.own, <size_t>bitno):
                    continue
                lo = p.start if p.start < xs else xs
                hi = p.end if p.end > xe else xe
                if hi - lo > window:
                    continue
                if p.derived:
                    return -1
                fill = ~(<uint64_t>0)
                if filters is not None:
                    fill = _fills(<tuple>filters, <object>p.e)
                    if not fill:
                        continue
                pick = p[0]
                pick.g = <int>g
                pick.fill = fill
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
                have[g] += 1
        for g in range(q.ngrp):
            if have[g] < need[g]:
                return 0
        if q.nneg:
            self._blockers(q, ev_get(f.src, "src"), hclock, xm)
        cdef Py_ssize_t chosen[MAX_COMPS]
        self.assembled += 1
        self._combine(
            q, gx, xfill, x, xs, xe, ev_float(f.prob, "prob"), 0, 0, q.npos - 1, need, xs, xe, chosen, out,
            direct
        )
        return 1

    cdef int _combine(
        self, _Query q, Py_ssize_t gx, uint64_t xfill, object x, double xs, double xe, double xprob,
        Py_ssize_t start, Py_ssize_t depth, Py_ssize_t m, int32_t *need, double lo, double hi,
        Py_ssize_t *chosen, list out, bint direct
    ) except -1:
        # composite._windowed_combinations over the pool, as many instances of each
        # role group as it needs (the other combinations fail its first assignment):
        # 1 when RECENT has its match.
        cdef Py_ssize_t idx, last
        cdef int got
        cdef _Pick *p
        cdef double nlo, nhi
        if depth == m:
            return self._emit(q, gx, xfill, x, xs, xe, xprob, chosen, m, out, direct)
        last = self.npool - (m - depth) + 1
        for idx in range(start, last):
            p = &self.pool[idx]
            if need[p.g] == 0:
                continue
            nlo = p.start if p.start < lo else lo
            nhi = p.end if p.end > hi else hi
            if nhi - nlo > q.window:
                continue
            chosen[depth] = idx
            need[p.g] -= 1
            got = self._combine(
                q, gx, xfill, x, xs, xe, xprob, idx + 1, depth + 1, m, need, nlo, nhi, chosen, out, direct
            )
            need[p.g] += 1
            if got:
                return 1
        return 0

    cdef int _emit(
        self, _Query q, Py_ssize_t gx, uint64_t xfill, object x, double xs, double xe, double xprob,
        Py_ssize_t *chosen, Py_ssize_t m, list out, bint direct
    ) except -1:
        # One combination: its assignment (in each role group the events in arrival
        # order, each rank's filter passed), the conditions across events, the
        # probability (in component order, as composite.probability), the blockers'
        # factors and the bound; then a compiled Match (``made``) or a candidate.
        cdef Py_ssize_t at[MAX_COMPS]  # per positive component: its pool index, -1 for x
        cdef int32_t taken[MAX_COMPS]
        cdef PyObject *members[MAX_COMPS]
        cdef long long arrivals[MAX_COMPS]
        cdef double start = xs, end = xe, prob = 1.0
        cdef Py_ssize_t d, j, g, r
        cdef _Pick *p
        cdef Match match
        for g in range(q.ngrp):
            taken[g] = 0
        # x arrived last: the last rank of its group; the others, latest first, the
        # ranks before it.
        r = q.gsize[gx] - 1
        if not (xfill >> r) & 1:
            return 0
        at[q.gpos[q.gbase[gx] + r]] = -1
        taken[gx] = 1
        for d in range(m):
            p = &self.pool[chosen[d]]
            g = p.g
            r = q.gsize[g] - 1 - taken[g]
            taken[g] += 1
            if not (p.fill >> r) & 1:
                return 0
            at[q.gpos[q.gbase[g] + r]] = chosen[d]
            if p.start < start:
                start = p.start
            if p.end > end:
                end = p.end
        f = ev(x)
        binding = [None] * q.length
        for j in range(q.npos):
            if at[j] < 0:
                e = x
                prob *= xprob
                arrivals[j] = ev_int(f.arrival, "arrival")
            else:
                p = &self.pool[at[j]]
                e = <object>p.e
                prob *= p.prob
                arrivals[j] = p.arrival
            binding[q.slot[j]] = e
            members[j] = <PyObject *>e
        for j in range(q.nchecks):
            if not self._check(q, j, binding, arrivals):
                return 0
        if q.nneg:
            prob *= self._factor(q, binding, start, end, members, q.npos)
        if q.bounded:
            if not prob >= q.least:
                return 0
        elif not prob > 0.0:
            return 0
        if direct and q.direct:
            # Match(name, src, start, end, events, None, prob, seq, trigger); seq is
            # given when the loop emits it.
            match = Match.__new__(Match)
            match.query = q.name
            match.src = ev_get(f.src, "src")
            match.start = start
            match.end = end
            if q.nneg:
                match._events = [binding[q.slot[j]] for j in range(q.npos)]
            else:
                match._events = binding
            match.prob = prob
            match.seq = -1
            match.trigger = ev_int(f.arrival, "arrival")
            self.made.append(match)
            self.made_q.append(q)
        else:
            out.append((q.qs, _Cand(binding, start, end, prob, x, (), _NO_PRIMS)))
        return 0 if q.mode_all else 1

    cdef int _check(self, _Query q, Py_ssize_t i, list binding, long long *arrivals) except -1:
        # Check i of q on the binding (1: it holds), evaluated once per arriving
        # instance for every query with a check of the same key on the same events
        # (their arrivals, in the key's role order: ecq.matching.conjunction.Shape).
        cdef int32_t mid = q.cmemo[i]
        cdef Py_ssize_t a, b = q.cbase[i], n = q.cbase[i + 1] - q.cbase[i], at, want
        cdef uint64_t h
        cdef _Memo *slot
        cdef _Memo *old
        cdef int result
        check = <object>PyTuple_GET_ITEM(q.checks, i)
        if mid < 0:
            self.evaluated += 1
            return 1 if check(binding) else 0
        h = <uint64_t>mid * <uint64_t>0x9E3779B97F4A7C15ULL
        for a in range(n):
            h ^= <uint64_t>arrivals[q.carg[b + a]] + <uint64_t>0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2)
        if self.mcap:
            at = <Py_ssize_t>(h & <uint64_t>(self.mcap - 1))
            while self.memo[at].stamp == self.mstamp:
                slot = &self.memo[at]
                if slot.h == h and slot.id == mid and slot.n == n:
                    for a in range(n):
                        if self.margs[slot.off + a] != arrivals[q.carg[b + a]]:
                            break
                    else:
                        self.shared += 1
                        return slot.result
                at = (at + 1) & (self.mcap - 1)
        self.evaluated += 1
        result = 1 if check(binding) else 0
        # Remembered: the table at most half full (grown and the current entries
        # moved), the arrivals read after the others'.
        if 2 * (self.mused + 1) > self.mcap:
            want = 2 * self.mcap if self.mcap else 64
            old = self.memo
            self.memo = <_Memo *>grow(NULL, want * sizeof(_Memo))
            for a in range(want):
                self.memo[a].stamp = -1
            for a in range(self.mcap):
                if old[a].stamp == self.mstamp:
                    at = <Py_ssize_t>(old[a].h & <uint64_t>(want - 1))
                    while self.memo[at].stamp == self.mstamp:
                        at = (at + 1) & (want - 1)
                    self.memo[at] = old[a]
            PyMem_Free(old)
            self.mcap = want
        if self.nmargs + n > self.margs_cap:
            self.margs_cap = 2 * (self.nmargs + n) + 64
            self.margs = <long long *>grow(self.margs, self.margs_cap * sizeof(long long))
        at = <Py_ssize_t>(h & <uint64_t>(self.mcap - 1))
        while self.memo[at].stamp == self.mstamp:
            at = (at + 1) & (self.mcap - 1)
        slot = &self.memo[at]
        slot.stamp = self.mstamp
        slot.h = h
        slot.id = mid
        slot.n = <int32_t>n
        slot.off = self.nmargs
        slot.result = result
        for a in range(n):
            self.margs[self.nmargs + a] = arrivals[q.carg[b + a]]
        self.nmargs += n
        self.mused += 1
        return result

    cdef double _factor(
        self, _Query q, list binding, double start, double end, PyObject **members, Py_ssize_t nmem
    ) except? -1.0:
        # composite._conj_negation: the product of 1 - prob of every blocker of every
        # negated component, in its order: same source, visible, arrived before the
        # match's last event, not one of its events, within [start, end], passing the
        # conditions that mention the component (on the binding). 0 as soon as a
        # certain blocker is met (the product stays 0).
        cdef double factor = 1.0
        cdef Py_ssize_t k, b, i, slot
        cdef bint ok
        cdef _Pick *p
        for k in range(q.nneg):
            conds = <tuple>PyTuple_GET_ITEM(q.nconds, k)
            slot = q.nslot[k]
            for b in range(self.noff[k], self.noff[k] + self.ncnt[k]):
                p = &self.nb[b]
                if p.start < start or p.end > end:
                    continue
                for i in range(nmem):
                    if members[i] == p.e:
                        break
                else:
                    if conds:
                        binding[slot] = <object>p.e
                        ok = True
                        for cond in conds:
                            if not cond(binding):
                                ok = False
                                break
                        binding[slot] = None
                        if not ok:
                            continue
                    factor *= 1.0 - p.prob
                    if factor == 0.0:
                        return 0.0
        return factor


cdef uint64_t _fills(tuple filters, object e) except? 0:
    # The ranks of a role group whose filter e passes (composite._fills, one group).
    cdef uint64_t out = 0
    cdef Py_ssize_t r
    for r in range(PyTuple_GET_SIZE(filters)):
        pred = <object>PyTuple_GET_ITEM(filters, r)
        if pred is None or pred(e):
            out |= (<uint64_t>1) << r
    return out
