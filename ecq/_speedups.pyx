# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The compiled part of the shared engine at level "summary" (optional; ecq.accel).

Each public function is the twin of a Python one: ``run_events`` of
``OpClock.process``, ``test_plain``/``insert_plain`` of the plain-sequence part of
``Network.process``, ``extend_summary``/``summarise`` of ``Network._extend_summary``/
``_summarise``, ``assemble_seq`` of ``ecq.assembly.assemble_seq``. They take the same
arguments and give the same results on the same objects (Python ints as query bitsets,
PMBs, SIQ back chains, matches); only a source's summary is kept natively
(``SrcSummary``, whose ``view()`` is the Python summary). docs/architecture.md says
why each piece is faster: mostly fewer intermediate ints (``_bits.h`` combines digits
in one pass and allocates nothing when the result is zero) and fewer scattered objects.
"""

cimport cython
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.tuple cimport PyTuple_GET_ITEM
from cpython.float cimport PyFloat_AS_DOUBLE
from cpython.ref cimport PyObject, Py_INCREF, Py_XDECREF
from libc.math cimport INFINITY
from libc.stdint cimport int32_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport qsort
from libc.string cimport memcpy, memset
from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc

cdef extern from "Python.h":
    ctypedef unsigned int digit
    int PyLong_SHIFT
    Py_ssize_t _refcnt "Py_REFCNT" (PyObject *o)

cdef extern from "_bits.h":
    ctypedef struct scemon_buf:
        digit *d
        Py_ssize_t n
        Py_ssize_t cap
    Py_ssize_t bits_ndigits(object o)
    digit *bits_digits(object o)
    Py_ssize_t slot_offset(object cls, const char *name) except -1
    PyObject *slot_get(object o, Py_ssize_t off) except NULL
    int slot_set(object o, Py_ssize_t off, object v) except -1
    void prefetch_lines(const void *p, int lines)
    int bits_test(object a, Py_ssize_t k) except -1
    int buf_or_and(scemon_buf *b, object a, object c) except -1
    Py_ssize_t buf_next_bit(const scemon_buf *b, Py_ssize_t start)
    void buf_free(scemon_buf *b)
    int bits_is_zero(object a)
    int buf_set(scemon_buf *b, Py_ssize_t k) except -1
    Py_ssize_t digits_and_ids(const digit *r, const digit *m, const digit *w, Py_ssize_t n, uint32_t *out)
    object bits_from_ids(const uint32_t *ids, Py_ssize_t n)

from ecq.assembly import by_recency as _by_recency
from ecq.event import Event as _Event
from ecq.pmb import PMB as _PMB

# Slot offsets of Event and PMB (see slot_get in _bits.h).
cdef Py_ssize_t E_SRC = slot_offset(_Event, b"src")
cdef Py_ssize_t E_TYPE = slot_offset(_Event, b"type")
cdef Py_ssize_t E_START = slot_offset(_Event, b"start")
cdef Py_ssize_t E_END = slot_offset(_Event, b"end")
cdef Py_ssize_t E_PROB = slot_offset(_Event, b"prob")
cdef Py_ssize_t E_ARRIVAL = slot_offset(_Event, b"arrival")
cdef Py_ssize_t E_MOMENT = slot_offset(_Event, b"moment")
cdef Py_ssize_t E_PREV = slot_offset(_Event, b"_prev")
cdef Py_ssize_t E_ATTRS = slot_offset(_Event, b"attrs")
cdef Py_ssize_t E_ID = slot_offset(_Event, b"id")
cdef Py_ssize_t E_PARTS = slot_offset(_Event, b"parts")
cdef Py_ssize_t E_FLAT = slot_offset(_Event, b"flat")
cdef Py_ssize_t E_PRIMS = slot_offset(_Event, b"prims")
cdef Py_ssize_t E_PMB = slot_offset(_Event, b"_pmb")
cdef Py_ssize_t P_INIT = slot_offset(_PMB, b"init")
cdef Py_ssize_t P_ENTRIES = slot_offset(_PMB, b"entries")


cdef inline object _get(object o, Py_ssize_t off):
    return <object>slot_get(o, off)


cdef inline double _getf(object o, Py_ssize_t off) except? -1.0:
    return <double><object>slot_get(o, off)

__all__ = [
    "Groups",
    "NativePMB",
    "match_dict",
    "event_from_dict",
    "clean_siq",
    "extend_summary",
    "summarise",
    "assemble_seq",
    "test_plain",
    "insert_plain",
    "run_events",
]


cdef inline double _t(object group):
    return PyFloat_AS_DOUBLE(<object>PyTuple_GET_ITEM(group, 0))


cdef inline object _bits(object group):
    return <object>PyTuple_GET_ITEM(group, 1)


cdef object _window_mask(list wins, list wcum, double span):
    # bisect_left(wins, span), then the nodes whose window is at least wins[j].
    cdef Py_ssize_t lo = 0, hi = PyList_GET_SIZE(wins), mid
    while lo < hi:
        mid = (lo + hi) >> 1
        if PyFloat_AS_DOUBLE(<object>PyList_GET_ITEM(wins, mid)) < span:
            lo = mid + 1
        else:
            hi = mid
    if lo < PyList_GET_SIZE(wcum):
        return <object>PyList_GET_ITEM(wcum, lo)
    return 0


# ------------------------------------------------------------ sparse groups


cdef bint _find_in(void *block, Py_ssize_t n, Py_ssize_t bitno, double *start) noexcept:
    # Groups.find on a Groups block of n groups (t[n], then off[n + 1], then ids).
    cdef const double *t = <const double *>block
    cdef const Py_ssize_t *off = <const Py_ssize_t *>(t + n)
    cdef const uint32_t *ids = <const uint32_t *>(off + n + 1)
    cdef Py_ssize_t i, lo, hi, mid
    cdef uint32_t b = <uint32_t>bitno
    for i in range(n):
        lo = off[i]
        hi = off[i + 1]
        if hi == lo or ids[lo] > b or ids[hi - 1] < b:
            continue
        while lo < hi:
            mid = (lo + hi) >> 1
            if ids[mid] < b:
                lo = mid + 1
            else:
                hi = mid
        if ids[lo] == b:
            if start != NULL:
                start[0] = t[i]
            return True
    return False


@cython.freelist(1024)
cdef class Groups:
    """Latest-first disjoint ``(start, bits)`` groups (a PMB entry, an extension's
    result) with each group's queries as their numbers, ascending, instead of an int.
    At thousands of queries a group holds a few of them: an int of the width of every
    registered query was most of an instance's memory, and allocating and freeing those
    ints most of the insert phase. To Python it is the list of ``(start, int)`` tuples
    it stands for (iteration, ``len``, indexing, ``==``), so the pure-Python readers of
    PMBs and the tests see the same entries either way. Immutable."""

    cdef Py_ssize_t n
    cdef double *t
    cdef Py_ssize_t *off  # group i holds ids[off[i]:off[i + 1]]
    cdef uint32_t *ids
    cdef void *block
    cdef size_t cap  # bytes of block

    def __dealloc__(self):
        PyMem_Free(self.block)

    def __len__(self):
        return self.n

    cdef object bits_of(self, Py_ssize_t i):
        return bits_from_ids(self.ids + self.off[i], self.off[i + 1] - self.off[i])

    cdef bint find(self, Py_ssize_t bitno, double *start) noexcept:
        # Whether a group holds query ``bitno``; its start goes to ``start``.
        return _find_in(self.block, self.n, bitno, start)

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


cdef class _Builder:
    """Scratch space where Groups are put together, reused from call to call."""

    cdef double *t
    cdef Py_ssize_t *off
    cdef uint32_t *ids
    cdef Py_ssize_t n, cap_g, cap_i

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

    cdef inline void reset(self) noexcept:
        self.n = 0
        self.off[0] = 0

    cdef inline Py_ssize_t used(self) noexcept:
        return self.off[self.n]

    cdef int reserve(self, Py_ssize_t more_ids) except -1:
        # Room for one more group and ``more_ids`` more ids.
        cdef Py_ssize_t cap
        if self.n + 1 >= self.cap_g:
            cap = self.cap_g * 2
            self.t = <double *>_grow(self.t, cap * sizeof(double))
            self.off = <Py_ssize_t *>_grow(self.off, (cap + 1) * sizeof(Py_ssize_t))
            self.cap_g = cap
        if self.off[self.n] + more_ids > self.cap_i:
            cap = self.cap_i * 2
            while cap < self.off[self.n] + more_ids:
                cap *= 2
            self.ids = <uint32_t *>_grow(self.ids, cap * sizeof(uint32_t))
            self.cap_i = cap
        return 0

    cdef inline void close(self, double t, Py_ssize_t end) noexcept:
        # The ids written from off[n] to ``end`` become group n, starting at ``t``.
        self.t[self.n] = t
        self.n += 1
        self.off[self.n] = end

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


cdef void *_grow(void *p, size_t size) except NULL:
    cdef void *q = PyMem_Realloc(p, size)
    if q == NULL:
        raise MemoryError()
    return q


cdef _Builder _raw = _Builder()
cdef _Builder _made = _Builder()


@cython.freelist(1024)
cdef class NativePMB:
    """The PMB (``ecq.pmb.PMB``) of an instance the compiled insert phase stores:
    ``init`` and the kept groups, position 1's (every sequence of three or more steps
    has one) in a field of its own, so the assembly reaches them without a dict, and no
    dict is made per instance. ``entries`` is the dict ``PMB`` has; the methods are
    ``PMB``'s, run on that."""

    cdef readonly object init
    cdef Groups g1  # at position 1, or None
    cdef dict rest  # {position: Groups} for the other positions, or None
    # The instance (None once dropped) and what the assembly reads of it, in C: walking
    # a source's chain of a class goes from PMB to PMB (``prev``: the previous instance
    # of the class at the source with summary entries), without touching the events
    # and their start, end, moment and probability objects (cold: a few cache misses
    # per candidate) until one is bound.
    cdef object event
    cdef NativePMB prev
    cdef double start, end, prob
    cdef long long moment
    # g1's block and its number of groups and bytes (the assembly reads the block
    # without going through the Groups object: one cold line less per candidate).
    cdef void *g1block
    cdef int32_t g1n, g1bytes

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


# ------------------------------------------------------------ native summaries


cdef struct _Row:
    double t  # the latest start
    PyObject *b  # the query set: an owned reference to a non-negative int
    Py_ssize_t tag  # the class id of a first-position row (_class_id)


cdef class _Rows:
    """Rows of (start, query set) stored contiguously: a source's summary is read on
    every event of the source, and as separate Python objects (tuple, float, int) each
    group cost a cache miss or three. A row's set is an int held by reference: an
    unfiltered instance's initial entries are one int per class (_Ecq.init), so rows
    built from them share it (one copy per class, warm, instead of a cold row per
    source as wide as every registered query); a row that gets other queries gets its
    own int."""

    cdef _Row *r
    cdef Py_ssize_t n, cap

    def __dealloc__(self):
        cdef Py_ssize_t i
        for i in range(self.n):
            Py_XDECREF(self.r[i].b)
        PyMem_Free(self.r)

    cdef int _reserve(self, Py_ssize_t rows) except -1:
        cdef Py_ssize_t cap = self.cap
        if rows <= cap:
            return 0
        cap = cap * 2 if cap else 4
        while cap < rows:
            cap *= 2
        self.r = <_Row *>_grow(self.r, cap * sizeof(_Row))
        self.cap = cap
        return 0

    cdef inline const digit *row(self, Py_ssize_t i) noexcept:
        return bits_digits(<object>self.r[i].b)

    cdef inline Py_ssize_t width(self, Py_ssize_t i) noexcept:
        return bits_ndigits(<object>self.r[i].b)

    cdef int _put(self, Py_ssize_t i, object bits) except -1:
        Py_INCREF(bits)
        Py_XDECREF(self.r[i].b)
        self.r[i].b = <PyObject *>bits
        return 0

    cdef int append(self, double t, object bits, Py_ssize_t tag) except -1:
        self._reserve(self.n + 1)
        self.r[self.n].t = t
        self.r[self.n].b = NULL
        self._put(self.n, bits)
        self.r[self.n].tag = tag
        self.n += 1
        return 0

    cdef void delete(self, Py_ssize_t i) noexcept:
        cdef Py_ssize_t j
        Py_XDECREF(self.r[i].b)
        for j in range(i, self.n - 1):
            self.r[j] = self.r[j + 1]
        self.n -= 1

    cdef int or_row(self, Py_ssize_t i, object bits) except -1:
        old = <object>self.r[i].b
        if old is bits:
            return 0  # the class's shared initial entries again: nothing new
        new = old | bits
        # Equal to what came (it held no more): keep that one, likely the shared int.
        self._put(i, bits if new == bits else new)
        return 0

    cdef object bits_of(self, Py_ssize_t i):
        return <object>self.r[i].b

    cdef bint zero(self, Py_ssize_t i):
        return bits_is_zero(<object>self.r[i].b)

    cdef int add_ids(self, Py_ssize_t i, object m, object wm, _Builder b, double t) except -1:
        # The queries of row & m (& wm) become a group of ``b`` starting at ``t`` (none
        # when empty).
        cdef Py_ssize_t n = self.width(i), count
        if bits_ndigits(m) < n:
            n = bits_ndigits(m)
        if wm is not None and bits_ndigits(wm) < n:
            n = bits_ndigits(wm)
        b.reserve(n * PyLong_SHIFT)
        count = digits_and_ids(
            self.row(i), bits_digits(m), bits_digits(wm) if wm is not None else NULL, n, b.ids + b.used()
        )
        if count:
            b.close(t, b.used() + count)
        return 0

    cdef int clear_bit(self, Py_ssize_t bitno) except -1:
        cdef Py_ssize_t i
        for i in range(self.n):
            if bits_test(<object>self.r[i].b, bitno):
                self._put(i, (<object>self.r[i].b) & ~((<object>1) << bitno))
        return 0


cdef struct _Ent:
    # One query's entry at one later position of a source's summary: its latest start.
    double t
    uint32_t q  # the query's number
    uint16_t k  # the PMB position it came from (>= 1); extending at k + 1 reads it
    uint16_t b  # its bucket: 1 + the id of the class position k + 1 takes (_bucket)


cdef inline uint64_t _key(const _Ent *x) noexcept nogil:
    # The entries' order: bucket, then position, then query.
    return (<uint64_t>x.b << 48) | (<uint64_t>x.k << 32) | x.q


cdef enum:
    _NO_BUCKET = 0xFFFF  # _Net.btab: not looked up yet; bucket numbers stay below it


cdef class SrcSummary:
    """One source's summary at level "summary", natively: ``starts`` (one dense row per
    class, in the order a dict would keep them: a class's first-position queries are
    many) and the entries of later positions, each query's latest start per position
    (``_Ent``), sorted by the class the query waits for there. An instance of class X
    reads only X's bucket (and bucket 0, positions that take several classes): at
    thousands of queries a source holds a hundred or more later entries, and scanning
    and merging all of them on every instance was most of an instance's time. The
    content is the pure-Python ``(starts, later)`` tuple's (:meth:`view` gives that
    tuple; the tests compare it): ``mark`` keeps, per position, the cutoff below which
    the Python code has dropped a position's groups (at merges and pruning), and
    entries below it count as gone until a pass over the entries removes them."""

    cdef list s_cls
    cdef _Rows starts
    cdef _Ent *ent  # sorted by bucket, position, query (_key)
    cdef Py_ssize_t nent, cap
    cdef uint32_t *boff  # bucket b: ent[boff[b]:boff[b + 1]] for b < nbo (none above)
    cdef Py_ssize_t nbo, cap_bo
    cdef double *mark  # per position k >= 1: mark[k - 1]
    cdef Py_ssize_t nlater  # positions the Python list ``later`` has
    cdef Py_ssize_t sifted  # entries after the last pass that dropped invisible ones
    # Per class id: the PMB of the source's latest instance of the class that was
    # summarised (owned references, or NULL), the head of its chain (NativePMB.prev) for
    # assembling matches without a lookup in the SIQ's per-source index. Instances
    # stored without summary entries are left out: no plain sequence can use them.
    cdef PyObject **heads
    cdef Py_ssize_t nheads

    def __cinit__(self):
        self.s_cls = []
        self.starts = _Rows()

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
            self.heads = <PyObject **>_grow(self.heads, want * sizeof(PyObject *))
            for i in range(self.nheads, want):
                self.heads[i] = NULL
            self.nheads = want
        if self.heads[cid] != NULL:
            pmb.prev = <NativePMB>self.heads[cid]
        Py_INCREF(pmb)
        Py_XDECREF(self.heads[cid])
        self.heads[cid] = <PyObject *>pmb
        return 0

    cdef inline PyObject *head(self, Py_ssize_t cid) noexcept:
        return self.heads[cid] if cid < self.nheads else NULL

    cdef inline bint live(self, const _Ent *x) noexcept:
        return x.t >= self.mark[x.k - 1]

    cdef int widen(self, Py_ssize_t k) except -1:
        # Positions up to k (the Python list ``later`` grows to k lists).
        cdef Py_ssize_t i
        if k > self.nlater:
            self.mark = <double *>_grow(self.mark, k * sizeof(double))
            for i in range(self.nlater, k):
                self.mark[i] = -INFINITY
            self.nlater = k
        return 0

    cdef int boff_room(self, Py_ssize_t nb) except -1:
        # Room in boff for buckets up to nb - 1 (nb + 1 offsets).
        if nb + 1 > self.cap_bo:
            self.cap_bo = nb + 1 + 8
            self.boff = <uint32_t *>_grow(self.boff, self.cap_bo * sizeof(uint32_t))
        return 0

    cdef int index(self) except -1:
        # boff from the sorted entries: counts per bucket, then their running sums (no
        # branch on the data).
        cdef Py_ssize_t nb = self.ent[self.nent - 1].b + 1 if self.nent else 0, b, i
        cdef uint32_t run = 0, c
        self.boff_room(nb)
        memset(self.boff, 0, (nb + 1) * sizeof(uint32_t))
        for i in range(self.nent):
            self.boff[self.ent[i].b] += 1
        for b in range(nb + 1):
            c = self.boff[b]
            self.boff[b] = run
            run += c
        self.nbo = nb
        return 0

    cdef int bucket_room(self, Py_ssize_t nb) except -1:
        # Buckets up to nb - 1 indexed (the new ones empty, at the end).
        cdef Py_ssize_t b
        self.boff_room(nb)
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
            if self.live(&self.ent[i]) and <Py_ssize_t>self.ent[i].q != without:
                self.ent[w] = self.ent[i]
                w += 1
        self.nent = w
        self.sifted = w
        return self.index()

    cdef object groups_of(self, Py_ssize_t k):
        # Position k's live entries as the Python code's latest-first groups.
        cdef Py_ssize_t i, m = 0
        cdef _Ent *x
        cdef _Builder made = _made
        _pick_room(self.nent)
        for i in range(self.nent):
            x = &self.ent[i]
            if x.k == k and self.live(x):
                _picked[m] = x[0]
                m += 1
        _group_picked(m, made)
        return [(made.t[i], bits_from_ids(made.ids + made.off[i], made.off[i + 1] - made.off[i])) for i in range(made.n)]

    def view(self):
        """The pure-Python form: ``({cls: (start, bits)}, [[(start, bits), ...], ...])``."""
        starts = {cls: (self.starts.r[i].t, self.starts.bits_of(i)) for i, cls in enumerate(self.s_cls)}
        return starts, [self.groups_of(k) for k in range(1, self.nlater + 1)]

    def empty(self):
        cdef Py_ssize_t i
        for i in range(self.nent):
            if self.live(&self.ent[i]):
                return False
        return not self.s_cls

    cdef int drop_start(self, Py_ssize_t i) except -1:
        # A class's first-position row goes, and its name with it.
        del self.s_cls[i]
        self.starts.delete(i)
        return 0

    def prune(self, double cutoff):
        """``Network.prune_summary`` for this source."""
        cdef Py_ssize_t i = 0
        while i < len(self.s_cls):
            if self.starts.r[i].t < cutoff:
                self.drop_start(i)
            else:
                i += 1
        # The later entries below the cutoff become invisible; they go at the source's
        # next merge that sifts (_join), or with the summary when nothing is left.
        for i in range(self.nlater):
            if self.mark[i] < cutoff:
                self.mark[i] = cutoff
        # Every class's horizon is at or above the cutoff: a chain's instances that
        # start before it are invisible, so a head moves on to the first that does not
        # (events arrive out of start order: one may be further back), or goes.
        cdef PyObject *p
        for i in range(self.nheads):
            p = self.heads[i]
            if p == NULL or (<NativePMB>p).start >= cutoff:
                continue
            while p != NULL and (<NativePMB>p).start < cutoff:
                p = <PyObject *>(<NativePMB>p).prev
                if <object>p is None:
                    p = NULL
            if p != NULL:
                Py_INCREF(<object>p)
            Py_XDECREF(self.heads[i])
            self.heads[i] = p

    def remove_bit(self, Py_ssize_t bitno):
        """A node's bit leaves every row; rows left empty go."""
        cdef Py_ssize_t i
        self.starts.clear_bit(bitno)
        i = 0
        while i < len(self.s_cls):
            if self.starts.zero(i):
                self.drop_start(i)
            else:
                i += 1
        self.keep_if(bitno)


# Entries picked from a summary (extension, view), sorted latest first, then by query.
cdef _Ent *_picked = NULL
cdef Py_ssize_t _picked_cap = 0


cdef int _pick_room(Py_ssize_t n) except -1:
    global _picked, _picked_cap
    if n > _picked_cap:
        _picked_cap = 2 * n + 16
        _picked = <_Ent *>_grow(_picked, _picked_cap * sizeof(_Ent))
    return 0


cdef int _later_first(const void *a, const void *b) noexcept nogil:
    cdef const _Ent *x = <const _Ent *>a
    cdef const _Ent *y = <const _Ent *>b
    if x.t != y.t:
        return -1 if x.t > y.t else 1
    return (x.q > y.q) - (x.q < y.q)


cdef void _sort_picked(_Ent *x, Py_ssize_t n) noexcept:
    # Latest first, then by query; a few entries as a rule (insertion sort).
    cdef Py_ssize_t i, j
    cdef _Ent v
    if n > 32:
        qsort(x, n, sizeof(_Ent), _later_first)
        return
    for i in range(1, n):
        v = x[i]
        j = i - 1
        while j >= 0 and _later_first(&x[j], &v) > 0:
            x[j + 1] = x[j]
            j -= 1
        x[j + 1] = v


cdef Groups _groups_of(list groups):
    # Groups from a list of (start, int) groups (the Python insert phase's).
    cdef _Builder made = _made
    cdef Py_ssize_t nd
    made.reset()
    for g in groups:
        bits = _bits(g)
        nd = bits_ndigits(bits)
        made.reserve(nd * PyLong_SHIFT)
        made.close(_t(g), made.used() + digits_and_ids(bits_digits(bits), bits_digits(bits), NULL, nd, made.ids + made.used()))
    return made.finish()


# ------------------------------------------------- constants until queries change


cdef enum:
    _BTAB_KEYS = 8  # positions whose buckets _Net tables (further ones: from the plan)
    _UNSET = -2  # _Net.hcid
    _LONG = -3


cdef class _Net:
    """What the compiled phases read of the network (each attribute of a Python object
    is a dict lookup, and they were a fifth of an event's time) and what they derive
    from the registered queries: made once and kept in ``Network.c_cache``, which is
    emptied whenever a query comes or goes."""

    cdef dict summary, ecqs, by_bit, ecq_plans, class_ids
    cdef list wins, wcum, plans, class_names
    cdef double min_window, max_window
    cdef _Chains chains  # the assembly's probe, moved on to each instance
    cdef _Assembly assembly  # the assembly's state, reused
    cdef list ecq_ids  # _Ecq by class id (None: not made yet)
    # Per PMB position k (btab[k - 1], k <= _BTAB_KEYS): per query number, its summary
    # bucket there (_bucket), or _NO_BUCKET until looked up.
    cdef uint16_t *btab[_BTAB_KEYS]
    cdef Py_ssize_t btab_n[_BTAB_KEYS]
    # Per query number q, made with its plan: hcid[2q], hcid[2q + 1]: the class ids of
    # positions 1 and 0 of a sequence of two or three steps (-1: none, or of several
    # classes), _LONG at 2q for longer ones, _UNSET until the plan is made. What
    # _prefetch_heads reads instead of the plans, which are cold.
    cdef int32_t *hcid
    cdef Py_ssize_t hcid_n

    def __dealloc__(self):
        cdef Py_ssize_t i
        for i in range(_BTAB_KEYS):
            PyMem_Free(self.btab[i])
        PyMem_Free(self.hcid)


cdef _Net _net_of(net):
    cache = net.c_cache
    got = cache.get("net")
    if got is not None:
        return <_Net>got
    cdef _Net n = _Net.__new__(_Net)
    n.summary = net.summary
    n.ecqs = net.ecqs
    n.by_bit = net.by_bit
    n.wins = net._wins
    n.wcum = net._wcum
    n.min_window = net._min_window
    n.max_window = net._max_window
    # Derived from the queries: ECQ constants (with their class-pair sets), node plans
    # by bit.
    n.ecq_plans = {}
    n.plans = []
    # Small numbers for class names (first-position rows carry them), for good.
    n.class_ids = net.c_class_ids
    n.class_names = net.c_class_names
    n.chains = _Chains()
    n.chains.n = n
    n.assembly = _Assembly()
    n.assembly.found = []
    n.assembly.spare = [[] for _ in range(_INLINE_POS + 1)]
    n.ecq_ids = []
    cache["net"] = n
    return n


cdef Py_ssize_t _class_id(_Net n, cls) except -1:
    got = n.class_ids.get(cls)
    if got is None:
        got = len(n.class_names)
        n.class_ids[cls] = got
        n.class_names.append(cls)
    return got


cdef class _Ecq:
    """An ECQ's masks and queue for the compiled phases (see _Net)."""

    cdef object ecq
    cdef dict final, more
    cdef object static  # the filter-free positions' masks, or None
    cdef object init  # static[0] & more[0]: the initial entries of an unfiltered instance
    cdef bint plain  # every use of the class is a plain sequence without filters
    cdef bint general_uses
    cdef dict last
    cdef object queue
    cdef double window, frozen  # its horizon's (ecq.horizon.Horizon)
    cdef _PairTable pairs  # made on first use
    cdef Py_ssize_t cid  # the class's number (_class_id)


cdef _Ecq _ecq_of(ecq):
    cdef _Ecq q = _Ecq.__new__(_Ecq)
    q.ecq = ecq
    if ecq is None:
        return q
    q.final = ecq.seq_final
    q.more = ecq.seq_more
    q.static = ecq.static_pass
    q.init = q.static.get(0, 0) & q.more.get(0, 0) if q.static is not None else 0
    q.plain = q.static is not None and not ecq.general_final and not ecq.disj
    q.general_uses = bool(ecq.general_uses)
    siq = ecq.siq
    q.last = siq.last
    q.queue = siq.queue
    drop = ecq.drop
    q.window = drop.window
    q.frozen = drop.frozen
    return q


cdef _Ecq _ecq_in(_Net n, cls):
    # The ECQ of ``cls`` (its ``ecq`` None when no query uses the class), made once
    # until queries change.
    cdef _Ecq q = n.ecq_plans.get(cls)
    if q is None:
        q = _ecq_of(n.ecqs.get(cls))
        q.cid = _class_id(n, cls)
        n.ecq_plans[cls] = q
    return q


cdef _Ecq _ecq_at(_Net n, Py_ssize_t cid, cls):
    # _ecq_in by class id: a list index.
    cdef list at = n.ecq_ids
    if cid < PyList_GET_SIZE(at):
        got = <object>PyList_GET_ITEM(at, cid)
        if got is not None:
            return <_Ecq>got
    cdef _Ecq q = _ecq_in(n, cls)
    while len(at) <= cid:
        at.append(None)
    at[cid] = q
    return q


cdef class _PairTable:
    """For a class X, per class id of a class Y: the queries that can have a Y at
    position 0 and an X at position 1. A source's first-position row of class Y holds
    only position-0 queries of Y, so its AND with X's position-1 queries is its AND
    with this set, which has a few queries where X's position-1 set has hundreds; and
    the sets of one X lie in one array, indexed by class id (no lookup, no object per
    pair). Filled on use; dropped with the ECQ constants when queries change."""

    cdef Py_ssize_t ncls
    cdef Py_ssize_t *at  # 2 per class id: offset into ids, count (-1: not made yet)
    cdef uint32_t *ids
    cdef Py_ssize_t used, cap

    def __dealloc__(self):
        PyMem_Free(self.at)
        PyMem_Free(self.ids)

    cdef const uint32_t *get(self, _Net n, Py_ssize_t cid, object second, Py_ssize_t *count) except? NULL:
        cdef Py_ssize_t i, nd, want
        cdef _Ecq fq
        if cid >= self.ncls:
            want = len(n.class_names) if len(n.class_names) > cid else cid + 1
            self.at = <Py_ssize_t *>_grow(self.at, 2 * want * sizeof(Py_ssize_t))
            for i in range(self.ncls, want):
                self.at[2 * i] = 0
                self.at[2 * i + 1] = -1
            self.ncls = want
        if self.at[2 * cid + 1] < 0:
            fq = _ecq_in(n, n.class_names[cid])
            both = fq.more.get(0, 0) & second if fq.ecq is not None else 0
            nd = bits_ndigits(both)
            if self.used + nd * PyLong_SHIFT > self.cap:
                self.cap = (self.cap + nd * PyLong_SHIFT) * 2
                self.ids = <uint32_t *>_grow(self.ids, self.cap * sizeof(uint32_t))
            self.at[2 * cid] = self.used
            self.at[2 * cid + 1] = digits_and_ids(bits_digits(both), bits_digits(both), NULL, nd, self.ids + self.used)
            self.used += self.at[2 * cid + 1]
        count[0] = self.at[2 * cid + 1]
        return self.ids + self.at[2 * cid]


cdef inline bint _has(const digit *d, Py_ssize_t nd, uint32_t k) noexcept:
    return <Py_ssize_t>(k // PyLong_SHIFT) < nd and (d[k // PyLong_SHIFT] >> (k % PyLong_SHIFT)) & 1


cdef int _add_ids_in(
    const uint32_t *ids, Py_ssize_t count, const digit *d, Py_ssize_t nd, object wm, _Builder b, double t
) except -1:
    # The queries among ``ids`` that are in the set ``d`` (and in ``wm``, when given)
    # become a group of ``b`` starting at ``t`` (none when empty).
    cdef Py_ssize_t j, w = b.used(), nw = 0
    cdef const digit *dw = NULL
    cdef uint32_t k
    if wm is not None:
        dw = bits_digits(wm)
        nw = bits_ndigits(wm)
    b.reserve(count)
    for j in range(count):
        k = ids[j]
        if _has(d, nd, k) and (dw == NULL or _has(dw, nw, k)):
            b.ids[w] = k
            w += 1
    if w > b.used():
        b.close(t, w)
    return 0


def extend_summary(net, ecq, e, dict seq_pass):
    """``Network._extend_summary`` on a native summary; each position's groups come as
    :class:`Groups`."""
    cdef _Net n = _net_of(net)
    return _extend(n, _ecq_in(n, ecq.cls), n.summary.get(e.src), e.end, seq_pass, NULL)


cdef dict _extend(_Net n, _Ecq q, SrcSummary summary, double e_end, dict seq_pass, scemon_buf *done):
    # The groups each position's extension gives. With ``done``, a position where no
    # query goes on (its queries all end there) gives no groups: the queries it
    # completes go to ``done`` directly (no Groups made only to be read once).
    cdef dict out = {}
    if summary is None:
        return out
    cdef _Rows starts = summary.starts
    cdef list wins = n.wins
    cdef list wcum = n.wcum
    cdef double full = n.min_window
    cdef double oldest = e_end - n.max_window
    cdef dict final = q.final
    cdef dict more = q.more
    static = q.static
    cdef Py_ssize_t k, i, n_later = summary.nlater
    cdef double t
    cdef object m, wm
    cdef _Builder raw = _raw
    cdef _PairTable table
    cdef const uint32_t *pair
    cdef Py_ssize_t count
    for key, passed in seq_pass.items():
        k = key
        if k == 0 or k > n_later + 1:
            continue
        if seq_pass is static:
            m = passed  # no filters: the position's queries, all in final | more
        else:
            m = passed & (final.get(key, 0) | more.get(key, 0))
        if bits_is_zero(m):
            continue
        raw.reset()
        if k == 1:
            table = None
            if seq_pass is static:
                if q.pairs is None:
                    q.pairs = _PairTable()
                table = q.pairs
            i = 0
            while i < starts.n:  # one row per entry of s_cls
                t = starts.r[i].t
                if t < oldest:
                    summary.drop_start(i)
                    continue
                wm = _window_mask(wins, wcum, e_end - t) if e_end - t > full else None
                if table is not None:
                    # The row & m through the class pair's few queries.
                    pair = table.get(n, starts.r[i].tag, m, &count)
                    _add_ids_in(pair, count, starts.row(i), starts.width(i), wm, raw, t)
                else:
                    starts.add_ids(i, m, wm, raw, t)
                i += 1
            if raw.n:
                if done != NULL and not more.get(key):
                    _raw_final(raw, final.get(key), done)
                else:
                    # First positions: each query at its latest start, one group per
                    # distinct start (classes' entries share query bits only through
                    # ANY(...)).
                    out[key] = _resolve(raw)
        else:
            _pick(n, q, summary, k - 1, e_end, m, raw)
            if raw.n:
                if done != NULL and not more.get(key):
                    _raw_final(raw, final.get(key), done)
                else:
                    out[key] = raw.finish()  # later positions' groups are disjoint already
    return out


cdef int _pick(_Net n, _Ecq q, SrcSummary summary, Py_ssize_t k, double e_end, object m, _Builder raw) except -1:
    # The summary's entries from PMB position k that an instance of q's class at e_end
    # extends (queries in m, within their window), as latest-first groups in ``raw``:
    # only the class's bucket and bucket 0 are read.
    cdef double lo = e_end - n.max_window, full = n.min_window, t
    cdef Py_ssize_t bq = q.cid + 1 if q.cid + 1 < _NO_BUCKET else 0, b, i, got = 0
    cdef const digit *md = bits_digits(m)
    cdef Py_ssize_t mnd = bits_ndigits(m)
    cdef const _Ent *x
    if summary.mark[k - 1] > lo:
        lo = summary.mark[k - 1]
    cdef int side
    for side in range(2):
        b = bq if side else 0  # bucket 0 (positions of several classes), then the class's
        if b >= summary.nbo or (side and bq == 0):
            continue
        for i in range(summary.boff[b], summary.boff[b + 1]):
            x = &summary.ent[i]
            if x.k != k or x.t < lo or not _has(md, mnd, x.q):
                continue
            t = x.t
            if e_end - t > full and not bits_test(_window_mask(n.wins, n.wcum, e_end - t), x.q):
                continue
            if got == 0:
                _pick_room(summary.nent)
            _picked[got] = x[0]
            got += 1
    return _group_picked(got, raw)


cdef int _group_picked(Py_ssize_t got, _Builder b) except -1:
    # _picked[:got], sorted latest first, as groups of ``b``: one per distinct start.
    cdef Py_ssize_t a = 0, z
    _sort_picked(_picked, got)
    b.reset()
    b.reserve(got)
    while a < got:
        z = a
        while z < got and _picked[z].t == _picked[a].t:
            b.ids[z] = _picked[z].q
            z += 1
        b.close(_picked[a].t, z)
        b.reserve(0)
        a = z
    return 0


cdef int _raw_final(_Builder raw, fin, scemon_buf *done) except -1:
    # done |= the queries put together in raw that are in fin.
    cdef Py_ssize_t j
    if fin is None:
        return 0
    for j in range(raw.off[raw.n]):
        if bits_test(fin, raw.ids[j]):
            buf_set(done, raw.ids[j])
    return 0


cdef Groups _resolve(_Builder raw):
    # ecq.pmb.resolve_latest: each query at its latest start, one group per distinct
    # start, latest first (a stable sort, then one pass with the queries claimed so far).
    cdef Py_ssize_t n = raw.n, i, j, top = 0, cur
    cdef _Builder made = _made
    if n == 1:
        return raw.finish()
    global _order, _order_cap
    if n > _order_cap:
        _order = <Py_ssize_t *>_grow(_order, 2 * n * sizeof(Py_ssize_t))
        _order_cap = 2 * n
    cdef Py_ssize_t *order = _order
    for i in range(n):
        cur = i
        j = i - 1
        while j >= 0 and raw.t[order[j]] < raw.t[cur]:
            order[j + 1] = order[j]
            j -= 1
        order[j + 1] = cur
        if raw.off[i + 1] > raw.off[i] and raw.ids[raw.off[i + 1] - 1] >= top:
            top = raw.ids[raw.off[i + 1] - 1] + 1
    made.reset()
    _claims_room(&_claimed, top)
    try:
        for i in range(n):
            cur = order[i]
            _claim_group(made, raw, cur, &_claimed)
    finally:
        # Back to all zero: only words of these queries were set.
        for i in range(raw.off[n]):
            _claimed.w[raw.ids[i] >> 6] = 0
    return made.finish()


cdef struct _Claims:
    # A scratch set of query numbers: 64 per word (shifts and masks; an int's 30-bit
    # digits cost a division per test), all zero between uses.
    uint64_t *w
    Py_ssize_t n  # words


cdef int _claims_room(_Claims *c, Py_ssize_t top) except -1:
    # Room for query numbers up to ``top``.
    cdef Py_ssize_t need = (top >> 6) + 1
    if need > c.n:
        c.w = <uint64_t *>_grow(c.w, need * sizeof(uint64_t))
        memset(c.w + c.n, 0, (need - c.n) * sizeof(uint64_t))
        c.n = need
    return 0


# _resolve's scratch: the groups' order, and the queries claimed.
cdef Py_ssize_t *_order = NULL
cdef Py_ssize_t _order_cap = 0
cdef _Claims _claimed
memset(&_claimed, 0, sizeof(_Claims))


cdef int _claim_group(_Builder made, _Builder src, Py_ssize_t a, _Claims *claimed) except -1:
    # Group ``a`` of ``src`` without the queries already ``claimed`` goes to ``made``
    # (joined to the group before when it starts at the same time); its queries are
    # claimed. Branch-free: whether a query is claimed already is as good as random.
    cdef double t = src.t[a]
    cdef const uint32_t *ids = src.ids
    cdef Py_ssize_t lo = src.off[a], hi = src.off[a + 1], j, w
    cdef uint32_t q
    cdef uint64_t free
    made.reserve(hi - lo)
    w = made.used()
    for j in range(lo, hi):
        q = ids[j]
        free = ((claimed.w[q >> 6] >> (q & 63)) & 1) ^ 1
        claimed.w[q >> 6] |= free << (q & 63)
        made.ids[w] = q
        w += free
    if w == made.used():
        return 0
    if made.n and made.t[made.n - 1] == t:
        # Same start as the group before: one group, its ids kept ascending.
        made.off[made.n] = w
        _sort_ids(made.ids + made.off[made.n - 1], w - made.off[made.n - 1])
    else:
        made.close(t, w)
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


def summarise(net, e, init, kept, double hclock):
    """``Network._summarise`` on a native summary."""
    g1 = kept.get(1) if kept else None
    rest = {k: groups for k, groups in kept.items() if k != 1} if kept else None
    cdef _Net n = _net_of(net)
    _summarise(n, None, e, e.src, e.type, _class_id(n, e.type), e.start, init, g1, rest or None, hclock - <double>net._max_window)


cdef int _summarise(
    _Net n, SrcSummary summary, e, src, cls, Py_ssize_t cid, double start, init, g1, dict rest, double cutoff
) except -1:
    # Fold instance e's PMB (``init``; kept groups: position 1's ``g1`` and ``rest``)
    # into its source's summary (``summary``, or None to look it up or make it); a
    # native PMB becomes the head of the source's chain of its class (``cid``).
    if summary is None:
        summary = n.summary.get(src)
        if summary is None:
            summary = SrcSummary()
            n.summary[src] = summary
    pmb = _get(e, E_PMB)
    if type(pmb) is NativePMB:
        summary.set_head(cid, <NativePMB>pmb)
    cdef Py_ssize_t i
    cdef _Rows starts = summary.starts
    if init:
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
            if start > summary.starts.r[i].t:
                summary.starts.r[i].t = start
            summary.starts.or_row(i, init)
    cdef Py_ssize_t nf = 0
    if g1 is not None:
        _fold(n, summary, 1, g1, cutoff, &nf)
    if rest is not None:
        for key, groups in rest.items():
            _fold(n, summary, key, groups, cutoff, &nf)
    if g1 is not None or rest is not None:
        _join(summary, nf)
    return 0


# The entries an instance brings to its source's summary (_fold), and the buffer a
# summary's entries are merged into (_join; then swapped with the summary's own).
cdef _Ent *_fresh = NULL
cdef Py_ssize_t _fresh_cap = 0
cdef _Ent *_spare = NULL
cdef Py_ssize_t _spare_cap = 0


cdef Py_ssize_t _bucket(_Net n, Py_ssize_t k, uint32_t q) except -1:
    # The summary bucket of query q's entries from PMB position k: 1 + the id of the
    # class it waits for at k + 1, or 0 when that position takes several classes.
    cdef Py_ssize_t b, i, want
    cdef uint16_t *tab = NULL
    if k <= _BTAB_KEYS:
        if q < n.btab_n[k - 1]:
            b = n.btab[k - 1][q]
            if b != _NO_BUCKET:
                return b
        else:
            want = 2 * q + 64
            tab = <uint16_t *>_grow(n.btab[k - 1], want * sizeof(uint16_t))
            for i in range(n.btab_n[k - 1], want):
                tab[i] = _NO_BUCKET
            n.btab[k - 1] = tab
            n.btab_n[k - 1] = want
    cdef _Plan plan = _plan_at(n, q)
    b = 0
    if k + 1 < plan.length and plan.pos[k + 1].cls != NULL and plan.pos[k + 1].cid + 1 < _NO_BUCKET:
        b = plan.pos[k + 1].cid + 1
    if k <= _BTAB_KEYS:
        n.btab[k - 1][q] = <uint16_t>b
    return b


cdef int _fold(_Net n, SrcSummary s, Py_ssize_t k, groups, double cutoff, Py_ssize_t *nf) except -1:
    # Position k's kept groups become fresh entries (those at or above ``cutoff``, which
    # drops the position's older entries: merge_latest).
    global _fresh, _fresh_cap
    if k >= _NO_BUCKET:
        raise OverflowError(f"a sequence of more than {_NO_BUCKET} steps")
    s.widen(k)
    if cutoff < s.mark[k - 1]:
        # A lower cutoff than one applied before: what that one dropped goes for good
        # first, so that the mark can come down.
        s.keep_if(-1)
        s.mark[k - 1] = cutoff
    elif cutoff > s.mark[k - 1]:
        s.mark[k - 1] = cutoff
    if type(groups) is not Groups:
        groups = _groups_of(groups)
    cdef Groups g = <Groups>groups
    cdef Py_ssize_t i, j, m = nf[0]
    cdef double t
    if m + g.off[g.n] > _fresh_cap:
        _fresh_cap = 2 * (m + g.off[g.n]) + 16
        _fresh = <_Ent *>_grow(_fresh, _fresh_cap * sizeof(_Ent))
    for i in range(g.n):
        t = g.t[i]
        if t < cutoff:
            break  # latest first: the rest are older
        for j in range(g.off[i], g.off[i + 1]):
            _fresh[m].t = t
            _fresh[m].q = g.ids[j]
            _fresh[m].k = <uint16_t>k
            _fresh[m].b = <uint16_t>_bucket(n, k, g.ids[j])
            m += 1
    nf[0] = m
    return 0


cdef int _join(SrcSummary s, Py_ssize_t nf) except -1:
    # Merge the fresh entries into the summary's, each query keeping its latest start
    # per position. Entries below their position's mark are invisible to every reader;
    # they go when the entries have grown by a quarter since the last time (a pass that
    # tests each entry), else the old entries are copied in runs.
    global _spare, _spare_cap
    cdef Py_ssize_t i = 0, j, w = 0, n = s.nent, cap, r, b, nb
    cdef _Ent *old = s.ent
    cdef _Ent *out
    cdef uint64_t a = 0, z
    cdef bint sift = n + nf > s.sifted + s.sifted // 4 + 16
    if nf == 0:
        return 0  # all below the cutoff (the mark hides what it dropped)
    _sort_fresh(nf)
    if n + nf > _spare_cap:
        _spare_cap = 2 * (n + nf) + 16
        _spare = <_Ent *>_grow(_spare, _spare_cap * sizeof(_Ent))
    out = _spare
    nb = _fresh[nf - 1].b + 1
    if not sift:
        if nb > s.nbo:
            s.bucket_room(nb)
        _added_room(s.nbo + 1)
    for j in range(nf):
        z = _key(&_fresh[j])
        if sift:
            # The old entries before fresh entry j, the invisible ones left out.
            while i < n:
                a = _key(&old[i])
                if a >= z:
                    break
                out[w] = old[i]
                w += s.live(&old[i])
                i += 1
        else:
            r = i
            while r < n:
                a = _key(&old[r])
                if a >= z:
                    break
                r += 1
            memcpy(out + w, old + i, (r - i) * sizeof(_Ent))
            w += r - i
            i = r
        out[w] = _fresh[j]
        if i < n and a == z:
            # The same query and position: the latest start (the old one is visible
            # when later than a fresh one, which is at or above the mark).
            if old[i].t > out[w].t:
                out[w].t = old[i].t
            i += 1
        elif not sift:
            _added[_fresh[j].b] += 1
        w += 1
    if sift:
        while i < n:
            out[w] = old[i]
            w += s.live(&old[i])
            i += 1
    else:
        memcpy(out + w, old + i, (n - i) * sizeof(_Ent))
        w += n - i
    # The merged entries become the summary's; its old buffer is the next spare.
    cap = s.cap
    s.ent, s.cap, s.nent = _spare, _spare_cap, w
    _spare, _spare_cap = old, cap
    if sift:
        s.sifted = w
        return s.index()
    # Each bucket's start moves by the entries added to the buckets before it.
    r = 0
    for b in range(s.nbo + 1):
        s.boff[b] += <uint32_t>r
        r += _added[b]
        _added[b] = 0
    return 0


# _join's count of the entries it adds per bucket (all zero between calls).
cdef uint32_t *_added = NULL
cdef Py_ssize_t _added_cap = 0


cdef int _added_room(Py_ssize_t n) except -1:
    global _added, _added_cap
    if n > _added_cap:
        _added = <uint32_t *>_grow(_added, n * sizeof(uint32_t))
        memset(_added + _added_cap, 0, (n - _added_cap) * sizeof(uint32_t))
        _added_cap = n
    return 0


cdef int _sort_fresh(Py_ssize_t n) except -1:
    # _fresh[:n] by key: counted into buckets (the order of their positions in ``_fresh``
    # is as good as random), then each bucket's few entries by insertion.
    global _fresh, _fresh_cap, _sorted, _sorted_cap
    cdef Py_ssize_t i, j, b, nb = 0, cap
    cdef _Ent v
    cdef uint64_t kv
    cdef _Ent *x = _fresh
    cdef _Ent *tmp
    if n > 12:
        for i in range(n):
            if x[i].b >= nb:
                nb = x[i].b + 1
        _added_room(nb + 1)
        for i in range(n):
            _added[x[i].b + 1] += 1
        for b in range(nb):
            _added[b + 1] += _added[b]
        if n > _sorted_cap:
            _sorted_cap = _fresh_cap
            _sorted = <_Ent *>_grow(_sorted, _sorted_cap * sizeof(_Ent))
        for i in range(n):
            b = x[i].b
            _sorted[_added[b]] = x[i]
            _added[b] += 1
        memset(_added, 0, (nb + 1) * sizeof(uint32_t))
        # The sorted copy becomes _fresh, and _fresh the next copy's buffer.
        tmp, cap = _fresh, _fresh_cap
        _fresh, _fresh_cap = _sorted, _sorted_cap
        _sorted, _sorted_cap = tmp, cap
        x = _fresh
    for i in range(1, n):
        v = x[i]
        kv = _key(&v)
        j = i - 1
        while j >= 0 and _key(&x[j]) > kv:
            x[j + 1] = x[j]
            j -= 1
        x[j + 1] = v
    return 0


cdef _Ent *_sorted = NULL  # _sort_fresh's other buffer
cdef Py_ssize_t _sorted_cap = 0


cdef struct _Pos:
    # One position of a node's sequence.
    PyObject *cls  # its class when it has only one (borrowed from classes_at), else NULL
    Py_ssize_t cid  # that class's number (_class_id), else -1; set by _plan_at
    bint checked  # conditions are checked there


cdef enum:
    _INLINE_POS = 4  # positions kept inside the plan object


cdef class _Plan:
    """A node's constants for the compiled loops, read from its QState and
    CompiledQuery once (each attribute lookup is a dict lookup). Cached on the QState,
    which never changes once registered.

    Thousands of nodes complete now and then, so a plan is cold when read: what
    completing, assembling and emitting a match reads comes first, and the positions
    of short sequences are inside the object (one or two cache lines in all; the lists
    and separate arrays they were in cost a miss each)."""

    cdef Py_ssize_t length, bitno
    cdef long long reg, order
    cdef double window
    cdef bint never, top, mode_all, simple
    # Its matches are emitted as found (simple, and no query reads @name): set by
    # _plan_at, valid while queries do not change.
    cdef bint direct
    cdef bint cids  # pos[i].cid set (by _plan_at)
    # Matches emitted by _emit_simple (QState.matches adds them to its own count).
    cdef readonly long long matches
    cdef readonly object name
    cdef object probability
    cdef _Pos *pos  # inline_pos, or allocated for longer sequences
    cdef _Pos inline_pos[_INLINE_POS]
    cdef object qs, derived_class
    cdef list classes_at, checks_at

    def __dealloc__(self):
        if self.pos != &self.inline_pos[0]:
            PyMem_Free(self.pos)


cdef _Plan _plan_of(qs):
    plan = qs.plan
    if plan is not None:
        return <_Plan>plan
    cdef _Plan p = _Plan()
    cq = qs.cq
    p.qs = qs
    p.name = cq.name
    p.never = cq.never
    p.top = cq.top
    p.mode_all = cq.mode_all
    p.simple = qs.simple
    p.length = cq.length
    p.bitno = qs.bitno
    p.reg = qs.reg
    p.order = qs.order
    p.probability = cq.probability
    p.derived_class = qs.derived_class
    p.window = cq.window if cq.window else 0.0
    p.classes_at = qs.classes_at
    p.checks_at = qs.checks_at
    cdef Py_ssize_t i, n = len(p.classes_at)
    if n <= _INLINE_POS:
        p.pos = &p.inline_pos[0]
    else:
        p.pos = <_Pos *>_grow(NULL, n * sizeof(_Pos))
    for i in range(n):
        classes = <tuple>p.classes_at[i]
        p.pos[i].cls = <PyObject *>classes[0] if len(classes) == 1 else NULL
        p.pos[i].cid = -1
        p.pos[i].checked = i < len(p.checks_at) and len(<list>p.checks_at[i]) > 0
    qs.plan = p
    return p


cdef _Plan _plan_at(_Net n, Py_ssize_t bitno):
    # The plan of the node with bit ``bitno``, through a list (no dict lookups).
    cdef list plans = n.plans
    cdef _Plan p
    cdef Py_ssize_t i
    if bitno < len(plans):
        p = <_Plan>plans[bitno]
        if p is not None:
            return p
    p = _plan_of(n.by_bit[bitno])
    p.direct = p.simple and p.derived_class not in n.ecqs
    if not p.cids:
        for i in range(p.length):
            if p.pos[i].cls != NULL:
                p.pos[i].cid = _class_id(n, <object>p.pos[i].cls)
        p.cids = True
    while len(plans) <= bitno:
        plans.append(None)
    plans[bitno] = p
    _note_cids(n, p)
    return p


cdef int _note_cids(_Net n, _Plan p) except -1:
    # p's entries of _Net.hcid.
    cdef Py_ssize_t i, want, b = p.bitno
    if 2 * b + 1 >= n.hcid_n:
        want = 2 * (2 * b + 2) + 64
        n.hcid = <int32_t *>_grow(n.hcid, want * sizeof(int32_t))
        for i in range(n.hcid_n, want):
            n.hcid[i] = _UNSET
        n.hcid_n = want
    if p.length > 3:
        n.hcid[2 * b] = _LONG
    else:
        n.hcid[2 * b] = <int32_t>(p.pos[1].cid if p.length == 3 and p.pos[1].cls != NULL else -1)
    n.hcid[2 * b + 1] = <int32_t>(p.pos[0].cid if 2 <= p.length <= 3 and p.pos[0].cls != NULL else -1)
    return 0


cdef struct _Found:
    # The matches completed by one instance, parallel to the completed list: each one's
    # probability and start (read while assembling, from the PMBs).
    double *prob
    double *start
    Py_ssize_t n, cap


cdef int _add_found(_Found *f, double prob, double start) except -1:
    if f == NULL:
        return 0
    if f.n == f.cap:
        f.cap = 2 * f.cap + 8
        f.prob = <double *>_grow(f.prob, f.cap * sizeof(double))
        f.start = <double *>_grow(f.start, f.cap * sizeof(double))
    f.prob[f.n] = prob
    f.start[f.n] = start
    f.n += 1
    return 0


cdef _Found _found  # the current instance's (run_events; _complete)
memset(&_found, 0, sizeof(_Found))


cdef class _Assembly:
    """A call of ``assemble_seq``: the query's constants and the match being built (the
    compiled loop keeps one per network generation, in _Net, and empties ``found``
    after each call)."""

    cdef object probe
    cdef _Plan plan
    cdef list env
    cdef list found
    # Emptied event lists by length (up to _INLINE_POS), for env: the compiled loop's
    # matches copy their events (_emit_one), and it gives their lists back (_recycle).
    # None: no spares (assemble_seq).
    cdef list spare
    # Per match found: its probability and start (in ``found_at``, when not NULL).
    cdef _Found *found_at
    cdef double *probs  # per position: the bound event's probability
    cdef double small_probs[_INLINE_POS]
    cdef double bound
    cdef long long reg
    cdef Py_ssize_t bitno
    cdef bint mode_all
    cdef object min_prob

    cdef bint fill(self, Py_ssize_t i, long long nxt_moment, double nxt_start) except -1:
        # Bind position i (each earlier one recursively) to the latest valid candidate
        # arrived before the instance bound next (its moment and start given); whether
        # the assembly is over.
        cdef PyObject *one = self.plan.pos[i].cls
        cdef tuple classes
        cdef list candidates
        cdef PyObject *p
        cdef double horizon
        cdef int r
        if type(self.probe) is _Chains and one != NULL and self.plan.cids:
            # The source's chain of the class, from PMB to PMB.
            p = (<_Chains>self.probe).head(self.plan.pos[i].cid, <object>one, &horizon)
            while p != NULL:
                if (<NativePMB>p).start >= horizon:
                    r = self._try_native(i, <NativePMB>p, nxt_moment, nxt_start)
                    if r:
                        return r > 0
                p = <PyObject *>(<NativePMB>p).prev
                if <object>p is None:
                    break
            return False
        if type(self.probe) is _Chains:
            classes = <tuple>PyList_GET_ITEM(self.plan.classes_at, i)
            candidates = list(_by_recency([(<_Chains>self.probe).chain(c) for c in classes]))
        elif one != NULL:
            candidates = self.probe(<object>one)
        else:
            classes = <tuple>PyList_GET_ITEM(self.plan.classes_at, i)
            candidates = list(_by_recency([self.probe(c) for c in classes]))
        for c in candidates:
            r = self._try(i, c, nxt_moment, nxt_start)
            if r:
                return r > 0
        return False

    cdef int _try_native(self, Py_ssize_t i, NativePMB pmb, long long nxt_moment, double nxt_start) except -2:
        # _try for an instance with a native PMB, read from the PMB.
        cdef double t
        if pmb.event is None:
            return 0  # dropped
        if pmb.moment >= nxt_moment:
            return 0
        if pmb.moment <= self.reg:
            return -1  # everything further back arrived before the query existed
        if pmb.end > nxt_start:
            return 0
        if i == 0 and bits_test(pmb.init, self.bitno):
            if pmb.start < self.bound:
                return 0
        elif i == 1:
            if pmb.g1block == NULL or not _find_in(pmb.g1block, pmb.g1n, self.bitno, &t) or t < self.bound:
                return 0
        else:
            groups = pmb.groups_at(i)
            if groups is None or not (<Groups>groups).find(self.bitno, &t) or t < self.bound:
                return 0
        return self._bind(i, pmb.event, pmb.prob, pmb.moment, pmb.start)

    cdef int _try(self, Py_ssize_t i, object p, long long nxt_moment, double nxt_start) except -2:
        # Candidate ``p`` at position i: 1 when the assembly is over, 0 to go on to the
        # next (older) candidate, -1 when no older candidate can do. A native PMB holds
        # what is read here: _try_native decides.
        pmb = _get(p, E_PMB)
        if type(pmb) is NativePMB:
            return self._try_native(i, <NativePMB>pmb, nxt_moment, nxt_start)
        cdef long long moment = _get(p, E_MOMENT)
        cdef double t
        cdef bint ok
        cdef Py_ssize_t bitno = self.bitno
        if moment >= nxt_moment:
            return 0
        if moment <= self.reg:
            return -1  # everything further back arrived before the query existed
        if _getf(p, E_END) > nxt_start:
            return 0
        if pmb is None:
            return 0  # dropped
        if i == 0 and bits_test(_get(pmb, P_INIT), bitno):
            if _getf(p, E_START) < self.bound:
                return 0
        else:
            entries = _get(pmb, P_ENTRIES)
            if not entries:
                return 0
            groups = entries.get(i)
            if groups is None:
                return 0
            ok = False
            if type(groups) is Groups:
                if (<Groups>groups).find(bitno, &t):
                    ok = t >= self.bound
            else:
                for g in groups:
                    if bits_test(_bits(g), bitno):
                        ok = _t(g) >= self.bound
                        break
            if not ok:
                return 0
        return self._bind(i, p, _getf(p, E_PROB), moment, _getf(p, E_START))

    cdef int _bind(self, Py_ssize_t i, object p, double prob, long long moment, double start) except -2:
        # ``p`` (its probability, moment and start given) takes position i: the
        # conditions checked there, then the positions before it, or the match is
        # complete. As _try.
        cdef double t
        cdef Py_ssize_t k
        self.env[i] = p
        self.probs[i] = prob
        if self.plan.pos[i].checked:
            for check in <list>PyList_GET_ITEM(self.plan.checks_at, i):
                if not check(self.env):
                    return 0
        if i:
            return 1 if self.fill(i - 1, moment, start) else 0
        # The match's probability: its events' product, in their order.
        t = 1.0
        for k in range(self.plan.length):
            t *= self.probs[k]
        if self.min_prob is not None and t < <double>self.min_prob:
            return 0
        _add_found(self.found_at, t, start)
        if not self.mode_all:
            # The only match: env itself (this assembly is over, nothing changes it).
            self.found.append(self.env)
            return 1
        self.found.append(list(self.env))
        return 0


def assemble_seq(qs, last, probe):
    """``ecq.assembly.assemble_seq``."""
    cdef _Assembly a = _Assembly()
    a.found = []
    return _assemble(a, _plan_of(qs), last, probe, NULL)


cdef list _assemble(_Assembly a, _Plan plan, last, probe, _Found *found_at):
    # The matches found, in ``a.found`` (their probabilities and starts appended to
    # ``found_at`` unless NULL).
    cdef Py_ssize_t n = plan.length
    a.probe = probe
    a.plan = plan
    a.env = _take(a, n, last)
    a.found_at = found_at
    a.probs = &a.small_probs[0] if n <= _INLINE_POS else <double *>_grow(NULL, n * sizeof(double))
    try:
        a.probs[n - 1] = _getf(last, E_PROB)
        a.bound = _getf(last, E_END) - plan.window
        a.reg = plan.reg
        a.bitno = plan.bitno
        a.mode_all = plan.mode_all
        a.min_prob = plan.probability
        a.fill(n - 2, _get(last, E_MOMENT), _getf(last, E_START))
    finally:
        if a.probs != &a.small_probs[0]:
            PyMem_Free(a.probs)
        a.probs = NULL
        # env is found's when it is a match; else it is a spare again.
        _give(a, <PyObject *>a.env)
        a.env = None
    return a.found


cdef enum:
    _SPARES = 64  # emptied event lists kept per length


cdef list _take(_Assembly a, Py_ssize_t n, last):
    # [last] * n, in a spare list when there is one (a fresh list is two allocations
    # whose free blocks are cold at thousands of queries: a match or two per event).
    cdef list pool, env
    cdef Py_ssize_t k
    if a.spare is None or n > _INLINE_POS:
        return [last] * n
    pool = <list>PyList_GET_ITEM(a.spare, n)
    if not pool:
        return [last] * n
    env = pool.pop()
    for k in range(n):
        env[k] = last
    return env


cdef int _recycle(_Assembly a, list done) except -1:
    # The event lists of matches just emitted go back to a's spares (the matches hold
    # copies of their events).
    cdef Py_ssize_t i
    for i in range(PyList_GET_SIZE(done)):
        _give(a, PyList_GET_ITEM(done, i))
    return 0


cdef int _give(_Assembly a, PyObject *p) except -1:
    # List p, emptied, to a's spares, when only its holder (one reference) has it.
    cdef Py_ssize_t k, n
    cdef list pool, env
    if a.spare is None or _refcnt(p) != 1:
        return 0
    env = <list>p
    n = PyList_GET_SIZE(env)
    if n > _INLINE_POS:
        return 0
    pool = <list>PyList_GET_ITEM(a.spare, n)
    if PyList_GET_SIZE(pool) >= _SPARES:
        return 0
    for k in range(n):
        env[k] = None
    pool.append(env)
    return 0


# ------------------------------------------------------------ whole plain phases


cdef class _Chains:
    """The probe of ``Network._probe`` for one instance, walking the SIQ back chains
    directly: a source's visible instances of a class (start at or above the class's
    horizon, ``ECQ.horizon``), latest first. One per network generation (in _Net),
    moved on to each instance by ``at``."""

    cdef _Net n
    cdef dict chains  # class -> list, for positions of several classes
    cdef object src
    cdef double hclock
    cdef SrcSummary summary  # the source's, or None

    cdef void at(self, object src, double hclock, SrcSummary summary) noexcept:
        self.chains = None
        self.src = src
        self.hclock = hclock
        self.summary = summary

    cdef PyObject *head(self, Py_ssize_t cid, object cls, double *horizon) except? NULL:
        # The head of the source's chain of ``cls`` (class id ``cid``) as its summary
        # keeps it (borrowed: nothing changes while one instance's matches are
        # assembled), NULL when none; ``horizon``: the least start visible.
        if self.summary is None:
            return NULL
        cdef _Ecq q = _ecq_at(self.n, cid, cls)
        if q.ecq is None:
            return NULL
        cdef double h = self.hclock - q.window
        horizon[0] = q.frozen if q.frozen > h else h
        return self.summary.head(cid)

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
        cdef _Ecq q = _ecq_in(self.n, cls)
        if q.ecq is None:
            return out
        cdef double horizon = self.hclock - q.window
        if q.frozen > horizon:
            horizon = q.frozen
        p = q.last.get(self.src)
        while p is not None:
            if _getf(p, E_START) >= horizon:
                out.append(p)
            p = _get(p, E_PREV)
        return out


def test_plain(net, ecq, e, dict seq_pass, double hclock, list completed):
    """The plain-sequence part of ``Network.process``'s test phase at level "summary":
    extend from the summary, then assemble the matches of the queries ``e`` completes
    (appended to ``completed`` as ``(node, events)``). Returns the extended groups."""
    cdef bint direct
    cdef _Net n = _net_of(net)
    src = e.src
    cdef list envs = [], plans = []
    extended = _test(n, _ecq_in(n, ecq.cls), e, src, n.summary.get(src), e.end, seq_pass, hclock, envs, plans, &direct)
    completed += _pairs(envs, plans)
    return extended


cdef list _pairs(list envs, list plans):
    # [(node, events)] for each match found (what Network.settle_plain takes).
    return [((<_Plan>plans[i]).qs, envs[i]) for i in range(len(envs))]


cdef dict _test(
    _Net n, _Ecq q, e, src, SrcSummary summary, double end, dict seq_pass, double hclock, list completed,
    list plans, bint *direct
):
    # ``summary``: the source's (or None); ``completed``: each match's events, and
    # ``plans``: its node's plan; ``direct``: whether all can be emitted as found.
    cdef dict extended
    cdef dict final = q.final
    # The queries ``e`` completes, gathered digit by digit (no int is made).
    cdef scemon_buf done
    memset(&done, 0, sizeof(scemon_buf))
    try:
        if len(seq_pass) > 1 or 0 not in seq_pass:
            extended = _extend(n, q, summary, end, seq_pass, &done)
        else:
            extended = {}
        fin = final.get(0)
        if fin is not None:
            buf_or_and(&done, seq_pass.get(0, 0), fin)
        for key, groups in extended.items():
            fin = final.get(key)
            if fin is not None:
                _or_final(&done, <Groups?>groups, fin)
        bitno = buf_next_bit(&done, 0)
        if bitno < 0:
            return extended
        _prefetch_plans(n, &done, bitno)
        direct[0] = _complete(n, e, src, summary, hclock, &done, bitno, completed, plans)
    finally:
        buf_free(&done)
    return extended


cdef void _prefetch_plans(_Net n, scemon_buf *done, Py_ssize_t bitno) noexcept:
    # The plans of the nodes an instance completes are cold (thousands of nodes, a few
    # complete per instance): asked for all at once, their misses overlap.
    cdef list plans = n.plans
    while bitno >= 0:
        if bitno < PyList_GET_SIZE(plans):
            prefetch_lines(<const void *>PyList_GET_ITEM(plans, bitno), 4)
        bitno = buf_next_bit(done, bitno + 1)


cdef inline void _prefetch_head(SrcSummary summary, Py_ssize_t cid) noexcept:
    cdef PyObject *head = summary.head(cid)
    if head != NULL:
        prefetch_lines(<const void *>head, 2)


cdef void _prefetch_heads(_Net n, SrcSummary summary, scemon_buf *done, Py_ssize_t bitno) noexcept:
    # Likewise the PMBs heading the source's chains the assembly will walk first (their
    # classes from _Net.hcid, warm, where the plans have not arrived yet), then the
    # position-1 blocks of those PMBs (once they have: their misses overlap in turn).
    cdef list plans = n.plans
    cdef _Plan plan
    cdef Py_ssize_t i, b = bitno
    cdef int32_t c
    cdef PyObject *head
    while b >= 0:
        c = n.hcid[2 * b] if 2 * b + 1 < n.hcid_n else _UNSET
        if c == _LONG:
            if b < PyList_GET_SIZE(plans) and <object>PyList_GET_ITEM(plans, b) is not None:
                plan = <_Plan>PyList_GET_ITEM(plans, b)
                for i in range(plan.length - 1):
                    if plan.pos[i].cid >= 0:
                        _prefetch_head(summary, plan.pos[i].cid)
        elif c != _UNSET:
            if c >= 0:
                _prefetch_head(summary, c)
            if n.hcid[2 * b + 1] >= 0:
                _prefetch_head(summary, n.hcid[2 * b + 1])
        b = buf_next_bit(done, b + 1)
    b = bitno
    while b >= 0:
        c = n.hcid[2 * b] if 2 * b + 1 < n.hcid_n else _UNSET
        if c >= 0:
            head = summary.head(c)
            if head != NULL and (<NativePMB>head).g1block != NULL:
                i = ((<NativePMB>head).g1bytes + 63) >> 6
                prefetch_lines((<NativePMB>head).g1block, <int>(i if i < 8 else 8))
        b = buf_next_bit(done, b + 1)


cdef int _or_final(scemon_buf *done, Groups g, fin) except -1:
    # done |= the queries of g that are in fin.
    cdef Py_ssize_t j
    for j in range(g.off[g.n]):
        if bits_test(fin, g.ids[j]):
            buf_set(done, g.ids[j])
    return 0


cdef object _keep(Groups g, more):
    # [(t, bits & more) for t, bits in g if bits & more], as Groups (g itself when every
    # query of it goes on), or None.
    cdef Py_ssize_t i, j, total = g.off[g.n]
    cdef _Builder made = _made
    for j in range(total):
        if not bits_test(more, g.ids[j]):
            break
    else:
        return g
    made.reset()
    for i in range(g.n):
        _add_ids_in(g.ids + g.off[i], g.off[i + 1] - g.off[i], bits_digits(more), bits_ndigits(more), None, made, g.t[i])
    return made.finish() if made.n else None


cdef int _complete(
    _Net n, e, src, SrcSummary summary, double hclock, scemon_buf *done, Py_ssize_t bitno, list completed,
    list plans
) except -1:
    # The matches of the queries in ``done`` (lowest bit first, as Network._nodes_of),
    # each with its node's plan in ``plans``. Returns whether all can be emitted as found.
    cdef bint direct = True
    cdef _Chains probe = n.chains
    probe.at(src, hclock, summary)
    cdef _Plan plan
    cdef Py_ssize_t before
    _found.n = len(completed)  # parallel to completed from here
    if summary is not None:
        _prefetch_heads(n, summary, done, bitno)
    while bitno >= 0:
        plan = _plan_at(n, bitno)
        bitno = buf_next_bit(done, bitno + 1)
        if plan.never:
            continue
        # Its name (a cold string) goes into each match: asked for now, read after the
        # assembly.
        prefetch_lines(<const void *>plan.name, 1)
        before = len(completed)
        if plan.length == 1:
            if plan.top and plan.probability is not None:
                ok = _getf(e, E_PROB) >= <double>plan.probability
            else:
                ok = _getf(e, E_PROB) > 0.0
            if ok:
                completed.append([e])
                _add_found(&_found, _getf(e, E_PROB), _getf(e, E_START))
        else:
            found = _assemble(n.assembly, plan, e, probe, &_found)
            completed.extend(found)
            del found[:]
        if len(completed) > before:
            direct = direct and plan.direct
            for _ in range(len(completed) - before):
                plans.append(plan)
    return direct


def insert_plain(net, ecq, e, dict seq_pass, dict extended, double hclock):
    """``Network.process``'s insert phase at level "summary": the instance's PMB, its
    place in the SIQ, and its source's summary. Returns whether it was stored."""
    cdef _Net n = _net_of(net)
    src = e.src
    return _insert(n, _ecq_in(n, ecq.cls), e, src, n.summary.get(src), e.type, e.start, seq_pass, extended, hclock)


cdef bint _insert(
    _Net n, _Ecq q, e, src, SrcSummary summary, cls, double start, dict seq_pass, dict extended, double hclock
) except -1:
    cdef dict more_at = q.more
    cdef NativePMB pmb
    if seq_pass is q.static:
        init = q.init  # the same for every instance of the class: one int, shared
    else:
        init = seq_pass.get(0, 0) & more_at.get(0, 0)
    g1 = None
    cdef dict rest = None
    for key, groups in extended.items():
        more = more_at.get(key, 0)
        if not more:
            continue
        keep = _keep(<Groups?>groups, more)
        if keep is not None:
            if key == 1:
                g1 = keep
            else:
                if rest is None:
                    rest = {}
                rest[key] = keep
    if init or g1 is not None or rest is not None or q.general_uses:
        pmb = <NativePMB>NativePMB.__new__(NativePMB)
        pmb.init = init
        pmb.g1 = g1
        if g1 is not None:
            pmb.g1block = (<Groups>g1).block
            pmb.g1n = <int32_t>(<Groups>g1).n
            pmb.g1bytes = <int32_t>min((<Groups>g1).cap, 1 << 30)
        pmb.rest = rest
        pmb.event = e
        pmb.start = start
        pmb.end = _getf(e, E_END)
        pmb.prob = _getf(e, E_PROB)
        pmb.moment = _get(e, E_MOMENT)
        slot_set(e, E_PMB, pmb)
        last = q.last
        slot_set(e, E_PREV, last.get(src))
        last[src] = e
        q.queue.append(e)
        if init or g1 is not None or rest is not None:
            _summarise(n, summary, e, src, cls, q.cid, start, init, g1, rest, hclock - n.max_window)
        return True
    return False


# ------------------------------------------------------------------ the event loop


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
        self.deadline = net._next_deadline
        return 0


def run_events(engine, events):
    """``OpClock.process`` for the shared engine at level "summary": the same stamping,
    clock, cleaning and emission order. An event of a class only plain sequences use
    (no filters, no pending trailing negation due) goes through the compiled phases, and
    the matches of plain queries that need nothing more are built here directly;
    anything else takes ``Network.on_event`` and ``OpClock._emit``. The engine's
    counters live in C during the batch (``_Counters``) and are written back before any
    Python code runs and at the end."""
    cdef list out = []
    net = engine.network
    cdef _Net n = _net_of(net)
    cdef _Counters c = _Counters()
    c.ops = engine.ops
    c.arrivals = engine.arrivals
    c.since = engine._since_clean
    c.clock = engine.clock
    c.get(engine, net)
    cdef long long every = engine.clean_every
    cdef double before, end
    cdef bint direct, exact
    cdef _Ecq q
    cdef SrcSummary summary
    cdef list completed = []
    cdef list plans = []
    # Sources' summaries three events ahead, for prefetching (_Ahead).
    cdef _Ahead ahead = _Ahead()
    cdef list seq = events if type(events) is list else list(events)
    cdef Py_ssize_t at, total = len(seq)
    try:
        for at in range(total):
            e = <object>PyList_GET_ITEM(seq, at)
            ahead.step(n, seq, at, total)
            exact = type(e) is _Event
            if (<long long>_get(e, E_ARRIVAL) if exact else <long long>e.arrival) >= 0:
                e = _Event(e.src, e.type, e.start, e.end, e.attrs, e.prob, e.id)
                exact = True
            c.ops += 1
            arrival = c.arrivals
            moment = 2 * c.ops + 1
            if exact:
                slot_set(e, E_ARRIVAL, arrival)
                slot_set(e, E_MOMENT, moment)
            else:
                e.arrival = arrival
                e.moment = moment
            c.arrivals += 1
            before = c.clock
            end_o = _get(e, E_END) if exact else e.end
            end = end_o
            if end > before:
                c.clock = end
            cls = _get(e, E_TYPE) if exact else e.type
            q = _ecq_in(n, cls)
            if not exact or not q.plain or c.clock > c.deadline:
                c.put(engine, net)
                emitted = net.on_event(e, before, c.clock)
                if emitted:
                    engine._emit(emitted, arrival, out)
                c.get(engine, net)
            else:
                c.seen += 1
                src = _get(e, E_SRC)
                static = q.static
                summary = n.summary.get(src)
                extended = _test(n, q, e, src, summary, end, static, c.clock, completed, plans, &direct)
                _insert(n, q, e, src, summary, cls, _getf(e, E_START), static, extended, c.clock)
                if completed:
                    if direct:
                        _emit_simple(c, completed, plans, src, arrival, out)
                        _recycle(n.assembly, completed)
                    else:
                        c.put(engine, net)
                        emitted = net.settle_plain(_pairs(completed, plans), e, c.clock)
                        if emitted:
                            engine._emit(emitted, arrival, out)
                        c.get(engine, net)
                    # Emptied for the next event (one pair of lists per batch).
                    del completed[:]
                    del plans[:]
            c.since += 1
            if c.since >= every:
                c.put(engine, net)
                engine.clean()
                c.since = engine._since_clean
    finally:
        c.put(engine, net)
        engine._since_clean = c.since
    return out


cdef class _Ahead:
    """Prefetching the summaries of the sources of the next events. A source's summary
    is cold when its event comes (a thousand sources take turns), and it is read at
    once: its rows, its later entries (a hundred or more at thousands of queries) and
    its chain heads. Three events ahead its object is asked for; two ahead, its arrays
    (their addresses are in the object, cached by then); one ahead, its rows (through
    the rows object). Only prefetches: nothing is read here that the event then uses,
    and the summaries are looked up again when their events come."""

    cdef list ring  # the summaries of events at + 1 .. at + 3 (None: none), by index & 3

    def __cinit__(self):
        self.ring = [None] * 4

    cdef int step(self, _Net n, list seq, Py_ssize_t at, Py_ssize_t total) except -1:
        cdef SrcSummary s
        cdef Py_ssize_t lines
        if at + 3 < total:
            ev = <object>PyList_GET_ITEM(seq, at + 3)
            got = n.summary.get(_get(ev, E_SRC)) if type(ev) is _Event else None
            self.ring[(at + 3) & 3] = got
            if got is not None:
                prefetch_lines(<const void *>got, 2)
        got = self.ring[(at + 2) & 3]
        if got is not None:
            s = <SrcSummary>got
            lines = (s.nent * sizeof(_Ent) + 63) // 64
            prefetch_lines(<const void *>s.ent, lines if lines < 64 else 64)
            prefetch_lines(<const void *>s.boff, <int>(((s.nbo + 1) * sizeof(uint32_t) + 63) // 64))
            prefetch_lines(<const void *>s.heads, <int>((s.nheads * sizeof(PyObject *) + 63) // 64))
            prefetch_lines(<const void *>s.starts, 1)
        got = self.ring[(at + 1) & 3]
        if got is not None:
            s = <SrcSummary>got
            prefetch_lines(<const void *>s.starts.r, <int>((s.starts.n * sizeof(_Row) + 63) // 64))
        self.ring[at & 3] = None
        return 0


cdef enum:
    _FEW = 64  # matches of one instance sorted on the stack


cdef _emit_simple(_Counters c, list completed, list plans, src, arrival, list out):
    # Network._finish + matches_of for matches that need nothing more: ordered by the
    # node's registration, then the events' arrival indexes (docs/semantics.md). Each
    # match's probability and start come from _found (the assembly read them).
    cdef Py_ssize_t n = len(completed), i, j, m = 0
    cdef double prob
    cdef long long order
    cdef long long orders[_FEW]
    cdef Py_ssize_t idx[_FEW]
    cdef double probs[_FEW]
    if n > _FEW:
        return _emit_sorted(c, completed, plans, src, arrival, out)
    for i in range(n):
        prob = _found.prob[i]
        if not prob > 0.0:
            continue
        # Insertion by the node's registration order (stable: one match per node is
        # the common case).
        order = (<_Plan>PyList_GET_ITEM(plans, i)).order
        j = m
        while j > 0 and orders[j - 1] > order:
            orders[j] = orders[j - 1]
            idx[j] = idx[j - 1]
            probs[j] = probs[j - 1]
            j -= 1
        if j > 0 and orders[j - 1] == order:
            # A node with several matches (MODE ALL): their events' arrivals decide.
            return _emit_sorted(c, completed, plans, src, arrival, out)
        orders[j] = order
        idx[j] = i
        probs[j] = prob
        m += 1
    cdef long long seq = c.seq
    for j in range(m):
        i = idx[j]
        _emit_one(
            <_Plan>PyList_GET_ITEM(plans, i), <list>PyList_GET_ITEM(completed, i), src, probs[j], _found.start[i], seq,
            arrival, out
        )
        seq += 1
    c.seq = seq


cdef _emit_sorted(_Counters c, list completed, list plans, src, arrival, list out):
    # _emit_simple for many matches, or several of one node: sorted by the node's
    # registration, then the events' arrival indexes.
    cdef list keyed = []
    cdef double prob
    cdef Py_ssize_t i
    for i in range(len(completed)):
        env = <list>completed[i]
        prob = _found.prob[i]
        if not prob > 0.0:
            continue
        keyed.append(((<_Plan>plans[i]).order, tuple([_get(ev, E_ARRIVAL) for ev in env]), i, prob))
    keyed.sort()
    cdef long long seq = c.seq
    for k in keyed:
        i = k[2]
        _emit_one(<_Plan>plans[i], <list>completed[i], src, k[3], _found.start[i], seq, arrival, out)
        seq += 1
    c.seq = seq


@cython.freelist(8192)
cdef class Match:
    """``ecq.match.Match``, compiled: the same constructor, attributes and methods (the
    functions of ecq.match). The engine makes a few matches per event at thousands of
    queries, and in CPython each was six allocations (the object, ``seq``, ``start``,
    ``attrs``, the events list and its items), each a read of a cold free block. Here
    the numbers are C values (made into Python objects when read), ``attrs`` is made
    when first read, the engine's matches hold their events inside until ``events`` is
    read, and the object comes from a free list (an array: no chain of cold reads)."""

    cdef public object query, src
    cdef object _events, _attrs
    # The engine's matches: their events (owned) until ``events`` is first read.
    cdef PyObject *ev[_INLINE_POS]
    cdef Py_ssize_t nev
    cdef public double start, end, prob
    cdef public long long seq, trigger

    def __init__(
        self, query, src, double start, double end, events, attrs=None, double prob=1.0, long long seq=-1,
        long long trigger=-1
    ):
        self.query = query
        self.src = src
        self.start = start
        self.end = end
        self._events = events
        self._attrs = attrs
        self.prob = prob
        self.seq = seq
        self.trigger = trigger

    def __dealloc__(self):
        self._drop_inline()

    cdef void _drop_inline(self) noexcept:
        cdef Py_ssize_t k
        for k in range(self.nev):
            Py_XDECREF(self.ev[k])
        self.nev = 0

    @property
    def events(self):
        cdef Py_ssize_t k
        if self._events is None:
            self._events = [<object>self.ev[k] for k in range(self.nev)]
            self._drop_inline()
        return self._events

    @events.setter
    def events(self, value):
        self._drop_inline()
        self._events = value

    @property
    def attrs(self):
        if self._attrs is None:
            self._attrs = {}
        return self._attrs

    @attrs.setter
    def attrs(self, value):
        self._attrs = value

    def __repr__(self):
        return _py_match().describe(self)

    def __reduce__(self):
        return (Match, _py_match().fields(self))

    def event_ids(self, name=None):
        """``events`` with each event replaced by ``name(event)`` (default: its ``id``, or
        its arrival index when it has none), keeping the nesting of groups."""
        return _py_match().event_ids(self, name)

    def arrivals(self):
        """``events`` as arrival indexes (nested the same way); what tests compare."""
        return _py_match().arrivals(self)

    def to_dict(self, name=None):
        """The wire form of §9."""
        return _py_match().to_dict(self, name)


cdef object _match_module = None


cdef object _py_match():
    # ecq.match, where the methods are (it imports this module: read when first needed).
    global _match_module
    if _match_module is None:
        import ecq.match
        _match_module = ecq.match
    return _match_module


cdef int _emit_one(
    _Plan plan, list env, src, double prob, double start, long long seq, arrival, list out
) except -1:
    # Match(name, src, start, end, env, None, prob, seq, arrival), field by field.
    # ``start``: the first event's (read by the assembly: that event is likely cold).
    cdef Match m = Match.__new__(Match)
    m.query = plan.name
    m.src = src
    m.start = start
    m.end = _getf(<object>PyList_GET_ITEM(env, len(env) - 1), E_END)
    cdef Py_ssize_t k, ln = PyList_GET_SIZE(env)
    cdef PyObject *p
    if ln <= _INLINE_POS:
        # Its own copy of the events: env goes back to the spares (_recycle).
        for k in range(ln):
            p = PyList_GET_ITEM(env, k)
            Py_INCREF(<object>p)
            m.ev[k] = p
        m.nev = ln
    else:
        m._events = env
    m.prob = prob
    m.seq = seq
    m.trigger = arrival
    out.append(m)
    plan.matches += 1
    return 0


def clean_siq(siq, double horizon):
    """``SIQ.clean``: drop instances from the front while their start is below
    ``horizon``, unlinking each from its chain; returns how many."""
    queue = siq.queue
    cdef dict last = siq.last
    cdef Py_ssize_t dropped = 0
    popleft = queue.popleft
    while queue and _getf(queue[0], E_START) < horizon:
        e = popleft()
        slot_set(e, E_PREV, None)
        pmb = _get(e, E_PMB)
        if type(pmb) is NativePMB:
            (<NativePMB>pmb).event = None
            (<NativePMB>pmb).prev = None
        slot_set(e, E_PMB, None)
        src = _get(e, E_SRC)
        if last.get(src) is e:
            del last[src]
        dropped += 1
    return dropped


# ------------------------------------------------------------------ reading events


cdef object _ABSENT = object()
cdef dict _names = {}


cdef inline object _seconds(object v):
    # A finite number of seconds as a float, or None (then Event.from_dict decides).
    cdef double x
    if type(v) is float:
        x = PyFloat_AS_DOUBLE(v)
    elif type(v) is int:
        try:
            x = float(v)
        except OverflowError:
            return None
    else:
        return None
    if x - x != 0.0:  # inf or nan
        return None
    return x


def event_from_dict(data, where=None):
    """``Event.from_dict``: a well-formed event given as a dict (exact types, as
    ``orjson`` gives them) is checked and built here; anything else goes to
    ``Event.from_dict``, which accepts or rejects it and names the mistake. The same
    Event either way (tests/ecq/test_accel.py)."""
    if type(data) is not dict:
        return _Event.from_dict(data, where)
    cdef dict d = <dict>data
    src = d.get("src")
    etype = d.get("type")
    start_o = d.get("start")
    cdef Py_ssize_t known = 3
    end_o = d.get("end", _ABSENT)
    if end_o is not _ABSENT:
        known += 1
    eid = d.get("id", _ABSENT)
    if eid is not _ABSENT:
        known += 1
    prob_o = d.get("prob", _ABSENT)
    if prob_o is not _ABSENT:
        known += 1
    attrs = d.get("attrs", _ABSENT)
    if attrs is not _ABSENT:
        known += 1
    if len(d) != known or not (type(src) is int or type(src) is str):
        return _Event.from_dict(data, where)
    if type(etype) is not str or not etype:
        return _Event.from_dict(data, where)
    # One str object per class name: the engine's dict lookups by class then find
    # their key by identity, and a million events do not hold a million copies.
    shared = _names.get(etype)
    if shared is not None:
        etype = shared
    elif len(_names) < 100_000:
        _names[etype] = etype
    start = _seconds(start_o)
    if start is None:
        return _Event.from_dict(data, where)
    if end_o is _ABSENT or end_o is None:
        end = start
    else:
        end = _seconds(end_o)
        if end is None or <double>end < <double>start:
            return _Event.from_dict(data, where)
    if eid is _ABSENT:
        eid = None
    elif eid is not None and not (type(eid) is int or type(eid) is str):
        return _Event.from_dict(data, where)
    if prob_o is _ABSENT or prob_o is None:
        prob = 1.0
    elif (type(prob_o) is float or type(prob_o) is int) and 0.0 < prob_o <= 1.0:
        prob = float(prob_o)
    else:
        return _Event.from_dict(data, where)
    cdef dict copied
    if attrs is _ABSENT or attrs is None:
        copied = {}
    elif type(attrs) is dict:
        for key, value in (<dict>attrs).items():
            if type(key) is not str:
                return _Event.from_dict(data, where)
            if type(value) is float:
                if value - value != 0.0:
                    return _Event.from_dict(data, where)
            elif not (type(value) is str or type(value) is int or type(value) is bool):
                return _Event.from_dict(data, where)
        copied = dict(<dict>attrs)
    else:
        return _Event.from_dict(data, where)
    # Event(src, etype, start, end, attrs, prob, eid), slot by slot.
    e = _Event.__new__(_Event)
    slot_set(e, E_SRC, src)
    slot_set(e, E_TYPE, etype)
    slot_set(e, E_START, start)
    slot_set(e, E_END, end)
    slot_set(e, E_ATTRS, copied)
    slot_set(e, E_PROB, prob)
    slot_set(e, E_ID, eid)
    slot_set(e, E_ARRIVAL, -1)
    slot_set(e, E_MOMENT, -1)
    slot_set(e, E_PARTS, None)
    slot_set(e, E_FLAT, None)
    slot_set(e, E_PRIMS, None)
    slot_set(e, E_PREV, None)
    slot_set(e, E_PMB, None)
    return e


# ----------------------------------------------------------------- writing matches


def match_dict(m):
    """``Match.to_dict()``: for a match of primitive events, its wire form built here
    (events named by id, or arrival index); anything else goes to ``to_dict``."""
    if type(m) is not Match:
        return m.to_dict()
    cdef Match c = <Match>m
    cdef list ids = []
    cdef Py_ssize_t k, ne = c.nev if c._events is None else len(<list?>c._events)
    for k in range(ne):
        e = <object>c.ev[k] if c._events is None else (<list>c._events)[k]
        if type(e) is not _Event or _get(e, E_PARTS) is not None:
            return m.to_dict()
        eid = _get(e, E_ID)
        ids.append(eid if eid is not None else _get(e, E_ARRIVAL))
    return {
        "query": c.query,
        "src": c.src,
        "start": c.start,
        "end": c.end,
        "events": ids,
        "attrs": {} if c._attrs is None else dict(c._attrs),
        "prob": c.prob,
        "seq": c.seq,
    }
