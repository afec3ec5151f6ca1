# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Conjunctions of primitive classes in the compiled kernel (ecq.conjunction's presence
and candidates, and ecq.composite's assembly of a conjunction, in C).

Per source and class that conjunctions use, ``Conjunctions`` keeps the stored instances
that passed some conjunction's filter on the class, each with its *own bits* (the
conjunctions whose filter it passed, found once when it arrived: ``Kernel.slot_passing``),
plus the latest start and the union of the own bits (the presence of ecq.conjunction).
An arriving instance ``x`` with own bits ``own`` then, for each conjunction ``q`` of
``own`` (lowest bit first):

- a *simple* conjunction (every component positive, of one primitive class, the classes
  distinct: the paper's CNJ templates and the demo's conjunctions) is assembled here. Its
  pool is, per other class, the source's noted instances of that class that ``q`` may
  see (visible: start at or above the class's drop horizon; arrived after ``q``'s
  registration and before ``x``; ``q``'s bit among their own bits, so ``q``'s filter is
  never evaluated again; within the window with ``x``), read once per class and
  instance. The combinations, one instance per class, are tried most recent first, as
  ``composite._conj_candidates`` tries them (its other combinations fail its first
  assignment), the conditions across events evaluated once per combination, the
  probability and its bound as there; RECENT keeps the first, ALL every one;
- any other conjunction the presence count serves is tested against the presence as
  ``conjunction._by_query`` does, and the ones that pass are handed back to the network,
  which assembles them in Python (negation inside the conjunction, repeated classes,
  several classes per component, instances of derived classes).

The cost per arriving instance is O(own conjunctions × their classes) in C plus the
pools of the conjunctions whose classes are all present; nothing is evaluated per query
in Python except the conditions across events of a combination in the window.
"""

cimport cython
from cpython.mem cimport PyMem_Free
from cpython.ref cimport PyObject
from libc.stdint cimport uint64_t

from ecq.kernel._bitset cimport Bits, bits_and, bits_from_int, bits_has, bits_or, ctz64, grow
from ecq.kernel._events cimport ev, ev_float, ev_get, ev_int
from ecq.kernel._filters cimport SlotIndex, slot_index, slot_passing

from ecq.candidate import Cand

__all__ = ["Conjunctions"]

cdef object _Cand = Cand
cdef frozenset _NO_PRIMS = frozenset()
cdef class _Entry:
    """A noted instance (see _conjunction.pxd)."""


cdef class _Present:
    """One source's noted instances of one class (see _conjunction.pxd)."""


cdef class _Query:
    """One conjunction node as the assembly reads it (see _conjunction.pxd)."""


cdef class Klass:
    """The conjunctions of one class for one generation of queries (see _conjunction.pxd)."""


cdef _Query _query_of(object qs):
    cdef _Query q = _Query.__new__(_Query)
    cq = qs.cq
    comps = cq.comps
    q.qs = qs
    q.never = bool(cq.never)
    q.mode_all = bool(cq.mode_all)
    q.window = float(cq.window or 0.0)
    q.reg = qs.reg
    q.length = len(comps)
    q.bounded = bool(cq.top) and cq.probability is not None
    q.least = float(cq.probability) if q.bounded else 0.0
    q.checks = tuple(check for _, check in cq.checks)
    classes = []
    simple = cq.kind == "and" and 0 < len(comps) <= MAX_COMPS
    for c in comps:
        if c.negated or c.kleene is not None or c.sub is not None or len(c.classes) != 1:
            simple = False
            break
        cls = next(iter(c.classes))
        if cls.startswith("@"):
            simple = False
            break
        classes.append(cls)
    if simple and len(set(classes)) != len(classes):
        simple = False
    q.simple = simple
    q.classes = tuple(classes) if simple else ()
    return q


cdef class Conjunctions:
    """The presence and the assembly of one network's conjunctions (see the module's
    docstring); the compiled kernel's ``note_conjunction``, ``complete_conjunctions``
    and ``prune_conjunctions``."""

    def __cinit__(self, network):
        self.network = network
        self.presence = {}
        self.queries = {}
        self.classes = {}
        self.pool = NULL
        self.npool = self.cap = 0
        self.assembled = self.handed = 0

    def __dealloc__(self):
        PyMem_Free(self.pool)

    def queries_changed(self):
        self.queries = {}
        self.classes = {}

    cdef Klass klass(self, object cls):
        # The conjunctions of ``cls`` (None: none), made once per generation.
        cdef Klass k
        try:
            return self.classes[cls]
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
            k.loose = bits_from_int(ecq.cnj_loose)
            k.loop = not ecq.general_final and not ecq.disj
        self.classes[cls] = k
        return k

    def sources(self):
        """The presence in ecq.conjunction's form: ``{src: {class: (latest start,
        union of own bits)}}`` (tests compare the kernels on it)."""
        return {
            src: {cls: ((<_Present>p).latest, (<_Present>p).union.to_int()) for cls, p in d.items()}
            for src, d in self.presence.items()
        }

    # ------------------------------------------------------------- presence

    def note(self, e, str cls, own):
        """A stored instance ``e`` of ``cls`` passing the conjunctions' filters of
        ``own`` (an int); one that passes none is not noted. O(1)."""
        if own:
            self.note_bits(e, cls, bits_from_int(own))

    cdef int note_bits(self, object e, object cls, Bits bits) except -1:
        cdef _Entry x = _Entry.__new__(_Entry)
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
        cdef dict d = self.presence.get(src)
        if d is None:
            d = self.presence[src] = {}
        cdef _Present p = d.get(cls)
        if p is None:
            p = _Present.__new__(_Present)
            p.entries = [x]
            p.latest = x.start
            p.union = bits
            d[cls] = p
            return 0
        p.entries.append(x)
        if x.start > p.latest:
            p.latest = x.start
        p.union = bits_or(p.union, bits)
        return 0

    def prune(self, horizon):
        """Drop each source's noted instances of a class from the front while below the
        class's drop horizon (``horizon(cls)``), as ``SIQ.clean`` does, and the classes
        and sources left with none. O(sources × classes present + dropped)."""
        cdef dict lows = {}
        cdef list empty = []
        cdef list entries
        cdef double low
        cdef Py_ssize_t k, n
        for src, d in self.presence.items():
            for cls in list((<dict>d).keys()):
                got = lows.get(cls)
                if got is None:
                    got = lows[cls] = float(horizon(cls))
                low = got
                entries = (<_Present>(<dict>d)[cls]).entries
                n = len(entries)
                k = 0
                while k < n and (<_Entry>entries[k]).start < low:
                    k += 1
                if k == n:
                    del (<dict>d)[cls]
                elif k:
                    del entries[:k]
            if not d:
                empty.append(src)
        for src in empty:
            del self.presence[src]

    # ------------------------------------------------------------- candidates

    def complete(self, ecq, e, own, double hclock, list completed):
        """The conjunctions ``e`` (of ``ecq``'s class, passing the conjunctions'
        filters of ``own``) may complete: the simple ones assembled here, their
        candidates appended to ``completed`` as ``(node, Cand)``; returns the bits of
        the others that pass the presence test, for the network to assemble."""
        cdef Klass k = self.klass(ecq.cls)
        if k is None or not own:
            return 0
        return self.complete_bits(k, e, bits_from_int(own), hclock, completed)

    cdef object complete_bits(self, Klass k, object e, Bits own, double hclock, list completed):
        # complete() with the own bits as Bits, for the kernel's event loop too.
        cdef Bits bits = bits_and(own, k.final)
        cdef Bits loose = k.loose
        if not bits.n:
            return 0
        f = ev(e)
        cdef long long moment = ev_int(f.moment, "moment")
        cdef double end = ev_float(f.end, "end")
        cdef bint derived = f.prims != NULL and <object>f.prims is not None
        src = ev_get(f.src, "src")
        cdef dict present = self.presence.get(src)
        cdef dict horizons = {}
        cdef dict queries = self.queries
        by_bit = self.network.by_bit
        each = k.ecq.cnj_each
        rest = 0
        cdef Py_ssize_t i, bitno
        cdef uint64_t w
        cdef _Query q
        cdef _Present p
        for i in range(bits.n):
            w = bits.w[i]
            while w:
                bitno = (i << 6) + ctz64(w)
                w &= w - 1
                if bits_has(loose, <size_t>bitno):
                    rest |= 1 << bitno
                    continue
                q = queries.get(bitno)
                if q is None:
                    q = queries[bitno] = _query_of(by_bit[bitno])
                if q.never or moment <= q.reg:
                    continue
                if q.simple and not derived:
                    if present is None and q.length > 1:
                        continue
                    if self._assemble(q, bitno, e, present, horizons, hclock, completed) >= 0:
                        continue
                # The presence test (conjunction._by_query), then Python's assembly.
                need, window = each[bitno]
                for cls in need:
                    p = present.get(cls) if present is not None else None
                    if p is None or not bits_has(p.union, <size_t>bitno) or end - p.latest > window:
                        break
                else:
                    rest |= 1 << bitno
                    self.handed += 1
        return rest

    cdef int _room(self, Py_ssize_t n) except -1:
        if n > self.cap:
            self.cap = n if n > 2 * self.cap else 2 * self.cap
            self.pool = <_Pick *>grow(self.pool, self.cap * sizeof(_Pick))
        return 0

    cdef int _assemble(
        self, _Query q, Py_ssize_t bitno, object x, dict present, dict horizons, double hclock, list out
    ) except -2:
        # A simple conjunction completed by x: its pool, then the combinations. Returns
        # 1 when assembled, 0 when some class has no instance serving q (the presence
        # test fails), -1 when the pool holds a derived instance (Python assembles).
        f = ev(x)
        cdef double xs = ev_float(f.start, "start"), xe = ev_float(f.end, "end")
        cdef long long xm = ev_int(f.moment, "moment"), xa = ev_int(f.arrival, "arrival")
        cdef double window = q.window
        cdef Py_ssize_t n = q.length, j, k, xi = -1, count, a, b
        cdef _Present p
        cdef _Entry y
        cdef list entries
        cdef double low, lo, hi
        cdef _Pick pick
        xcls = ev_get(f.type, "type")
        for j in range(n):
            if q.classes[j] == xcls:
                xi = j
        if xi < 0 or xe - xs > window:
            return 0
        self.npool = 0
        for j in range(n):
            if j == xi:
                continue
            cls = q.classes[j]
            p = present.get(cls)
            if p is None or not bits_has(p.union, <size_t>bitno) or xe - p.latest > window:
                return 0  # no instance of the class serves q
            got = horizons.get(cls)
            if got is None:
                target = self.network.ecqs.get(cls)
                got = horizons[cls] = float(target.horizon(hclock)) if target is not None else float("inf")
            low = got
            entries = p.entries
            count = 0
            for k in range(len(entries) - 1, -1, -1):
                y = <_Entry>entries[k]
                if y.moment <= q.reg:
                    break  # arrival order: the rest came before q
                if y.start < low or not bits_has(y.own, <size_t>bitno):
                    continue
                if y.moment > xm or (y.moment == xm and y.arrival >= xa):
                    continue
                lo = y.start if y.start < xs else xs
                hi = y.end if y.end > xe else xe
                if hi - lo > window:
                    continue
                if y.derived:
                    return -1
                self._room(self.npool + 1)
                pick.e = <PyObject *>y.e
                pick.start = y.start
                pick.end = y.end
                pick.prob = y.prob
                pick.moment = y.moment
                pick.arrival = y.arrival
                pick.j = <int>j
                # Insertion into the pool, latest first (moment, then arrival): each
                # class comes latest first already, so this is a merge.
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
        self._combine(q, xi, x, xs, xe, ev_float(f.prob, "prob"), 0, 0, n - 1, (<uint64_t>1) << xi, xs, xe, chosen, out)
        return 1

    cdef int _combine(
        self, _Query q, Py_ssize_t xi, object x, double xs, double xe, double xprob,
        Py_ssize_t start, Py_ssize_t depth, Py_ssize_t m, unsigned long long used, double lo, double hi,
        Py_ssize_t *chosen, list out
    ) except -1:
        # composite._windowed_combinations over the pool, one instance per class (the
        # others fail the first assignment): 1 when RECENT has its match.
        cdef Py_ssize_t idx, last
        cdef _Pick *p
        cdef double nlo, nhi
        if depth == m:
            return self._emit(q, xi, x, xs, xe, xprob, chosen, m, out)
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
            if self._combine(q, xi, x, xs, xe, xprob, idx + 1, depth + 1, m, used | ((<uint64_t>1) << p.j), nlo, nhi, chosen, out):
                return 1
        return 0

    cdef int _emit(
        self, _Query q, Py_ssize_t xi, object x, double xs, double xe, double xprob,
        Py_ssize_t *chosen, Py_ssize_t m, list out
    ) except -1:
        # One combination: the binding, the conditions across events, the probability
        # (in component order, as composite.probability) and its bound.
        cdef double probs[MAX_COMPS]
        cdef double start = xs, end = xe, prob = 1.0
        cdef Py_ssize_t d, j
        cdef _Pick *p
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
        out.append((q.qs, _Cand(binding, start, end, prob, x, (), _NO_PRIMS)))
        return 0 if q.mode_all else 1
