# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The compiled kernel: ``CompiledKernel`` implements ``ecq.kernel.interface.Kernel``
for one network at level "summary" (``ecq.kernel.select`` makes it), with the event
loop of ``OpClock.step_events`` compiled (``run_events``).

It owns what it works on: the per-source summaries, class numbers, the constants of
the current generation of queries (``_constants.Net``, made on first use after
``queries_changed``) and its working memory (``_phases.State``). Nothing is kept at
module level: two kernels (two engines in one process, or in two threads) never share
anything. It reads only public attributes of the network and the engine (the
``NetworkView`` and ``LoopHost`` protocols)."""

cimport cython
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.sequence cimport PySequence_Fast_ITEMS
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from libc.limits cimport LLONG_MIN
from cpython.ref cimport PyObject, Py_INCREF, Py_XDECREF
from libc.stdint cimport uint32_t

from ecq.kernel._assembly cimport Found, release
from ecq.kernel._bitset cimport Bits, WindowMasks, bits_from_int, prefetch_lines
from ecq.kernel._constants cimport Ecq, Net, Plan, class_id, ecq_in, net_new, passing
from ecq.kernel._events cimport INLINE_EVENTS, Match, ev, ev_float, ev_get, ev_int, ev_put
from ecq.kernel._phases cimport State, extend, insert, summarise, test
from ecq.kernel._pmb cimport Groups, NativePMB, groups_of_list
from ecq.kernel._summary cimport Ent, Row, SrcSummary, is_empty, prune, remove_bit, view

from ecq.event import Event
from ecq.kernel._events import EventBase
from ecq.partitions import placeholder
from ecq.kernel._conjunction cimport Conjunctions, Klass, _Query
from ecq.kernel._negation cimport Waiting, bound_ok
from ecq.kernel._filters cimport Passing, slot_passing
from ecq.kernel._filters import slot_bits

__all__ = ["CompiledKernel", "Tested"]

cdef type _Event = Event
cdef type _EventBase = EventBase


cdef object _passed(object passed):
    # ``passing``'s result, checked: the phases read it without further checks.
    if type(passed) is not dict and type(passed) is not Passing:
        raise TypeError(f"passed must be what passing() returns, not {type(passed).__name__}")
    return passed


cdef class Tested:
    """The compiled test phase's result for one instance: what its insert phase needs,
    and the matches it completes (``completed``, as ``(node, events)``)."""

    cdef object passed  # a dict of Bits (no filters) or a _filters.Passing
    cdef dict extended
    cdef public list completed


cdef class CompiledKernel:
    """See the module's docstring; the methods are ``Kernel``'s."""

    cdef readonly str name
    cdef readonly bint notes_sources
    cdef object network
    cdef State s
    cdef Net net  # None until first used after queries changed
    # The conjunctions' presence and assembly (_conjunction.pyx).
    cdef readonly Conjunctions conjunctions

    def __cinit__(self, network):
        self.name = "compiled"
        self.notes_sources = True
        self.network = network
        self.s = State()
        self.net = None
        self.conjunctions = Conjunctions(network, self.s.classes)

    cdef Net current(self):
        if self.net is None:
            windows = self.network.windows
            self.net = net_new(
                self.network.ecqs,
                self.network.by_bit,
                WindowMasks(list(windows.bounds), list(windows.masks)),
                self.s.classes,
            )
        return self.net

    # ------------------------------------------------------------ queries

    def queries_changed(self):
        self.net = None
        self.conjunctions.queries_changed()

    def remove_node(self, Py_ssize_t bitno):
        for summary in self.s.summaries.values():
            remove_bit(<SrcSummary>summary, bitno)
        self.s.assembly.waiting.forget(bitno)

    # ------------------------------------------------------------ trailing negation

    @property
    def next_deadline(self):
        return self.s.assembly.waiting.earliest()

    def due(self, long long moment, double clock_before, double clock):
        if not clock > self.s.assembly.waiting.earliest():
            return []
        return release(self.s.assembly, self.current(), clock_before, clock, True)

    def pending(self):
        return self.s.assembly.waiting.live()

    def check(self):
        self.s.assembly.waiting._check()

    # ------------------------------------------------------------ the phases

    def passing(self, ecq, e):
        return passing(ecq_in(self.current(), ecq.cls), e)

    def slot_passing(self, slot, e):
        return slot_bits(slot, e)

    def note_conjunction(self, e, str cls, own):
        self.conjunctions.note(e, cls, own)

    def complete_conjunctions(self, ecq, e, own, double hclock, list completed):
        return self.conjunctions.complete(ecq, e, own, hclock, completed)

    def prune_conjunctions(self, double clock):
        self.conjunctions.prune(clock)

    def test_phase(self, ecq, e, passed, double hclock, probe):
        cdef bint direct
        cdef Net n = self.current()
        _check(e)
        src = ev_get(ev(e).src, "src")
        cdef Tested t = Tested.__new__(Tested)
        t.passed = _passed(passed)
        t.extended = test(
            self.s, n, ecq_in(n, ecq.cls), e, src, self.s.summaries.get(src), ev_float(ev(e).end, "end"),
            t.passed, hclock, &direct
        )
        cdef Found found = self.s.assembly.found
        t.completed = found.pairs()
        found.clear()
        return t

    def insert_phase(self, ecq, e, Tested tested, double hclock):
        cdef Net n = self.current()
        _check(e)
        f = ev(e)
        src = ev_get(f.src, "src")
        insert(
            self.s, n, ecq_in(n, ecq.cls), e, src, self.s.summaries.get(src), ev_get(f.type, "type"),
            ev_float(f.start, "start"), tested.passed, tested.extended, hclock
        )

    # ------------------------------------------------------------ cleaning

    def prune(self, double clock):
        cdef double cutoff = clock - self.network.windows.most
        cdef dict summaries = self.s.summaries
        for summary in summaries.values():
            prune(<SrcSummary>summary, cutoff)
        for src in [src for src, summary in summaries.items() if is_empty(<SrcSummary>summary)]:
            del summaries[src]

    def clean_siq(self, siq, double horizon):
        # SIQ.clean: drop instances from the front while their start is below
        # ``horizon``, unlinking each from its chain; returns how many.
        queue = siq.queue
        cdef dict last = siq.last
        cdef Py_ssize_t dropped = 0
        popleft = queue.popleft
        while queue and ev_float(ev(queue[0]).start, "start") < horizon:
            e = popleft()
            f = ev(e)
            ev_put(&f.prev, None)
            pmb = ev_get(f.pmb, "pmb")
            if type(pmb) is NativePMB:
                (<NativePMB>pmb).event = None
                (<NativePMB>pmb).prev = None
            ev_put(&f.pmb, None)
            src = ev_get(f.src, "src")
            if last.get(src) is e:
                del last[src]
            dropped += 1
        return dropped

    # ------------------------------------------------------------ readers

    def summary_view(self):
        return {src: view(<SrcSummary>summary, self.s.sums) for src, summary in self.s.summaries.items()}

    def extend(self, ecq, e, passed):
        cdef Net n = self.current()
        _check(e)
        src = ev_get(ev(e).src, "src")
        return extend(
            self.s, n, ecq_in(n, ecq.cls), self.s.summaries.get(src), ev_float(ev(e).end, "end"), _passed(passed),
            False
        )

    def summarise(self, e, init, kept, double hclock):
        cdef Net n = self.current()
        _check(e)
        f = ev(e)
        cls = ev_get(f.type, "type")
        g1 = None
        rest = None
        for k, groups in (kept or {}).items():
            g = groups if type(groups) is Groups else groups_of_list(list(groups), self.s.groups)
            if k == 1:
                g1 = g
            else:
                if rest is None:
                    rest = {}
                rest[k] = g
        pmb = ev_get(f.pmb, "pmb")
        summarise(
            self.s, n, None, pmb if type(pmb) is NativePMB else None, ev_get(f.src, "src"), cls,
            class_id(self.s.classes, cls), ev_float(f.start, "start"), bits_from_int(init), g1, rest,
            hclock - self.network.windows.most
        )

    # ------------------------------------------------------------ the event loop

    def run_events(self, engine, events, bytes unseen=None):
        """``OpClock.step_events`` for the shared engine: the same stamping, clock,
        cleaning and emission order. An event of a class only plain sequences use (no
        pending trailing negation due) goes through the compiled phases, its filters
        through the filter index,
        and the matches of plain queries that need nothing more are built here; anything
        else takes ``Network.on_event`` and ``LoopHost.emit``. The engine's counters
        live in C during the batch (``_Counters``) and are written back before any
        Python code runs and at the end.

        ``unseen`` (a keyed network's batch, ``KeyViews.seen``): one byte per event, 1
        for an event the network does not see, given as itself. It counts and moves the
        clock, releasing the kernel's waiting matches that fall due, and is neither
        stamped nor read further; when the network's own deadline passes or a source log
        notes it, it is first made its placeholder view (``ecq.partitions.placeholder``),
        which the loop then takes as any event."""
        cdef list out = []
        net = self.network
        cdef _Counters c = _Counters()
        c.ops = engine.ops
        c.arrivals = engine.arrivals
        c.since = engine.since_clean
        c.clock = engine.clock
        c.get(engine, net)
        cdef long long every = engine.clean_every
        cdef double before, end
        cdef bint direct, idle
        cdef Net n
        cdef Ecq q
        cdef SrcSummary summary
        cdef State s = self.s
        cdef Found found = s.assembly.found
        cdef Waiting waiting = s.assembly.waiting
        cdef _Ahead ahead = _Ahead()
        cdef Conjunctions s_conj = self.conjunctions
        cdef Klass k
        cdef Bits own
        cdef list conj
        cdef list seq = events if type(events) is list else list(events)
        cdef Py_ssize_t at, total = len(seq)
        cdef const unsigned char *marks = NULL
        if unseen is not None:
            if len(unseen) != total:
                raise ValueError(f"unseen has {len(unseen)} marks for {total} events")
            marks = <const unsigned char *>(<const char *>unseen)
        # The source log (ecq.matching.policy.SourceLog), while a strategy reads it:
        # each event noted as it is stamped, before anything looks at it.
        cdef dict log_arrivals = None, log_events = None
        log = net.source_log
        if log is not None:
            log.batch_start = c.arrivals
            log_arrivals = log.arrivals
            log_events = log.events
        try:
            for at in range(total):
                n = self.current()
                e = <object>PyList_GET_ITEM(seq, at)
                ahead.step(s, n, seq, at, total, marks)
                if marks != NULL and marks[at]:
                    # An event this network does not see: its end alone is read.
                    _check(e)
                    end = ev_float(ev(e).end, "end")
                    if log_arrivals is not None or (end if end > c.clock else c.clock) > c.deadline:
                        e = placeholder(e)
                    else:
                        c.ops += 1
                        c.arrivals += 1
                        before = c.clock
                        if end > before:
                            c.clock = end
                        if c.clock > waiting.earliest():
                            _release(c, engine, net, n, s, s_conj, before, c.arrivals - 1, out)
                        c.seen += 1
                        c.counted(engine, net, every)
                        continue
                if not isinstance(e, _EventBase) or ev_int(ev(e).arrival, "arrival") >= 0:
                    # Already processed (or not an Event): a copy is processed.
                    e = _Event(e.src, e.type, e.start, e.end, e.attrs, e.prob, e.id)
                f = ev(e)
                c.ops += 1
                arrival = c.arrivals
                ev_put(&f.arrival, arrival)
                ev_put(&f.moment, 2 * c.ops + 1)
                c.arrivals += 1
                if log_arrivals is not None:
                    _note(log_arrivals, log_events, ev_get(f.src, "src"), arrival, e)
                before = c.clock
                end = ev_float(f.end, "end")
                if end > before:
                    c.clock = end
                if c.clock > waiting.earliest() and not c.clock > c.deadline:
                    # Phase 0: the kernel's waiting matches (trailing negation) that
                    # are due; the network's own (c.deadline) take Network.on_event.
                    _release(c, engine, net, n, s, s_conj, before, arrival, out)
                cls = ev_get(f.type, "type")
                q = ecq_in(n, cls)
                idle = q.ecq is None and not c.clock > c.deadline
                k = None if q.plain or idle else s_conj.klass(cls)
                if idle:
                    # No query uses the class (or a keyed network's placeholder for an
                    # event it cannot see): Network.on_event would only count it, phase
                    # 0 being done above; through Python that cost ~2 µs an event.
                    c.seen += 1
                elif (not q.plain and (k is None or not k.loop)) or c.clock > c.deadline:
                    c.put(engine, net)
                    emitted = net.on_event(e, before, c.clock)
                    if emitted:
                        engine.emit(emitted, arrival, out)
                    c.get(engine, net)
                else:
                    c.seen += 1
                    src = ev_get(f.src, "src")
                    static = q.static if q.static is not None else passing(q, e)
                    summary = s.summaries.get(src)
                    extended = test(s, n, q, e, src, summary, end, static, c.clock, &direct)
                    conj = None
                    if k is not None:
                        # Conjunctions (_conjunction.pyx), between the test and insert
                        # phases as in Network._test_phase and _insert_phase: matches
                        # that need nothing more go to s_conj.made, others to conj.
                        own = slot_passing(k.index, e)
                        if own.n:
                            conj = []
                            rest = s_conj.complete_bits(k, e, own, c.clock, conj, True)
                            if rest:
                                c.put(engine, net)
                                net.assemble_conjunctions(k.ecq, e, rest, c.clock, conj)
                                c.get(engine, net)
                            s_conj.note_bits(e, k.cid, own)
                    insert(s, n, q, e, src, summary, cls, ev_float(f.start, "start"), static, extended, c.clock)
                    if s_conj.made and not conj and (direct or not found.n):
                        # Conjunctions' and sequences' matches that need nothing more.
                        if found.n:
                            _choose_found(found, net, src)
                        _choose_made(s_conj, net, src, arrival)
                        _emit_simple(c, found, s_conj, src, arrival, out)
                        found.clear()
                    elif conj or s_conj.made:
                        # Some match needs Python: all are settled there.
                        s_conj.hand_made(e, conj)
                        pairs = found.pairs() if found.n else []
                        found.clear()
                        c.put(engine, net)
                        emitted = net.settle_plain(pairs, e, c.clock, conj)
                        if emitted:
                            engine.emit(emitted, arrival, out)
                        c.get(engine, net)
                    elif found.n:
                        if direct:
                            _choose_found(found, net, src)
                            _emit_simple(c, found, s_conj, src, arrival, out)
                            found.clear()
                        else:
                            pairs = found.pairs()
                            found.clear()
                            c.put(engine, net)
                            emitted = net.settle_plain(pairs, e, c.clock)
                            if emitted:
                                engine.emit(emitted, arrival, out)
                            c.get(engine, net)
                c.counted(engine, net, every)
        finally:
            found.clear()
            s_conj.made = []
            s_conj.made_q = []
            c.put(engine, net)
            engine.since_clean = c.since
        return out


cdef inline int _check(object e) except -1:
    if not isinstance(e, _EventBase):
        raise TypeError(f"the compiled kernel processes ecq.event.Event instances, not {type(e).__name__}")
    return 0


cdef class _Counters:
    """The engine's op and arrival counters, clock, cleaning count and next match
    number, and the network's ``seen`` and next deadline, in C during a batch."""

    cdef long long ops, arrivals, since, seen, seq
    cdef double clock, deadline

    cdef int put(self, engine, net) except -1:
        # Written back before Python code runs: it may read and change them.
        engine.ops = self.ops
        engine.arrivals = self.arrivals
        engine.clock = self.clock
        engine.next_seq = self.seq
        net.seen = self.seen
        return 0

    cdef int get(self, engine, net) except -1:
        # What Python code may have changed.
        self.seq = engine.next_seq
        self.seen = net.seen
        self.deadline = net.own_deadline
        return 0

    cdef int counted(self, engine, net, long long every) except -1:
        # An op done: it counts towards cleaning, which runs every ``every`` ops.
        self.since += 1
        if self.since >= every:
            self.put(engine, net)
            engine.clean()
            self.since = engine.since_clean
        return 0


cdef class _Ahead:
    """Prefetching the summaries of the sources of the next events. A source's summary
    is cold when its event comes (a thousand sources take turns), and it is read at
    once: its rows, its later entries (a hundred or more at thousands of queries) and
    its chain heads. Three events ahead its object is asked for; two ahead, its arrays
    (their addresses are in the object, cached by then); one ahead, its rows. Only
    prefetches: nothing is read here that the event then uses."""

    cdef list ring  # the summaries of events at + 1 .. at + 3 (None: none), by index & 3

    def __cinit__(self):
        self.ring = [None] * 4

    cdef int step(
        self, State s, Net n, list seq, Py_ssize_t at, Py_ssize_t total, const unsigned char *unseen
    ) except -1:
        cdef SrcSummary x
        cdef Py_ssize_t lines
        cdef PyObject *src
        cdef PyObject *cls
        if at + 3 < total:
            nxt = <object>PyList_GET_ITEM(seq, at + 3)
            got = None
            if type(nxt) is _Event and (unseen == NULL or not unseen[at + 3]):
                src = ev(nxt).src
                cls = ev(nxt).type
                # Not for an event of a class no query reads (run_events only counts
                # it): its source's summary would be fetched for nothing.
                if src != NULL and cls != NULL and ecq_in(n, <object>cls).ecq is not None:
                    got = s.summaries.get(<object>src)
            self.ring[(at + 3) & 3] = got
            if got is not None:
                prefetch_lines(<const void *>got, 2)
        got = self.ring[(at + 2) & 3]
        if got is not None:
            x = <SrcSummary>got
            lines = (x.nent * sizeof(Ent) + 63) // 64
            prefetch_lines(<const void *>x.ent, <int>(lines if lines < 64 else 64))
            prefetch_lines(<const void *>x.boff, <int>(((x.nbo + 1) * sizeof(uint32_t) + 63) // 64))
            prefetch_lines(<const void *>x.heads, <int>((x.nheads * sizeof(PyObject *) + 63) // 64))
            prefetch_lines(<const void *>x.starts, 1)
        got = self.ring[(at + 1) & 3]
        if got is not None:
            x = <SrcSummary>got
            prefetch_lines(<const void *>x.starts.r, <int>((x.starts.n * sizeof(Row) + 63) // 64))
        self.ring[at & 3] = None
        return 0


# ------------------------------------------------------------------ emission


cdef int _release(
    _Counters c, engine, net, Net n, State s, Conjunctions cj, double before, object arrival, list out
) except -1:
    # Phase 0 of an event op in the compiled loop: the kernel's due waiting matches,
    # emitted as found (ordered as _emit_simple orders; no conjunction's match is made
    # yet: cj.made is empty), or through Network.release when one of them needs Python.
    cdef Found due = s.assembly.due
    rest = release(s.assembly, n, before, c.clock, False)
    if rest:
        c.put(engine, net)
        emitted = net.release(rest, 2 * c.ops, before, c.clock, arrival)
        if emitted:
            engine.emit(emitted, arrival, out)
        c.get(engine, net)
    elif due.n:
        try:
            _emit_simple(c, due, cj, None, arrival, out)
        finally:
            due.clear()
    return 0


cdef enum:
    _FEW = 64  # matches of one instance sorted on the stack


cdef int _emit_simple(_Counters c, Found found, Conjunctions cj, object src, object arrival, list out) except -1:
    # Network._finish + matches_of for matches that need nothing more, the sequences'
    # (found) and the conjunctions' (cj.made, compiled already): ordered by the node's
    # registration, then the events' arrival indexes (Emission.sort_key).
    cdef list made = cj.made, nodes = cj.made_q
    cdef Py_ssize_t nf = found.n, nm = PyList_GET_SIZE(made), i, j, m = 0
    cdef long long order
    cdef long long orders[_FEW]
    cdef Py_ssize_t idx[_FEW]  # i < nf: found's match i; else made[i - nf]
    cdef bint tie = nf + nm > _FEW
    if not tie:
        for i in range(nf + nm):
            if i < nf:
                if not bound_ok(<Plan>found.plan[i], found.prob[i]):
                    continue  # (a match of instances whose probability is 0)
                order = (<Plan>found.plan[i]).order
            else:
                order = (<_Query>PyList_GET_ITEM(nodes, i - nf)).order
            j = m
            while j > 0 and orders[j - 1] > order:
                orders[j] = orders[j - 1]
                idx[j] = idx[j - 1]
                j -= 1
            if j > 0 and orders[j - 1] == order:
                # A node with several matches (MODE ALL): their events' arrivals decide.
                tie = True
                break
            orders[j] = order
            idx[j] = i
            m += 1
    cdef list keyed
    if tie:
        keyed = []
        for i in range(nf):
            if bound_ok(<Plan>found.plan[i], found.prob[i]):
                arrivals = tuple([
                    ev_get(ev(<object>found.ev[j]).arrival, "arrival") for j in range(found.off[i], found.off[i + 1])
                ])
                keyed.append(((<Plan>found.plan[i]).order, arrivals, i))
        for i in range(nm):
            arrivals = tuple([ev_get(ev(x).arrival, "arrival") for x in (<Match>made[i]).events])
            keyed.append(((<_Query>nodes[i]).order, arrivals, nf + i))
        keyed.sort()
        m = len(keyed)
    cdef long long seq = c.seq
    cdef Match match
    for j in range(m):
        i = <Py_ssize_t>keyed[j][2] if tie else idx[j]
        if i < nf:
            _emit_one(found, i, src, seq, arrival, out)
        else:
            match = <Match>made[i - nf]
            match.seq = seq
            out.append(match)
            (<_Query>nodes[i - nf]).qs.counted += 1
        seq += 1
    c.seq = seq
    if nm:
        cj.made = []
        cj.made_q = []
    return 0


cdef int _choose_found(Found found, object net, object src) except -1:
    # The selection and consumption policies (ecq.matching.policy) of the nodes whose
    # matches the kernel chooses itself (Plan.policy): found keeps what they emit, in
    # place, before _emit_simple. A node's matches are consecutive in found (they are
    # assembled node by node).
    cdef Py_ssize_t n = found.n, i, j, k, w, wev, lo, hi, x
    cdef bint any_policy = False
    for i in range(n):
        if (<Plan>found.plan[i]).policy is not None:
            any_policy = True
            break
    if not any_policy:
        return 0
    cdef unsigned char small[_FEW]
    cdef unsigned char *keep = &small[0]
    if n > _FEW:
        keep = <unsigned char *>PyMem_Malloc(n)
    if keep == NULL:
        raise MemoryError()
    try:
        i = 0
        while i < n:
            j = i + 1
            while j < n and found.plan[j] == found.plan[i]:
                j += 1
            if (<Plan>found.plan[i]).policy is None:
                for k in range(i, j):
                    keep[k] = 1
            else:
                _choose_node(found, <Plan>found.plan[i], i, j, keep, net, src)
            i = j
        # Compact what is kept to the front, releasing the rest.
        w = 0
        wev = 0
        for k in range(n):
            lo = found.off[k]
            hi = found.off[k + 1]
            if keep[k]:
                if w != k:
                    for x in range(lo, hi):
                        found.ev[wev + x - lo] = found.ev[x]
                    found.plan[w] = found.plan[k]
                    found.prob[w] = found.prob[k]
                    found.start[w] = found.start[k]
                wev += hi - lo
                w += 1
                found.off[w] = wev
            else:
                for x in range(lo, hi):
                    Py_XDECREF(found.ev[x])
                    found.ev[x] = NULL
                Py_XDECREF(found.plan[k])
                found.plan[k] = NULL
        found.n = w
        found.nev = wev
        found.off[0] = 0
    finally:
        if keep != &small[0]:
            PyMem_Free(keep)
    return 0


cdef int _choose_node(
    Found found, Plan plan, Py_ssize_t i, Py_ssize_t j, unsigned char *keep, object net, object src
) except -1:
    # One node's matches found[i:j]: keep[k] set for those its policy emits.
    cdef Py_ssize_t k, x
    if j - i == 1:
        # (The common case: one match, read in place.)
        keep[i] = 0
        if bound_ok(plan, found.prob[i]):
            if type(plan.policy) is not _Choice:
                plan.policy = _choice(plan.policy)
            keep[i] = _one_passes(<_Choice>plan.policy, found.ev + found.off[i], found.off[i + 1] - found.off[i], net, src)
        return 0
    cdef list idx = [], cands = []
    for k in range(i, j):
        keep[k] = 0
        if bound_ok(plan, found.prob[k]):
            idx.append(k)
            cands.append([<object>found.ev[x] for x in range(found.off[k], found.off[k + 1])])
    if cands:
        if type(plan.policy) is not _Choice:
            plan.policy = _choice(plan.policy)
        for x in _choose(<_Choice>plan.policy, cands, net, src, -1):
            keep[<Py_ssize_t>idx[x]] = 1
    return 0


cdef int _choose_made(Conjunctions cj, object net, object src, long long trigger) except -1:
    # The same for the conjunctions' compiled matches (cj.made, their nodes in
    # cj.made_q, a node's consecutive): those their policy does not emit are dropped.
    cdef list made = cj.made, nodes = cj.made_q
    cdef Py_ssize_t n = PyList_GET_SIZE(made), i, j, x
    cdef _Query q
    for i in range(n):
        if (<_Query>PyList_GET_ITEM(nodes, i)).policy is not None:
            break
    else:
        return 0
    cdef list kept = [], kept_q = [], cands
    i = 0
    while i < n:
        q = <_Query>PyList_GET_ITEM(nodes, i)
        j = i + 1
        while j < n and PyList_GET_ITEM(nodes, j) == <PyObject *>q:
            j += 1
        if q.policy is None:
            kept.extend(made[i:j])
            kept_q.extend(nodes[i:j])
        else:
            cands = [(<Match>made[x])._events for x in range(i, j)]
            if type(q.policy) is not _Choice:
                q.policy = _choice(q.policy)
            for x in _choose(<_Choice>q.policy, cands, net, src, trigger):
                kept.append(made[i + x])
                kept_q.append(q)
        i = j
    cj.made = kept
    cj.made_q = kept_q
    return 0


cdef class _Choice:
    # What the kernel's choice reads of a query's PolicyState, read once (the policy
    # does not change), and what it uses up (the same dict and list, which
    # PolicyState changes in place).
    cdef object state  # the PolicyState
    cdef bint strict, consumes, logs, seq, exclusive, partition
    cdef int skip  # 0: none, 1: PAST LAST ROW, 2: TO NEXT ROW, 3: TO FIRST/LAST v
    cdef Py_ssize_t skip_pos
    cdef int mode  # 0: RECENT, 1: CHRONICLE, 2: ALL
    cdef tuple signs, comps
    cdef dict floors
    cdef list gens  # PolicyState.gens: the consumed indexes, newer then older


cdef _Choice _choice(object policy):
    # A node's Plan.policy / _Query.policy: the PolicyState the network gave it, made a
    # _Choice on first use (and kept there).
    if type(policy) is _Choice:
        return <_Choice>policy
    cdef _Choice c = _Choice.__new__(_Choice)
    c.state = policy
    c.strict = policy.strict
    c.consumes = policy.consumes
    c.logs = policy.logs
    c.seq = policy.seq
    c.exclusive = policy.exclusive
    c.partition = policy.partition
    skip = policy.skip
    c.skip = 0 if skip is None else 1 if skip == "past-last-row" else 2 if skip == "next-row" else 3
    c.skip_pos = policy.skip_pos
    mode = policy.mode
    c.mode = 0 if mode == "recent" else 1 if mode == "chronicle" else 2
    c.signs = policy.signs
    c.comps = policy.comps
    c.gens = policy.gens
    c.floors = policy.floors
    return c


cdef enum:
    _POS = 32  # positive components of a query whose matches _choose takes (QState.kernel_policy)
    _KEYS = 512  # candidates' keys kept on the stack


cdef list _choose(_Choice pstate, list cands, object net, object src, long long trigger):
    # PolicyState.choose, compiled for the matches the kernel assembled for one node at
    # one op (each a list of one event per positive component, in component order,
    # within the probability bound): the indexes of those its policy emits, by the
    # same rules (docs/semantics.md §11-§12). ``trigger``: the op's arrival index (a
    # conjunction's most recent candidate leaves it out). Each candidate gets a key of
    # 2 x length C numbers: its preference (smaller first) then its arrival indexes in
    # component order (the emission order, which breaks ties), compared
    # lexicographically; the strategy and consumption are then asked in that order.
    cdef Py_ssize_t k, x, y, m = len(cands), length = 0, width, kept = 0, best
    cdef long long a[_POS]  # one candidate's arrival indexes, in component order
    cdef Py_ssize_t o[_POS]  # its positions in arrival order
    cdef bint strict = pstate.strict, consumes = pstate.consumes, logs = pstate.logs, seq = pstate.seq
    cdef int mode = pstate.mode
    cdef list larr = None, levs = None
    if logs:
        # The source's logged events (SourceLog), read once for every candidate.
        larr, levs = _logged(net, src)
    cdef list out = []
    cdef PyObject **events
    cdef tuple signs = pstate.signs
    cdef long long small[_KEYS]
    cdef long long *keys = &small[0]
    cdef long long *key
    cdef Py_ssize_t small_at[_FEW]
    cdef Py_ssize_t *at = &small_at[0]  # the candidate of each key
    if m > 1:
        length = PyList_GET_SIZE(<list>cands[0])
        width = 2 * length
        if m * width > _KEYS:
            keys = <long long *>PyMem_Malloc(m * width * sizeof(long long))
            if keys == NULL:
                raise MemoryError()
        if m > _FEW:
            at = <Py_ssize_t *>PyMem_Malloc(m * sizeof(Py_ssize_t))
            if at == NULL:
                if keys != &small[0]:
                    PyMem_Free(keys)
                raise MemoryError()
    try:
        for k in range(m):
            length = PyList_GET_SIZE(<list>cands[k])
            events = PySequence_Fast_ITEMS(<list>cands[k])
            _arrivals(events, length, a, o)
            if m == 1:
                if _passes(pstate, events, a, o, length, larr, levs, src):
                    out.append(k)
                return out
            key = keys + kept * width
            at[kept] = k
            kept += 1
            for x in range(length):
                key[length + x] = a[x]
            if signs:
                # first:/last: component by component.
                for x in range(length):
                    key[x] = <long long>signs[x] * a[x]
            elif mode == 0 and seq:
                # The most recent first (docs/semantics.md §3): a sequence's components
                # from the one before the last back to the first, later preferred.
                for x in range(length - 1):
                    key[x] = -a[length - 2 - x]
                key[length - 1] = 0
            elif mode == 0:
                # A conjunction's (§4): its events other than the op's, latest first.
                y = 0
                for x in range(length - 1, -1, -1):
                    if a[o[x]] != trigger:
                        key[y] = -a[o[x]]
                        y += 1
                while y < length:
                    key[y] = LLONG_MIN  # (a shorter key sorts first)
                    y += 1
            else:
                # CHRONICLE and ALL: the emission order.
                for x in range(length):
                    key[x] = a[x]
        # In order of preference: the best left, until one is emitted (all of them in
        # MODE ALL).
        while kept:
            best = 0
            for y in range(1, kept):
                if _key_less(keys + y * width, keys + best * width, width):
                    best = y
            key = keys + best * width
            k = at[best]
            kept -= 1
            if best != kept:
                # The last key takes the chosen one's place (order among the rest is
                # found again by the next scan).
                for x in range(width):
                    key[x] = keys[kept * width + x]
                at[best] = at[kept]
            if strict or larr is not None or consumes:
                # The strategy, then what is used up, asked in order of preference: with
                # one match to emit, those after it are never looked at.
                events = PySequence_Fast_ITEMS(<list>cands[k])
                _arrivals(events, length, a, o)
                if not _passes(pstate, events, a, o, length, larr, levs, src):
                    continue
            out.append(k)
            if mode != 2:
                break
        return out
    finally:
        if keys != &small[0]:
            PyMem_Free(keys)
        if at != &small_at[0]:
            PyMem_Free(at)


cdef bint _one_passes(_Choice pstate, PyObject **events, Py_ssize_t length, object net, object src) except -1:
    # _choose for a single match, its events in place (``length`` of them, in component
    # order): whether its policy emits it (and if so what it uses up is used up).
    cdef long long a[_POS]  # (QState.kernel_policy: at most _POS)
    cdef Py_ssize_t o[_POS]
    cdef list larr = None, levs = None
    if pstate.logs:
        larr, levs = _logged(net, src)
    _arrivals(events, length, a, o)
    return _passes(pstate, events, a, o, length, larr, levs, src)


cdef tuple _logged(object net, object src):
    # The source's logged events (SourceLog): its arrival indexes and events, or Nones.
    log = net.source_log
    got = log.arrivals.get(src)
    if got is None:
        return None, None
    return got, log.events[src]


cdef inline bint _passes(
    _Choice pstate, PyObject **events, long long *a, Py_ssize_t *o, Py_ssize_t length,
    list larr, list levs, object src,
) except -1:
    # The strategy, then what is used up (taking it when the match passes).
    if pstate.strict and not _contiguous(a, o, length):
        return False
    if larr is not None and not _nothing_between(events, pstate, a, o, length, larr, levs):
        return False
    if pstate.consumes and not _take(pstate, a, o, length, src):
        return False
    return True


cdef inline int _note(dict arrivals, dict events, object src, object arrival, object e) except -1:
    # SourceLog.note for one event.
    got = arrivals.get(src)
    if got is None:
        arrivals[src] = [arrival]
        events[src] = [e]
    else:
        (<list>got).append(arrival)
        (<list>events[src]).append(e)
    return 0


cdef inline int _arrivals(PyObject **events, Py_ssize_t length, long long *a, Py_ssize_t *o) except -1:
    # The events' arrival indexes in ``a`` and their positions in arrival order in ``o``
    # (insertion sort: a handful of positions).
    cdef Py_ssize_t x, y
    for x in range(length):
        a[x] = ev_int(ev(<object>events[x]).arrival, "arrival")
        y = x
        while y > 0 and a[o[y - 1]] > a[x]:
            o[y] = o[y - 1]
            y -= 1
        o[y] = x
    return 0


cdef inline bint _contiguous(long long *a, Py_ssize_t *o, Py_ssize_t length) noexcept:
    # Strict contiguity: consecutive arrival indexes.
    cdef Py_ssize_t x
    for x in range(1, length):
        if a[o[x]] != a[o[x - 1]] + 1:
            return False
    return True


cdef inline bint _key_less(long long *p, long long *q, Py_ssize_t width) noexcept:
    cdef Py_ssize_t x
    for x in range(width):
        if p[x] != q[x]:
            return p[x] < q[x]
    return False


cdef bint _nothing_between(
    PyObject **matched, _Choice pstate, long long *a, Py_ssize_t *o, Py_ssize_t n, list arrivals, list events
) except -1:
    # Partition contiguity and skip-till-next-match (PolicyState.strategy_ok) for a
    # match of one event per positive component (``matched``, in component order; its
    # arrival indexes ``a``, ``o`` its positions in arrival order): for each two
    # successive in arrival order, the source's events that arrived between them (its
    # SourceLog entries: ``arrivals`` ascending, ``events``) are none, or none relevant
    # after the first (one of the classes of a component the run waits for, and
    # PolicyState.fills).
    cdef Py_ssize_t p, r, t, first, last, px
    cdef bint partition = pstate.partition, seq = pstate.seq
    cdef tuple comps = pstate.comps
    for p in range(n - 1):
        first = _after(arrivals, a[o[p]])
        last = _after(arrivals, a[o[p + 1]] - 1)
        if first == last:
            continue
        if partition:
            return False
        px = o[p]
        x = <object>matched[px]
        for t in range(first, last):
            z = <object>PyList_GET_ITEM(events, t)
            cls = ev_get(ev(z).type, "type")
            if seq:
                # A sequence's run waits for the component after x's.
                if px + 1 < n and _fills(pstate, <tuple>comps[px + 1], cls, z, x, True):
                    return False
            else:
                # A conjunction's, for every component a later event of the match fills.
                for r in range(p + 1, n):
                    if _fills(pstate, <tuple>comps[o[r]], cls, z, x, False):
                        return False
    return True


cdef Py_ssize_t _after(list arrivals, long long value) except -1:
    # bisect_right on a SourceLog's arrival indexes (ascending).
    cdef Py_ssize_t lo = 0, hi = PyList_GET_SIZE(arrivals), mid
    while lo < hi:
        mid = (lo + hi) >> 1
        if value < <long long>(<object>PyList_GET_ITEM(arrivals, mid)):
            hi = mid
        else:
            lo = mid + 1
    return lo


cdef inline bint _fills(_Choice pstate, tuple comp, object cls, object z, object x, bint seq) except -1:
    # PolicyState.fills: z of class cls could fill the component (index, classes, has
    # conditions of its own) of a run at x.
    if cls not in <frozenset>comp[1]:
        return False
    if comp[2]:
        return pstate.state.fills(comp[0], z, x)
    return not seq or ev_float(ev(x).end, "end") <= ev_float(ev(z).start, "start")


cdef bint _take(_Choice pstate, long long *a, Py_ssize_t *o, Py_ssize_t n, object src) except -1:
    # PolicyState.take for a match of one event per positive component (arrival
    # indexes ``a`` in component order, ``o`` its positions in arrival order): whether
    # it passes what the query used up, and if so it is used up (docs/semantics.md §12).
    cdef dict floors = pstate.floors
    cdef set consumed, before
    cdef long long low = a[o[0]], high = a[o[n - 1]], new
    cdef Py_ssize_t x
    floor = floors.get(src) if floors else None
    if pstate.exclusive:
        consumed = <set>PyList_GET_ITEM(pstate.gens, 0)
        before = <set>PyList_GET_ITEM(pstate.gens, 1)
        for x in range(n):
            v = a[x]
            if v in consumed or (before and v in before):
                return False
    if floor is not None and low < <long long>floor:
        return False
    if pstate.exclusive:
        for x in range(n):
            consumed.add(a[x])
    if pstate.skip:
        if pstate.skip == 1:
            new = high + 1
        elif pstate.skip == 2:
            new = low + 1
        else:
            new = a[pstate.skip_pos]
        if floor is None or new > <long long>floor:
            floors[src] = new
    return True


cdef int _emit_one(Found found, Py_ssize_t i, object src, long long seq, object arrival, list out) except -1:
    # Match(name, src, start, end, events, None, prob, seq, arrival), field by field; the
    # match takes found's references to its events. ``src`` None: its events'.
    cdef Plan plan = <Plan>found.plan[i]
    cdef Py_ssize_t k, lo = found.off[i], ln = found.off[i + 1] - found.off[i]
    cdef Match m = Match.__new__(Match)
    m.query = plan.name
    m.src = src if src is not None else ev_get(ev(<object>found.ev[lo]).src, "src")
    m.start = found.start[i]
    m.end = ev_float(ev(<object>found.ev[lo + ln - 1]).end, "end")
    if ln <= INLINE_EVENTS:
        for k in range(ln):
            m.held[k] = found.ev[lo + k]
            found.ev[lo + k] = NULL
        m.nev = ln
    else:
        m._events = [<object>found.ev[lo + k] for k in range(ln)]
    m.prob = found.prob[i]
    m.seq = seq
    m.trigger = arrival
    out.append(m)
    plan.matches += 1
    return 0
