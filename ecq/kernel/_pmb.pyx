# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Partial matching blocks of the compiled kernel (``ecq.structures.pmb`` is the pure form).

A PMB group's queries are kept as their numbers, ascending (``Groups``), not as a
bitset as wide as every registered query: at thousands of queries a group holds a few
of them, and a bitset per group was most of an instance's memory and of the insert
phase's allocations. To Python code a ``Groups`` is the list of ``(start, int)`` tuples
it stands for, and a ``NativePMB`` reads as an ``ecq.structures.pmb.PMB`` (``init``, ``entries``
and its methods)."""

cimport cython
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from libc.stdint cimport int32_t, uint32_t, uint64_t
from libc.string cimport memcpy, memset

from ecq.kernel._bitset cimport (
    Bits,
    QuerySet,
    and_ids,
    bits_from_int,
    bits_to_int,
    grow,
    ids_to_int,
    qset_has,
    words_has,
)

from ecq.structures.pmb import PMB as _PMB

__all__ = ["Groups", "NativePMB"]


@cython.freelist(1024)
cdef class Groups:
    """Latest-first disjoint ``(start, bits)`` groups (a PMB entry, an extension's
    result) with each group's queries as their numbers, ascending. Immutable; to
    Python the list of ``(start, int)`` tuples it stands for (iteration, ``len``,
    indexing, ``==``)."""

    def __dealloc__(self):
        PyMem_Free(self.block)

    def __len__(self):
        return self.n

    cdef object bits_of(self, Py_ssize_t i):
        return ids_to_int(self.ids + self.off[i], self.off[i + 1] - self.off[i])

    def __getitem__(self, Py_ssize_t i):
        if i < 0:
            i += self.n
        if i < 0 or i >= self.n:
            raise IndexError("group index out of range")
        return (self.t[i], self.bits_of(i))

    def __iter__(self):
        cdef Py_ssize_t i
        for i in range(self.n):
            yield (self.t[i], self.bits_of(i))

    def __eq__(self, other):
        if isinstance(other, (Groups, list)):
            return list(self) == list(other)
        return NotImplemented

    def __ne__(self, other):
        if isinstance(other, (Groups, list)):
            return list(self) != list(other)
        return NotImplemented

    __hash__ = None

    def __repr__(self):
        return f"Groups({list(self)!r})"


cdef class Builder:
    """Scratch space where Groups are put together, reused from call to call (one
    per kernel: see GroupScratch)."""

    def __cinit__(self):
        self.cap_g = 16
        self.cap_i = 1024
        self.t = <double *>PyMem_Malloc(self.cap_g * sizeof(double))
        self.off = <Py_ssize_t *>PyMem_Malloc((self.cap_g + 1) * sizeof(Py_ssize_t))
        self.ids = <uint32_t *>PyMem_Malloc(self.cap_i * sizeof(uint32_t))
        if self.t == NULL or self.off == NULL or self.ids == NULL:
            raise MemoryError()
        self.n = 0
        self.off[0] = 0

    def __dealloc__(self):
        PyMem_Free(self.t)
        PyMem_Free(self.off)
        PyMem_Free(self.ids)

    cdef int reserve(self, Py_ssize_t more_ids) except -1:
        # Room for one more group and ``more_ids`` more ids.
        cdef Py_ssize_t cap
        if self.n + 1 >= self.cap_g:
            cap = self.cap_g * 2
            self.t = <double *>grow(self.t, cap * sizeof(double))
            self.off = <Py_ssize_t *>grow(self.off, (cap + 1) * sizeof(Py_ssize_t))
            self.cap_g = cap
        if self.off[self.n] + more_ids > self.cap_i:
            cap = self.cap_i * 2
            while cap < self.off[self.n] + more_ids:
                cap *= 2
            self.ids = <uint32_t *>grow(self.ids, cap * sizeof(uint32_t))
            self.cap_i = cap
        return 0

    cdef Groups finish(self):
        # The groups put together, as new Groups (never changed after: a native PMB
        # keeps its position-1 block's address).
        cdef Groups g
        cdef Py_ssize_t n = self.n, m = self.off[n]
        cdef size_t size = n * sizeof(double) + (n + 1) * sizeof(Py_ssize_t) + m * sizeof(uint32_t)
        g = Groups.__new__(Groups)
        g.block = PyMem_Malloc(size if size else 1)
        if g.block == NULL:
            raise MemoryError()
        g.cap = size
        g.n = n
        g.t = <double *>g.block
        g.off = <Py_ssize_t *>(g.t + n)
        g.ids = <uint32_t *>(g.off + n + 1)
        memcpy(g.t, self.t, n * sizeof(double))
        memcpy(g.off, self.off, (n + 1) * sizeof(Py_ssize_t))
        memcpy(g.ids, self.ids, m * sizeof(uint32_t))
        return g


cdef class GroupScratch:
    """One kernel's working memory for groups (two kernels never share one: engines
    in one process, or in threads, do not see each other's scratch)."""

    def __cinit__(self):
        self.raw = Builder()
        self.made = Builder()

    def __dealloc__(self):
        PyMem_Free(self.order)
        PyMem_Free(self.claimed)


cdef int add_ids_in(
    const uint32_t *ids, Py_ssize_t count, const uint64_t *d, Py_ssize_t nd, Bits wm, const QuerySet *also, Builder b,
    double t
) except -1:
    # The queries among ``ids`` that are in the set ``d`` (and in ``wm`` and ``also``,
    # each when not None / NULL) become a group of ``b`` starting at ``t`` (none when
    # empty).
    cdef Py_ssize_t j, w = builder_used(b)
    cdef uint32_t k
    b.reserve(count)
    for j in range(count):
        k = ids[j]
        if (
            words_has(d, nd, k)
            and (wm is None or words_has(wm.w, wm.n, k))
            and (also == NULL or qset_has(also, k))
        ):
            b.ids[w] = k
            w += 1
    if w > builder_used(b):
        builder_close(b, t, w)
    return 0


cdef Groups groups_of_list(list groups, GroupScratch s):
    # Groups from a list of (start, int) groups (what Python code hands over).
    cdef Builder made = s.made
    cdef Bits bits
    builder_reset(made)
    for t, b in groups:
        bits = bits_from_int(b)
        made.reserve(bits.n * 64)
        builder_close(made, t, builder_used(made) + and_ids(bits.w, bits.n, bits.w, bits.n, NULL, 0, made.ids + builder_used(made)))
    return made.finish()


cdef Groups resolve(Builder raw, GroupScratch s):
    # ecq.structures.pmb.resolve_latest: each query at its latest start, one group per distinct
    # start, latest first (a stable sort, then one pass with the queries claimed so far).
    cdef Py_ssize_t n = raw.n, i, j, top = 0, cur, need
    cdef Builder made = s.made
    if n == 1:
        return raw.finish()
    if n > s.order_cap:
        s.order = <Py_ssize_t *>grow(s.order, 2 * n * sizeof(Py_ssize_t))
        s.order_cap = 2 * n
    cdef Py_ssize_t *order = s.order
    for i in range(n):
        cur = i
        j = i - 1
        while j >= 0 and raw.t[order[j]] < raw.t[cur]:
            order[j + 1] = order[j]
            j -= 1
        order[j + 1] = cur
        if raw.off[i + 1] > raw.off[i] and raw.ids[raw.off[i + 1] - 1] >= top:
            top = raw.ids[raw.off[i + 1] - 1] + 1
    need = (top >> 6) + 1
    if need > s.claimed_n:
        s.claimed = <uint64_t *>grow(s.claimed, need * sizeof(uint64_t))
        memset(s.claimed + s.claimed_n, 0, (need - s.claimed_n) * sizeof(uint64_t))
        s.claimed_n = need
    builder_reset(made)
    try:
        for i in range(n):
            _claim_group(made, raw, order[i], s.claimed)
    finally:
        # Back to all zero: only words of these queries were set.
        for i in range(raw.off[n]):
            s.claimed[raw.ids[i] >> 6] = 0
    return made.finish()


cdef int _claim_group(Builder made, Builder src, Py_ssize_t a, uint64_t *claimed) except -1:
    # Group ``a`` of ``src`` without the queries already ``claimed`` goes to ``made``
    # (joined to the group before when it starts at the same time); its queries are
    # claimed. Branch-free: whether a query is claimed already is as good as random.
    cdef double t = src.t[a]
    cdef const uint32_t *ids = src.ids
    cdef Py_ssize_t lo = src.off[a], hi = src.off[a + 1], j, w
    cdef uint32_t q
    cdef uint64_t free
    made.reserve(hi - lo)
    w = builder_used(made)
    for j in range(lo, hi):
        q = ids[j]
        free = ((claimed[q >> 6] >> (q & 63)) & 1) ^ 1
        claimed[q >> 6] |= free << (q & 63)
        made.ids[w] = q
        w += free
    if w == builder_used(made):
        return 0
    if made.n and made.t[made.n - 1] == t:
        # Same start as the group before: one group, its ids kept ascending.
        made.off[made.n] = w
        _sort_ids(made.ids + made.off[made.n - 1], w - made.off[made.n - 1])
    else:
        builder_close(made, t, w)
    return 0


cdef void _sort_ids(uint32_t *ids, Py_ssize_t n) noexcept:
    cdef Py_ssize_t i, j
    cdef uint32_t x
    for i in range(1, n):
        x = ids[i]
        j = i - 1
        while j >= 0 and ids[j] > x:
            ids[j + 1] = ids[j]
            j -= 1
        ids[j + 1] = x


cdef object keep_of(Groups g, Bits more, GroupScratch s):
    # [(t, bits & more) for t, bits in g if bits & more], as Groups (g itself when every
    # query of it goes on), or None.
    cdef Py_ssize_t i, j, total = g.off[g.n]
    cdef Builder made = s.made
    for j in range(total):
        if not words_has(more.w, more.n, g.ids[j]):
            break
    else:
        return g
    builder_reset(made)
    for i in range(g.n):
        add_ids_in(g.ids + g.off[i], g.off[i + 1] - g.off[i], more.w, more.n, None, NULL, made, g.t[i])
    return made.finish() if made.n else None


@cython.freelist(1024)
cdef class NativePMB:
    """The PMB (``ecq.structures.pmb.PMB``) of an instance the compiled insert phase stores:
    ``init`` and the kept groups, position 1's (every sequence of three or more steps
    has one) in a field of its own, so the assembly reaches them without a dict, and no
    dict is made per instance. ``entries`` is the dict ``PMB`` has; the methods are
    ``PMB``'s, run on that.

    It also holds what the assembly reads of its instance, in C: walking a source's
    chain of a class goes from PMB to PMB (``prev``: the previous instance of the
    class at the source with summary entries), without touching the events and their
    start, end, moment and probability objects (cold: a few cache misses per
    candidate) until one is bound. ``event`` is None once the instance is dropped."""

    @property
    def init(self):
        return bits_to_int(self.init_bits)

    @property
    def entries(self):
        if self.g1 is None and self.rest is None:
            return None
        out = {} if self.g1 is None else {1: self.g1}
        if self.rest is not None:
            out.update(self.rest)
        return out

    cdef object groups_at(self, Py_ssize_t k):
        if k == 1:
            return self.g1
        return self.rest.get(k) if self.rest is not None else None

    def _plain(self):
        return _PMB(self.init, self.entries)

    def size(self):
        return self._plain().size()

    def latest(self, position, bit, start):
        return self._plain().latest(position, bit, start)

    def extends(self, position, bit, bound, start):
        return self._plain().extends(position, bit, bound, start)

    def _check(self):
        self._plain()._check()

    def __repr__(self):
        return f"NativePMB(init={self.init!r}, entries={self.entries!r})"
