# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The test and insert phases of the compiled kernel, for the plain sequences (and
single-component filters) of an arriving instance's class, at level "summary"; the
pure forms are ``PureKernel.test_phase`` and ``insert_phase`` (ecq/kernel/pure.py).

- **test phase** (``test``): extend the partial matches of every query from the
  source's summary (``extend``: first positions from the dense rows, through the class
  pair's few queries; later positions from the entries of the instance's class's
  bucket), gather the queries the instance completes, and assemble their matches
  (``complete``, then _assembly). A position where every query ends gives its
  completed queries straight to the set of completed ones (no Groups made to be read
  once).
- **insert phase** (``insert``): the instance's PMB (a ``NativePMB``), its place in the
  SIQ, and its source's summary (``summarise``: rows, then the entries it brings,
  bucketed and merged)."""

from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.ref cimport PyObject
from libc.stdint cimport int32_t, uint16_t, uint32_t

from ecq.kernel._assembly cimport Assembly, Found, assemble
from ecq.kernel._bitset cimport (
    Bits,
    QuerySet,
    WindowMasks,
    Words,
    bits_and,
    bits_empty,
    bits_has,
    prefetch_lines,
    qset_of_bits,
    window_mask,
    words_clear,
    words_free,
    words_next,
    words_or_and,
    words_set,
)
from ecq.kernel._constants cimport (
    HCID_LONG,
    HCID_UNSET,
    ClassIds,
    Ecq,
    Net,
    Plan,
    bucket,
    pair_ids,
    plan_at,
)
from ecq.kernel._events cimport ev, ev_float, ev_get, ev_int, ev_put
from ecq.kernel._filters cimport Passing, SlotIndex, passing_at, passing_first, passing_init
from ecq.kernel._pmb cimport (
    Builder,
    GroupScratch,
    Groups,
    NativePMB,
    add_ids_in,
    builder_reset,
    keep_of,
    resolve,
)
from ecq.kernel._summary cimport (
    NO_BUCKET,
    Ent,
    Rows,
    SrcSummary,
    SummaryScratch,
    join,
    pick,
    set_mark,
    summary_head,
)

__all__ = ["State"]


cdef class State:
    """One kernel's summaries and working memory (see _phases.pxd)."""

    def __cinit__(self):
        self.summaries = {}
        self.classes = ClassIds()
        self.groups = GroupScratch()
        self.sums = SummaryScratch(self.groups)
        self.assembly = Assembly()

    def __dealloc__(self):
        words_free(&self.done)


# ------------------------------------------------------------------ test phase


cdef dict extend(State s, Net n, Ecq q, SrcSummary summary, double e_end, object passed, bint to_done):
    # For each position k of q's class, the groups of queries whose partial match at
    # k - 1 (at the instance's source) the instance extends within their window, from
    # the source's summary. With ``to_done``, a position where no query goes on gives
    # no groups: the queries it completes go to s.done directly. ``passed``: what the
    # instance passes (_constants.passing): the static sets, or a Passing read in place.
    cdef dict out = {}
    if summary is None:
        return out
    cdef Passing got
    cdef SlotIndex x
    cdef QuerySet m
    cdef Py_ssize_t p, k
    if type(passed) is Passing:
        got = <Passing>passed
        x = got.x
        for p in range(x.nplaces):
            k = x.key[p]
            if k == 0 or k > summary.nlater + 1 or not got.live[p]:
                continue
            either = q.either.get(k)
            if either is None:
                continue
            passing_at(got, p, &m)
            _extend_at(s, n, q, summary, e_end, k, <Bits>either, &m, to_done, out)
    else:
        # No filters: each position's queries, all in final | more.
        for key, bits in (<dict?>passed).items():
            k = key
            if k == 0 or k > summary.nlater + 1 or (<Bits>bits).n == 0:
                continue
            _extend_at(s, n, q, summary, e_end, k, <Bits>bits, NULL, to_done, out)
    return out


cdef int _extend_at(
    State s, Net n, Ecq q, SrcSummary summary, double e_end, Py_ssize_t k, Bits either, const QuerySet *m,
    bint to_done, dict out
) except -1:
    # extend at position k >= 1: ``either`` its queries, ``m`` those the instance passes
    # there (NULL: all of either; the set itself at k > 1).
    cdef Rows starts = summary.starts
    cdef WindowMasks wins = n.windows
    cdef double full = wins.least
    cdef double oldest = e_end - wins.most
    cdef Py_ssize_t i, count, bq
    cdef double t
    cdef Bits wm, row
    cdef Builder raw = s.groups.raw
    cdef const uint32_t *pair
    cdef QuerySet all_of
    builder_reset(raw)
    if k == 1:
        if m != NULL:
            _prefetch_pairs(n, q, starts, either)
        i = 0
        while i < starts.n:  # one row per class
            t = starts.r[i].t
            if t < oldest:
                summary.drop_start(i)
                continue
            # The row & m through the class pair's few queries (those of the row's
            # class at position 0 and of this one at 1: a few, where the row is as wide
            # as every query), what the instance passes checked per query. Most pairs
            # have none when the network's queries are few beside its classes (a
            # partition key's share): such a row costs the lookup alone.
            pair = pair_ids(n, q, starts.r[i].tag, either, &count)
            if count:
                wm = window_mask(wins, e_end - t) if e_end - t > full else None
                row = <Bits>starts.r[i].b
                add_ids_in(pair, count, row.w, row.n, wm, m, raw, t)
            i += 1
        if raw.n:
            if to_done and _none(q.more.get(k)):
                _raw_final(raw, q.final.get(k), &s.done)
            else:
                # First positions: each query at its latest start, one group per
                # distinct start (classes' entries share queries only through ANY).
                out[k] = resolve(raw, s.groups)
    else:
        if m == NULL:
            qset_of_bits(&all_of, either)
            m = &all_of
        bq = q.cid + 1 if q.cid + 1 < NO_BUCKET else 0
        pick(summary, bq, k - 1, e_end, m, wins, raw, s.sums)
        if raw.n:
            if to_done and _none(q.more.get(k)):
                _raw_final(raw, q.final.get(k), &s.done)
            else:
                out[k] = raw.finish()  # later positions' groups are disjoint already
    return 0


cdef int _prefetch_pairs(Net n, Ecq q, Rows starts, Bits either) except -1:
    # The words of the source's rows that the pair queries will be looked up in, asked
    # for at once: with filters, each row is an instance's own set of passing queries
    # (as wide as every query, cold), not a set shared by the class's instances, and
    # looking the few queries up one row after the other waited for each miss in turn.
    cdef Py_ssize_t i, j, count
    cdef const uint32_t *pair
    cdef Bits row
    for i in range(starts.n):
        row = <Bits>starts.r[i].b
        pair = pair_ids(n, q, starts.r[i].tag, either, &count)
        for j in range(count):
            if (pair[j] >> 6) < <uint32_t>row.n:
                prefetch_lines(<const void *>(row.w + (pair[j] >> 6)), 1)
    return 0


cdef inline bint _none(object bits):
    return bits is None or (<Bits>bits).n == 0


cdef int _raw_final(Builder raw, object fin, Words *done) except -1:
    # done |= the queries put together in raw that are in fin.
    cdef Py_ssize_t j
    if fin is None:
        return 0
    for j in range(raw.off[raw.n]):
        if bits_has(<Bits>fin, raw.ids[j]):
            words_set(done, raw.ids[j])
    return 0


cdef int _or_final(Words *done, Groups g, Bits fin) except -1:
    # done |= the queries of g that are in fin.
    cdef Py_ssize_t j
    for j in range(g.off[g.n]):
        if bits_has(fin, g.ids[j]):
            words_set(done, g.ids[j])
    return 0


cdef dict test(
    State s, Net n, Ecq q, object e, object src, SrcSummary summary, double end, object passed, double hclock,
    bint *direct
):
    # The test phase of instance e (of q's class, at source src, whose summary is
    # ``summary`` or None): the extended groups; the matches it completes go to the
    # assembly's Found, ``direct``: whether all can be emitted as found.
    cdef dict extended
    cdef Py_ssize_t bitno
    cdef bint later
    direct[0] = True
    try:
        if type(passed) is Passing:
            later = (<Passing>passed).x.nplaces > 1 or (<Passing>passed).x.p0 < 0
        else:
            later = len(<dict?>passed) > 1 or 0 not in passed
        extended = extend(s, n, q, summary, end, passed, True) if later else {}
        fin = q.final.get(0)
        if fin is not None:
            got = _first(passed)
            if got is not None:
                words_or_and(&s.done, <Bits>got, <Bits>fin)
        for key, groups in extended.items():
            fin = q.final.get(key)
            if fin is not None:
                _or_final(&s.done, <Groups?>groups, <Bits>fin)
        bitno = words_next(&s.done, 0)
        if bitno >= 0:
            _prefetch_plans(n, &s.done, bitno)
            direct[0] = _complete(s, n, e, src, summary, hclock, bitno)
    finally:
        words_clear(&s.done)
    return extended


cdef void _prefetch_plans(Net n, Words *done, Py_ssize_t bitno) noexcept:
    # The plans of the nodes an instance completes are cold (thousands of nodes, a few
    # complete per instance): asked for all at once, their misses overlap.
    cdef list plans = n.plans
    while bitno >= 0:
        if bitno < PyList_GET_SIZE(plans):
            prefetch_lines(<const void *>PyList_GET_ITEM(plans, bitno), 4)
        bitno = words_next(done, bitno + 1)


cdef inline void _prefetch_head(SrcSummary summary, Py_ssize_t cid) noexcept:
    cdef PyObject *head = summary_head(summary, cid)
    if head != NULL:
        prefetch_lines(<const void *>head, 2)


cdef void _prefetch_heads(Net n, SrcSummary summary, Words *done, Py_ssize_t bitno) noexcept:
    # Likewise the PMBs heading the source's chains the assembly will walk first (their
    # classes from Net.hcid, warm, where the plans have not arrived yet), then the
    # position-1 blocks of those PMBs (once they have: their misses overlap in turn).
    cdef list plans = n.plans
    cdef Plan plan
    cdef Py_ssize_t i, b = bitno
    cdef int32_t c
    cdef PyObject *head
    while b >= 0:
        c = n.hcid[2 * b] if 2 * b + 1 < n.hcid_n else HCID_UNSET
        if c == HCID_LONG:
            if b < PyList_GET_SIZE(plans) and <object>PyList_GET_ITEM(plans, b) is not None:
                plan = <Plan>PyList_GET_ITEM(plans, b)
                for i in range(plan.length - 1):
                    if plan.pos[i].cid >= 0:
                        _prefetch_head(summary, plan.pos[i].cid)
        elif c != HCID_UNSET:
            if c >= 0:
                _prefetch_head(summary, c)
            if n.hcid[2 * b + 1] >= 0:
                _prefetch_head(summary, n.hcid[2 * b + 1])
        b = words_next(done, b + 1)
    b = bitno
    while b >= 0:
        c = n.hcid[2 * b] if 2 * b + 1 < n.hcid_n else HCID_UNSET
        if c >= 0:
            head = summary_head(summary, c)
            if head != NULL and (<NativePMB>head).g1block != NULL:
                i = ((<NativePMB>head).g1bytes + 63) >> 6
                prefetch_lines((<NativePMB>head).g1block, <int>(i if i < 8 else 8))
        b = words_next(done, b + 1)


cdef bint _complete(State s, Net n, object e, object src, SrcSummary summary, double hclock, Py_ssize_t bitno) except -1:
    # The matches of the queries in s.done (lowest number first, as the pure kernel's
    # order), into the assembly's Found. Returns whether all can be emitted as found.
    cdef bint direct = True
    cdef Assembly a = s.assembly
    cdef Found found = a.found
    cdef Plan plan
    cdef Py_ssize_t before
    cdef bint ok
    a.probe.at(n, src, hclock, summary)
    f = ev(e)
    cdef double e_prob = ev_float(f.prob, "prob"), e_start = ev_float(f.start, "start")
    cdef double e_end = ev_float(f.end, "end")
    cdef long long e_moment = ev_int(f.moment, "moment")
    if summary is not None:
        _prefetch_heads(n, summary, &s.done, bitno)
    while bitno >= 0:
        plan = plan_at(n, bitno)
        bitno = words_next(&s.done, bitno + 1)
        if plan.never:
            continue
        # Its name (a cold string) goes into each match: asked for now, read later.
        prefetch_lines(<const void *>plan.name, 1)
        before = found.n
        if plan.single:
            if plan.top and plan.probability is not None:
                ok = e_prob >= <double>plan.probability
            else:
                ok = e_prob > 0.0
            if ok:
                found.add_one(plan, e, e_prob, e_start)
        else:
            assemble(a, plan, e, e_end, e_start, e_prob, e_moment)
        if found.n > before:
            direct = direct and plan.direct
    return direct


# ------------------------------------------------------------------ insert phase


cdef inline object _first(object passed):
    # What the instance passes at position 0, as query numbers (Bits), or None.
    if type(passed) is Passing:
        return passing_first(<Passing>passed)
    return (<dict>passed).get(0)


cdef bint insert(
    State s, Net n, Ecq q, object e, object src, SrcSummary summary, object cls, double start, object passed,
    dict extended, double hclock
) except -1:
    # The insert phase of instance e: stored (with its PMB) when a partial match can go
    # on from it or a composite node uses its class; returns whether it was.
    cdef Bits init
    cdef NativePMB pmb
    cdef Groups g1 = None
    cdef dict rest = None
    if passed is q.static:
        init = q.init  # the same for every instance of the class: one set, shared
    elif type(passed) is Passing:
        # Made here from the failures, in one pass with the AND (not made in the search
        # and ANDed here).
        got = passing_init(<Passing>passed, q.more0)
        init = <Bits>got if got is not None else bits_empty()
    else:
        got = _first(passed)
        init = bits_and(<Bits>got, q.more0) if got is not None else bits_empty()
    for key, groups in extended.items():
        more = q.more.get(key)
        if _none(more):
            continue
        keep = keep_of(<Groups?>groups, <Bits>more, s.groups)
        if keep is not None:
            if key == 1:
                g1 = <Groups>keep
            else:
                if rest is None:
                    rest = {}
                rest[key] = keep
    if not (init.n or g1 is not None or rest is not None or q.general_uses):
        return False
    f = ev(e)
    pmb = NativePMB.__new__(NativePMB)
    pmb.init_bits = init
    pmb.g1 = g1
    if g1 is not None:
        pmb.g1block = g1.block
        pmb.g1n = <int32_t>g1.n
        pmb.g1bytes = <int32_t>(g1.cap if g1.cap < (1 << 30) else (1 << 30))
    pmb.rest = rest
    pmb.event = e
    pmb.start = start
    pmb.end = ev_float(f.end, "end")
    pmb.prob = ev_float(f.prob, "prob")
    pmb.moment = ev_int(f.moment, "moment")
    ev_put(&f.pmb, pmb)
    last = q.last
    ev_put(&f.prev, last.get(src))
    last[src] = e
    q.queue.append(e)
    if init.n or g1 is not None or rest is not None:
        summarise(s, n, summary, pmb, src, cls, q.cid, start, init, g1, rest, hclock - n.windows.most)
    return True


cdef int summarise(
    State s, Net n, SrcSummary summary, NativePMB pmb, object src, object cls, Py_ssize_t cid, double start,
    Bits init, Groups g1, dict rest, double cutoff
) except -1:
    # Fold an instance's PMB (``init``; kept groups: position 1's ``g1`` and ``rest``)
    # into its source's summary (``summary``, or None to look it up or make it); its
    # native PMB (when given) becomes the head of the source's chain of its class.
    cdef Py_ssize_t i, nf = 0
    if summary is None:
        summary = s.summaries.get(src)
        if summary is None:
            summary = SrcSummary()
            s.summaries[src] = summary
    if pmb is not None:
        summary.set_head(cid, pmb)
    cdef Rows starts = summary.starts
    if init.n:
        # The class's row, found by its number (the rows carry them).
        for i in range(starts.n):
            if starts.r[i].tag == cid:
                break
        else:
            i = -1
        if i < 0:
            summary.s_cls.append(cls)
            starts.append(start, init, cid)
        else:
            if start > starts.r[i].t:
                starts.r[i].t = start
            starts.or_row(i, init)
    if g1 is not None:
        _fold(s, n, summary, 1, g1, cutoff, &nf)
    if rest is not None:
        for key, groups in rest.items():
            _fold(s, n, summary, key, <Groups?>groups, cutoff, &nf)
    if g1 is not None or rest is not None:
        join(summary, nf, s.sums)
    return 0


cdef int _fold(State s, Net n, SrcSummary summary, Py_ssize_t k, Groups g, double cutoff, Py_ssize_t *nf) except -1:
    # Position k's kept groups become fresh entries (those at or above ``cutoff``, which
    # drops the position's older entries: merge_latest).
    if k >= NO_BUCKET:
        raise OverflowError(f"a sequence of more than {NO_BUCKET} steps")
    set_mark(summary, k, cutoff)
    cdef Py_ssize_t i, j, m = nf[0]
    cdef double t
    cdef SummaryScratch x = s.sums
    x.fresh_room(m + g.off[g.n])
    for i in range(g.n):
        t = g.t[i]
        if t < cutoff:
            break  # latest first: the rest are older
        for j in range(g.off[i], g.off[i + 1]):
            x.fresh[m].t = t
            x.fresh[m].q = g.ids[j]
            x.fresh[m].k = <uint16_t>k
            x.fresh[m].b = <uint16_t>bucket(n, k, g.ids[j])
            m += 1
    nf[0] = m
    return 0
