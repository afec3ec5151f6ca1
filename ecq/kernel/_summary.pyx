# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Per-source summaries of the compiled kernel (the pure form: ``ecq.kernel.pure``).

A source's summary keeps, per query and position, the latest start of a partial match,
merged across classes: ``starts`` (one dense row per class for first positions, in the
order a dict would keep them: a class's first-position queries are many) and the
entries of later positions (``Ent``), sorted by the class the query waits for there
(its *bucket*). An instance of class X reads only X's bucket (and bucket 0, positions
that take several classes): at thousands of queries a source holds a hundred or more
later entries, and scanning and merging all of them on every instance was most of an
instance's time. ``view()`` is the pure summary's ``(starts, later)`` tuple; ``mark``
keeps, per position, the cutoff below which the pure code has dropped a position's
groups (at merges and pruning), and entries below it count as gone until a pass over
the entries removes them.

A row's query set is a ``Bits`` held by reference: an unfiltered instance's initial
entries are one set per class (the ECQ constants' ``init``), so rows built from them
share it (one copy per class, warm, instead of a cold row per source as wide as every
registered query)."""

from cpython.mem cimport PyMem_Free
from cpython.ref cimport PyObject, Py_INCREF, Py_XDECREF
from libc.math cimport INFINITY
from libc.stdint cimport uint16_t, uint32_t, uint64_t
from libc.stdlib cimport qsort
from libc.string cimport memcpy, memset

from ecq.kernel._bitset cimport (
    Bits,
    QuerySet,
    WindowMasks,
    and_ids,
    bits_has,
    bits_or,
    bits_to_int,
    bits_within,
    bits_without,
    grow,
    ids_to_int,
    qset_has,
    window_mask,
    words_has,
)
from ecq.kernel._pmb cimport Builder, GroupScratch, NativePMB, builder_close, builder_reset, builder_used

__all__ = ["SrcSummary"]


cdef class Rows:
    """Rows of (start, query set, class id) stored contiguously: a source's summary is
    read on every event of the source, and as separate Python objects each group cost a
    cache miss or three."""

    def __dealloc__(self):
        cdef Py_ssize_t i
        for i in range(self.n):
            Py_XDECREF(self.r[i].b)
        PyMem_Free(self.r)

    cdef int append(self, double t, Bits bits, Py_ssize_t tag) except -1:
        cdef Py_ssize_t cap
        if self.n + 1 > self.cap:
            cap = self.cap * 2 if self.cap else 4
            self.r = <Row *>grow(self.r, cap * sizeof(Row))
            self.cap = cap
        Py_INCREF(bits)
        self.r[self.n].t = t
        self.r[self.n].b = <PyObject *>bits
        self.r[self.n].tag = tag
        self.n += 1
        return 0

    cdef void delete(self, Py_ssize_t i) noexcept:
        cdef Py_ssize_t j
        Py_XDECREF(self.r[i].b)
        for j in range(i, self.n - 1):
            self.r[j] = self.r[j + 1]
        self.n -= 1

    cdef int _put(self, Py_ssize_t i, Bits bits) except -1:
        Py_INCREF(bits)
        Py_XDECREF(self.r[i].b)
        self.r[i].b = <PyObject *>bits
        return 0

    cdef int or_row(self, Py_ssize_t i, Bits bits) except -1:
        # Row i gets the queries of ``bits`` too: the row's own set when it holds them
        # already, ``bits`` when it holds the row's (likely the class's shared set),
        # else a new set.
        cdef Bits old = <Bits>self.r[i].b
        if old is bits or bits_within(bits, old):
            return 0
        if bits_within(old, bits):
            return self._put(i, bits)
        return self._put(i, bits_or(old, bits))

    cdef int clear_bit(self, Py_ssize_t bitno) except -1:
        cdef Py_ssize_t i
        for i in range(self.n):
            if bits_has(<Bits>self.r[i].b, bitno):
                self._put(i, bits_without(<Bits>self.r[i].b, bitno))
        return 0


cdef class SummaryScratch:
    """One kernel's working memory for summaries (never shared between kernels)."""

    def __cinit__(self, GroupScratch groups):
        self.groups = groups

    def __dealloc__(self):
        PyMem_Free(self.picked)
        PyMem_Free(self.fresh)
        PyMem_Free(self.spare)
        PyMem_Free(self.sorted)
        PyMem_Free(self.added)

    cdef int fresh_room(self, Py_ssize_t n) except -1:
        if n > self.fresh_cap:
            self.fresh_cap = 2 * n + 16
            self.fresh = <Ent *>grow(self.fresh, self.fresh_cap * sizeof(Ent))
        return 0


cdef int _pick_room(SummaryScratch x, Py_ssize_t n) except -1:
    if n > x.picked_cap:
        x.picked_cap = 2 * n + 16
        x.picked = <Ent *>grow(x.picked, x.picked_cap * sizeof(Ent))
    return 0


cdef int _added_room(SummaryScratch x, Py_ssize_t n) except -1:
    if n > x.added_cap:
        x.added = <uint32_t *>grow(x.added, n * sizeof(uint32_t))
        memset(x.added + x.added_cap, 0, (n - x.added_cap) * sizeof(uint32_t))
        x.added_cap = n
    return 0


cdef class SrcSummary:
    """One source's summary (see the module's docstring). ``heads``: per class id, the
    PMB of the source's latest instance of the class that was summarised (owned
    references, or NULL), the head of its chain (``NativePMB.prev``) for assembling
    matches without a lookup in the SIQ's per-source index. Instances stored without
    summary entries are left out: no plain sequence can use them."""

    def __cinit__(self):
        self.s_cls = []
        self.starts = Rows()

    def __dealloc__(self):
        cdef Py_ssize_t i
        for i in range(self.nheads):
            Py_XDECREF(self.heads[i])
        PyMem_Free(self.heads)
        PyMem_Free(self.ent)
        PyMem_Free(self.boff)
        PyMem_Free(self.mark)

    cdef int set_head(self, Py_ssize_t cid, NativePMB pmb) except -1:
        # ``pmb``'s instance is the latest summarised one of its class: it heads the
        # chain, the previous head behind it.
        cdef Py_ssize_t i, want
        if cid >= self.nheads:
            want = cid + 8
            self.heads = <PyObject **>grow(self.heads, want * sizeof(PyObject *))
            for i in range(self.nheads, want):
                self.heads[i] = NULL
            self.nheads = want
        if self.heads[cid] != NULL:
            pmb.prev = <NativePMB>self.heads[cid]
        Py_INCREF(pmb)
        Py_XDECREF(self.heads[cid])
        self.heads[cid] = <PyObject *>pmb
        return 0

    cdef int widen(self, Py_ssize_t k) except -1:
        # Positions up to k (the pure list ``later`` grows to k lists).
        cdef Py_ssize_t i
        if k > self.nlater:
            self.mark = <double *>grow(self.mark, k * sizeof(double))
            for i in range(self.nlater, k):
                self.mark[i] = -INFINITY
            self.nlater = k
        return 0

    cdef int _boff_room(self, Py_ssize_t nb) except -1:
        # Room in boff for buckets up to nb - 1 (nb + 1 offsets).
        if nb + 1 > self.cap_bo:
            self.cap_bo = nb + 1 + 8
            self.boff = <uint32_t *>grow(self.boff, self.cap_bo * sizeof(uint32_t))
        return 0

    cdef int index(self) except -1:
        # boff from the sorted entries: counts per bucket, then their running sums.
        cdef Py_ssize_t nb = self.ent[self.nent - 1].b + 1 if self.nent else 0, b, i
        cdef uint32_t run = 0, c
        self._boff_room(nb)
        memset(self.boff, 0, (nb + 1) * sizeof(uint32_t))
        for i in range(self.nent):
            self.boff[self.ent[i].b] += 1
        for b in range(nb + 1):
            c = self.boff[b]
            self.boff[b] = run
            run += c
        self.nbo = nb
        return 0

    cdef int _bucket_room(self, Py_ssize_t nb) except -1:
        # Buckets up to nb - 1 indexed (the new ones empty, at the end).
        cdef Py_ssize_t b
        self._boff_room(nb)
        for b in range(self.nbo + 1, nb + 1):
            self.boff[b] = <uint32_t>self.nent
        if self.nbo == 0:
            self.boff[0] = 0
        self.nbo = nb
        return 0

    cdef int keep_if(self, Py_ssize_t without) except -1:
        # Drop the entries below their position's mark, and query ``without``'s (-1:
        # none), in place.
        cdef Py_ssize_t i, w = 0
        for i in range(self.nent):
            if ent_live(self, &self.ent[i]) and <Py_ssize_t>self.ent[i].q != without:
                self.ent[w] = self.ent[i]
                w += 1
        self.nent = w
        self.sifted = w
        return self.index()

    cdef int drop_start(self, Py_ssize_t i) except -1:
        # A class's first-position row goes, and its name with it.
        del self.s_cls[i]
        self.starts.delete(i)
        return 0


cdef int set_mark(SrcSummary s, Py_ssize_t k, double cutoff) except -1:
    # Entries from position k below ``cutoff`` are gone (merge_latest drops a position's
    # older groups when the instance's are folded in).
    s.widen(k)
    if cutoff < s.mark[k - 1]:
        # A lower cutoff than one applied before: what that one dropped goes for good
        # first, so that the mark can come down.
        s.keep_if(-1)
        s.mark[k - 1] = cutoff
    elif cutoff > s.mark[k - 1]:
        s.mark[k - 1] = cutoff
    return 0


cdef object _groups_at(SrcSummary s, Py_ssize_t k, SummaryScratch x):
    # Position k's live entries as the pure code's latest-first groups.
    cdef Py_ssize_t i, m = 0
    cdef const Ent *e
    cdef Builder made = x.groups.made
    _pick_room(x, s.nent)
    for i in range(s.nent):
        e = &s.ent[i]
        if e.k == k and ent_live(s, e):
            x.picked[m] = e[0]
            m += 1
    _group_picked(x, m, made)
    return [(made.t[i], ids_to_int(made.ids + made.off[i], made.off[i + 1] - made.off[i])) for i in range(made.n)]


cdef object view(SrcSummary s, SummaryScratch x):
    starts = {cls: (s.starts.r[i].t, bits_to_int(<Bits>s.starts.r[i].b)) for i, cls in enumerate(s.s_cls)}
    return starts, [_groups_at(s, k, x) for k in range(1, s.nlater + 1)]


cdef bint is_empty(SrcSummary s) noexcept:
    cdef Py_ssize_t i
    for i in range(s.nent):
        if ent_live(s, &s.ent[i]):
            return False
    return len(s.s_cls) == 0


cdef int prune(SrcSummary s, double cutoff) except -1:
    # Drop what no window can reach any more (the pure prune_summary for this source).
    cdef Py_ssize_t i = 0
    cdef PyObject *p
    while i < len(s.s_cls):
        if s.starts.r[i].t < cutoff:
            s.drop_start(i)
        else:
            i += 1
    # The later entries below the cutoff become invisible; they go at the source's next
    # merge that sifts (join), or with the summary when nothing is left.
    for i in range(s.nlater):
        if s.mark[i] < cutoff:
            s.mark[i] = cutoff
    # Every class's horizon is at or above the cutoff: a chain's instances that start
    # before it are invisible, so a head moves on to the first that does not (events
    # arrive out of start order: one may be further back), or goes.
    for i in range(s.nheads):
        p = s.heads[i]
        if p == NULL or (<NativePMB>p).start >= cutoff:
            continue
        while p != NULL and (<NativePMB>p).start < cutoff:
            p = <PyObject *>(<NativePMB>p).prev
            if <object>p is None:
                p = NULL
        if p != NULL:
            Py_INCREF(<object>p)
        Py_XDECREF(s.heads[i])
        s.heads[i] = p
    return 0


cdef int remove_bit(SrcSummary s, Py_ssize_t bitno) except -1:
    # A node's bit leaves every row; rows left empty go.
    cdef Py_ssize_t i = 0
    s.starts.clear_bit(bitno)
    while i < len(s.s_cls):
        if (<Bits>s.starts.r[i].b).n == 0:
            s.drop_start(i)
        else:
            i += 1
    return s.keep_if(bitno)


# ------------------------------------------------------------------ extension


cdef int pick(
    SrcSummary s, Py_ssize_t bq, Py_ssize_t k, double e_end, const QuerySet *m, WindowMasks wins, Builder raw,
    SummaryScratch x
) except -1:
    # The summary's entries from PMB position k that an instance ending at ``e_end``
    # extends (queries in m, within their window), as latest-first groups in ``raw``:
    # only bucket ``bq`` (the instance's class's; 0: none) and bucket 0 are read.
    cdef double lo = e_end - wins.most, full = wins.least, t
    cdef Py_ssize_t b, i, got = 0
    cdef const Ent *e
    cdef Bits wm
    cdef int side
    if s.mark[k - 1] > lo:
        lo = s.mark[k - 1]
    for side in range(2):
        b = bq if side else 0  # bucket 0 (positions of several classes), then the class's
        if b >= s.nbo or (side and bq == 0):
            continue
        for i in range(s.boff[b], s.boff[b + 1]):
            e = &s.ent[i]
            if e.k != k or e.t < lo or not qset_has(m, e.q):
                continue
            t = e.t
            if e_end - t > full:
                wm = window_mask(wins, e_end - t)
                if not words_has(wm.w, wm.n, e.q):
                    continue
            if got == 0:
                _pick_room(x, s.nent)
            x.picked[got] = e[0]
            got += 1
    return _group_picked(x, got, raw)


cdef int _group_picked(SummaryScratch x, Py_ssize_t got, Builder b) except -1:
    # picked[:got], sorted latest first, as groups of ``b``: one per distinct start.
    cdef Py_ssize_t a = 0, z
    cdef Ent *p = x.picked
    _sort_picked(p, got)
    builder_reset(b)
    b.reserve(got)
    while a < got:
        z = a
        while z < got and p[z].t == p[a].t:
            b.ids[z] = p[z].q
            z += 1
        builder_close(b, p[a].t, z)
        b.reserve(0)
        a = z
    return 0


cdef int _later_first(const void *a, const void *b) noexcept nogil:
    cdef const Ent *x = <const Ent *>a
    cdef const Ent *y = <const Ent *>b
    if x.t != y.t:
        return -1 if x.t > y.t else 1
    return (x.q > y.q) - (x.q < y.q)


cdef void _sort_picked(Ent *x, Py_ssize_t n) noexcept:
    # Latest first, then by query; a few entries as a rule (insertion sort).
    cdef Py_ssize_t i, j
    cdef Ent v
    if n > 32:
        qsort(x, n, sizeof(Ent), _later_first)
        return
    for i in range(1, n):
        v = x[i]
        j = i - 1
        while j >= 0 and _later_first(&x[j], &v) > 0:
            x[j + 1] = x[j]
            j -= 1
        x[j + 1] = v


# ------------------------------------------------------------------ merging


cdef int join(SrcSummary s, Py_ssize_t nf, SummaryScratch x) except -1:
    # Merge the fresh entries (x.fresh[:nf]) into the summary's, each query keeping its
    # latest start per position. Entries below their position's mark are invisible to
    # every reader; they go when the entries have grown by a quarter since the last time
    # (a pass that tests each entry), else the old entries are copied in runs.
    cdef Py_ssize_t i = 0, j, w = 0, n = s.nent, cap, r, b, nb
    cdef Ent *old = s.ent
    cdef Ent *out
    cdef Ent *fresh
    cdef uint64_t a = 0, z
    cdef bint sift = n + nf > s.sifted + s.sifted // 4 + 16
    if nf == 0:
        return 0  # all below the cutoff (the mark hides what it dropped)
    _sort_fresh(x, nf)
    fresh = x.fresh
    if n + nf > x.spare_cap:
        x.spare_cap = 2 * (n + nf) + 16
        x.spare = <Ent *>grow(x.spare, x.spare_cap * sizeof(Ent))
    out = x.spare
    nb = fresh[nf - 1].b + 1
    if not sift:
        if nb > s.nbo:
            s._bucket_room(nb)
        _added_room(x, s.nbo + 1)
    for j in range(nf):
        z = ent_key(&fresh[j])
        if sift:
            # The old entries before fresh entry j, the invisible ones left out.
            while i < n:
                a = ent_key(&old[i])
                if a >= z:
                    break
                out[w] = old[i]
                w += ent_live(s, &old[i])
                i += 1
        else:
            r = i
            while r < n:
                a = ent_key(&old[r])
                if a >= z:
                    break
                r += 1
            memcpy(out + w, old + i, (r - i) * sizeof(Ent))
            w += r - i
            i = r
        out[w] = fresh[j]
        if i < n and a == z:
            # The same query and position: the latest start (the old one is visible
            # when later than a fresh one, which is at or above the mark).
            if old[i].t > out[w].t:
                out[w].t = old[i].t
            i += 1
        elif not sift:
            x.added[fresh[j].b] += 1
        w += 1
    if sift:
        while i < n:
            out[w] = old[i]
            w += ent_live(s, &old[i])
            i += 1
    else:
        memcpy(out + w, old + i, (n - i) * sizeof(Ent))
        w += n - i
    # The merged entries become the summary's; its old buffer is the next spare.
    cap = s.cap
    s.ent, s.cap, s.nent = x.spare, x.spare_cap, w
    x.spare, x.spare_cap = old, cap
    if sift:
        s.sifted = w
        return s.index()
    # Each bucket's start moves by the entries added to the buckets before it.
    r = 0
    for b in range(s.nbo + 1):
        s.boff[b] += <uint32_t>r
        r += x.added[b]
        x.added[b] = 0
    return 0


cdef int _sort_fresh(SummaryScratch x, Py_ssize_t n) except -1:
    # fresh[:n] by key: counted into buckets (their order in ``fresh`` is as good as
    # random), then each bucket's few entries by insertion.
    cdef Py_ssize_t i, j, b, nb = 0, cap
    cdef Ent v
    cdef uint64_t kv
    cdef Ent *f = x.fresh
    cdef Ent *tmp
    if n > 12:
        for i in range(n):
            if f[i].b >= nb:
                nb = f[i].b + 1
        _added_room(x, nb + 1)
        for i in range(n):
            x.added[f[i].b + 1] += 1
        for b in range(nb):
            x.added[b + 1] += x.added[b]
        if n > x.sorted_cap:
            x.sorted_cap = x.fresh_cap
            x.sorted = <Ent *>grow(x.sorted, x.sorted_cap * sizeof(Ent))
        for i in range(n):
            b = f[i].b
            x.sorted[x.added[b]] = f[i]
            x.added[b] += 1
        memset(x.added, 0, (nb + 1) * sizeof(uint32_t))
        # The sorted copy becomes ``fresh``, and ``fresh`` the next copy's buffer.
        tmp, cap = x.fresh, x.fresh_cap
        x.fresh, x.fresh_cap = x.sorted, x.sorted_cap
        x.sorted, x.sorted_cap = tmp, cap
        f = x.fresh
    for i in range(1, n):
        v = f[i]
        kv = ent_key(&v)
        j = i - 1
        while j >= 0 and ent_key(&f[j]) > kv:
            f[j + 1] = f[j]
            j -= 1
        f[j + 1] = v
    return 0
