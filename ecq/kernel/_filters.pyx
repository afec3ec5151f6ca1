# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The filter index in the compiled kernel (ecq/compiler/filters.py has the algorithm and the
semantics), over the local numbers of ecq.compiler.filters.LocalSlots: one index for all the
positions a class fills in the sequences (one event's values are looked up once for
all of them), its sets L words wide where L is the class's own queries / 64, not all
the registered queries'.

Everything an event reads lies in a few arrays: the attributes (C structs), the numeric
cuts (C doubles, as a tree of blocks of 16) and every set (per cell of the numeric
cuts, the failures there; the string families' cumulative failure sets, the hash
tables' sets, ...) in one block of words. Per event and attribute: one walk down the
cuts' tree and an OR of L words (a number), plus the hash tables when the attribute
has = or != atoms; then the residual predicates of the filters still passing. What the
event passes (Passing) is those L words of failures, which the test phase reads in
place (passing_at, QuerySet); only position 0's passing queries are put back at their
query numbers (O(result)), by the insert phase (passing_init), since the PMB and the
summaries' rows keep them.

A numeric threshold or event value that a double cannot hold exactly (an integer
beyond 2**53) is left to the Python index of its attribute (over the same local
numbers), whose answer is converted: such values do not occur in practice, and the
result stays exact when they do."""

from cpython.dict cimport PyDict_GetItem
from cpython.list cimport PyList_GET_ITEM
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.ref cimport PyObject
from libc.math cimport INFINITY
from libc.stdint cimport uint32_t, uint64_t, uintptr_t
from libc.string cimport memcpy, memset

from ecq.kernel._bitset cimport Bits, bits_and, bits_from_int, bits_to_int, ctz64, grow, popcount64, prefetch_lines
from ecq.kernel._events cimport ev, ev_get

from bisect import bisect_left as _py_bisect_left, bisect_right as _py_bisect_right

from ecq.compiler.filters import LocalSlots

__all__ = ["Passing", "SlotIndex", "slot_bits"]

cdef extern from "Python.h":
    bint PyFloat_CheckExact(object o)
    double PyFloat_AS_DOUBLE(object o)
    bint PyLong_CheckExact(object o)
    bint PyUnicode_CheckExact(object o)
    long long PyLong_AsLongLongAndOverflow(object o, int *overflow) except? -1
    Py_ssize_t PyLong_AsSsize_t(object o) except? -1

cdef object _bisect_left = _py_bisect_left
cdef object _bisect_right = _py_bisect_right
# Integers a double holds exactly, and so compares exactly.
cdef long long _EXACT = 1LL << 53
cdef object _BOOL_TRUE = ("bool", True)
cdef object _BOOL_FALSE = ("bool", False)


cdef class StrBounds:
    pass


cdef class SlotIndex:
    """The compiled index of one or several places (see _filters.pxd)."""

    def __dealloc__(self):
        PyMem_Free(self.start)
        PyMem_Free(self.width)
        PyMem_Free(self.glob)
        PyMem_Free(self.attrs)
        PyMem_Free(self.sets)
        PyMem_Free(self.t_mem)
        PyMem_Free(self.pa)
        PyMem_Free(self.pv)
        PyMem_Free(self.pb)
        PyMem_Free(self.scratch)
        PyMem_Free(self.key)
        PyMem_Free(self.mem)
        PyMem_Free(self.rank)
        PyMem_Free(self.moff)
        PyMem_Free(self.mn)


cdef class Passing:
    """An instance's filters evaluated over a class index (see _filters.pxd)."""

    def __dealloc__(self):
        PyMem_Free(self.fail)

    def by_position(self):
        """Per position, the queries that pass it, as a Python int of query numbers
        (what the pure kernel's ``passing`` gives; for tests and readers)."""
        cdef Py_ssize_t p
        return {self.x.keys[p]: bits_to_int(_place(self.x, self.fail, p)) for p in range(self.x.nplaces)}

    def starts(self, more):
        """Position 0's passing queries among ``more`` (a Python int of query numbers),
        as the insert phase makes them (passing_init); None when no place is position
        0. For tests."""
        got = passing_init(self, bits_from_int(more))
        return None if got is None else bits_to_int(got)


# ------------------------------------------------------------------- making


cdef class _Sets:
    # The sets of an index being made (Python ints of local numbers), each given its
    # offset in the block of words it becomes.
    cdef list made
    cdef Py_ssize_t L

    def __cinit__(self, Py_ssize_t L):
        self.made = []
        self.L = L

    cdef Py_ssize_t put(self, object bits) except -2:
        # The offset of ``bits`` (-1: the empty set, stored nowhere).
        if not bits:
            return -1
        return self.always(bits)

    cdef Py_ssize_t always(self, object bits) except -2:
        # As put, the empty set stored too (a family's failure sets are indexed).
        self.made.append(bits)
        return (len(self.made) - 1) * self.L

    cdef uint64_t *block(self) except NULL:
        cdef uint64_t *w = <uint64_t *>grow(NULL, len(self.made) * self.L * sizeof(uint64_t))
        cdef Py_ssize_t i
        cdef Bits b
        memset(w, 0, len(self.made) * self.L * sizeof(uint64_t))
        for i in range(len(self.made)):
            b = bits_from_int(self.made[i])
            memcpy(w + i * self.L, b.w, b.n * sizeof(uint64_t))
        return w


cdef inline bint _exact_number(object t):
    cdef int overflow = 0
    cdef long long i
    if PyFloat_CheckExact(t):
        return True
    i = PyLong_AsLongLongAndOverflow(t, &overflow)
    return not overflow and -_EXACT <= i <= _EXACT


cdef dict _table(dict table, _Sets sets, Py_ssize_t *true_at, Py_ssize_t *false_at):
    """A hash table of =/!= keys as offsets, the booleans apart (``true_at``,
    ``false_at``) so that a test of a boolean value reads a field, not the table."""
    cdef dict rest = {}
    true_at[0] = false_at[0] = -1
    for key, bits in table.items():
        if key == _BOOL_TRUE:
            true_at[0] = sets.put(bits)
        elif key == _BOOL_FALSE:
            false_at[0] = sets.put(bits)
        else:
            rest[key] = sets.put(bits)
    return rest


cdef int _attr(SlotIndex x, AttrC *c, object a, _Sets sets, list numeric) except -1:
    # c: the AttrIndex ``a`` (over local numbers) in the kernel's form; its numeric
    # families are noted in ``numeric`` (thresholds written once all are known).
    if a.dirty:
        a.build()
    x.refs += [a.name, a]
    c.name = <PyObject *>a.name
    c.index = <PyObject *>a
    c.fallback = a.fallback
    c.has = sets.put(a.has)
    c.cmp_all = sets.put(a.cmp_all)
    c.not_num = sets.put(a.not_num)
    c.not_str = sets.put(a.not_str)
    c.has_equal = sets.put(a.has_equal)
    c.cmp_or_equal = sets.put(a.cmp_all | a.has_equal)
    equal = _table(a.equal, sets, &c.eq_true, &c.eq_false)
    unequal = _table(a.unequal, sets, &c.ne_true, &c.ne_false)
    x.refs += [equal, unequal]
    c.equal = <PyObject *>equal if equal else NULL
    c.unequal = <PyObject *>unequal if unequal else NULL
    str_lo, str_up = a.bounds[2], a.bounds[3]
    c.exact = all(_exact_number(t) for t in a.cuts)
    c.ncuts = len(a.cuts)
    c.cells = -1
    if c.exact and a.cuts:
        numeric.append((<Py_ssize_t>c, a))
    c.str_lo = _str_bounds(x, str_lo, sets)
    c.str_up = _str_bounds(x, str_up, sets)
    return 0


cdef PyObject *_str_bounds(SlotIndex x, object b, _Sets sets) except? NULL:
    if b is None:
        return NULL
    cdef StrBounds s = StrBounds.__new__(StrBounds)
    s.t = list(b.t)
    s.inclusive = list(b.inclusive)
    s.lower = b.lower
    s.fail = sets.always(b.fail[0])
    for f in b.fail[1:]:
        sets.always(f)
    x.refs.append(s)
    return <PyObject *>s


cdef SlotIndex _made(list keys, list places):
    """The compiled index of ``places`` ((queries without a filter, FilterIndex) per
    place; ``keys`` their positions). O(F log F + F·L) for F filters."""
    cdef SlotIndex x = SlotIndex.__new__(SlotIndex)
    cdef Py_ssize_t i, p, n, top, at
    cdef Bits alw
    cdef AttrC *c
    local = LocalSlots(places)
    x.nplaces = len(keys)
    x.keys = keys
    x.refs = []
    x.always = [bits_from_int(a) for a in local.always]
    glob = local.glob
    # A place's queries: those without a filter there and those with one (the set its
    # numbers in glob were read from; summing a shifted bit per query instead was
    # quadratic in the width of the query numbers, 0.7 s at 100,000 demo queries).
    x.every = [bits_from_int(a | f) for a, f in zip(local.always, local.filtered)]
    x.L = (len(glob) + 63) >> 6
    cdef _Sets sets = _Sets(x.L)
    x.start = <Py_ssize_t *>grow(NULL, (x.nplaces + 1) * sizeof(Py_ssize_t))
    x.width = <Py_ssize_t *>grow(NULL, (x.nplaces + 1) * sizeof(Py_ssize_t))
    x.glob = <uint32_t *>grow(NULL, (len(glob) + 1) * sizeof(uint32_t))
    for i in range(len(glob)):
        x.glob[i] = <uint32_t>(glob[i] if glob[i] >= 0 else 0)
    for p in range(x.nplaces + 1):
        x.start[p] = local.starts[p]
    for p in range(x.nplaces):
        alw = <Bits>x.always[p]
        top = max([alw.n * 64 - 1] + [g for g in glob[x.start[p] : x.start[p + 1]] if g >= 0])
        x.width[p] = (top >> 6) + 1 if top >= 0 else 0
    index = local.index
    x.valid = sets.put(index.all)
    x.nattrs = len(index.attrs)
    x.attrs = <AttrC *>grow(NULL, (x.nattrs + 1) * sizeof(AttrC))
    memset(x.attrs, 0, (x.nattrs + 1) * sizeof(AttrC))
    cdef list numeric = []
    for i, a in enumerate(index.attrs.values()):
        _attr(x, &x.attrs[i], a, sets, numeric)
    n = sum([_tree_size(len(a.cuts)) for _, a in numeric])
    # + 8: room to start the trees on a cache line.
    x.t_mem = grow(NULL, (n + 8) * sizeof(double))
    x.t = <double *>x.t_mem + ((-<uintptr_t>x.t_mem) & 63) // sizeof(double)
    x.pa = <Py_ssize_t *>grow(NULL, (x.nattrs + 1) * sizeof(Py_ssize_t))
    x.pv = <double *>grow(NULL, (x.nattrs + 1) * sizeof(double))
    x.pb = <Py_ssize_t *>grow(NULL, (x.nattrs + 1) * sizeof(Py_ssize_t))
    at = 0
    for address, a in numeric:
        c = <AttrC *><Py_ssize_t>address
        at = _tree(x, c, a.cuts, at)
        c.cells = sets.always(a.cells[0])
        for bits in a.cells[1:]:
            sets.always(bits)
    x.residual = [(pred, sets.put(bits)) for pred, bits in index.residual_bits()]
    x.sets = sets.block()
    x.scratch = <uint64_t *>grow(NULL, (x.L + 1) * sizeof(uint64_t))
    x.failed = x.scratch
    _members(x, glob)
    return x


# The numeric cuts are bisected per event, and at 10,000 queries a class's cuts (~600
# an attribute) are cold by the next event of the class: a binary search is then ~10
# dependent loads from memory. As a tree of blocks of 16 (two cache lines each, the
# count in a block branchless), it is one load per level, ~3 levels, and the levels of
# an event's attributes are walked side by side, so their loads overlap (_cells).
cdef enum:
    _B = 16  # cuts per block
    _MAXDEPTH = 8  # levels (AttrC.lev): 16 ** 8 cuts


cdef Py_ssize_t _tree_size(Py_ssize_t n):
    # The doubles a tree of n cuts takes (every level padded to whole blocks).
    cdef Py_ssize_t size = 0
    while True:
        n = (n + _B - 1) // _B
        size += n * _B
        if n <= 1:
            return size


cdef Py_ssize_t _tree(SlotIndex x, AttrC *c, list cuts, Py_ssize_t at) except -1:
    # c's cuts written as a tree from offset ``at`` (a multiple of 8) on; the next free
    # offset. Level k + 1 holds the last entry of each block of level k, so the number
    # of blocks of level k wholly below a value v is the count of level k + 1's entries
    # below v.
    cdef Py_ssize_t k = 0, i, n = len(cuts), blocks
    cdef double *level
    cdef const double *below
    c.ncuts = n
    c.cuts = at
    while True:
        if k == _MAXDEPTH:
            raise OverflowError(f"{len(cuts)} thresholds on one attribute")
        blocks = (n + _B - 1) // _B
        c.lev[k] = at
        c.nblk[k] = blocks
        level = x.t + at
        if k == 0:
            for i in range(n):
                level[i] = <double>cuts[i]
        else:
            # Each block's last entry, but +inf for the last block: no value is above
            # it, so the walk never goes past the last block (a value above every cut
            # ends in it, at its end).
            below = x.t + c.lev[k - 1]
            for i in range(n - 1):
                level[i] = below[i * _B + _B - 1]
            level[n - 1] = INFINITY
        for i in range(n, blocks * _B):
            level[i] = INFINITY
        at += blocks * _B
        k += 1
        if blocks <= 1:
            c.depth = k
            return at
        n = blocks


cdef int _members(SlotIndex x, list glob) except -1:
    # Per place, its filtered queries over query numbers with their ranks (mem, rank),
    # and the keys as C integers.
    cdef Py_ssize_t p, i, w, total = 0, at
    cdef list members = []
    x.key = <Py_ssize_t *>grow(NULL, (x.nplaces + 1) * sizeof(Py_ssize_t))
    x.moff = <Py_ssize_t *>grow(NULL, (x.nplaces + 1) * sizeof(Py_ssize_t))
    x.mn = <Py_ssize_t *>grow(NULL, (x.nplaces + 1) * sizeof(Py_ssize_t))
    x.p0 = -1
    for p in range(x.nplaces):
        x.key[p] = x.keys[p]
        if x.key[p] == 0:
            x.p0 = p
        mine = [g for g in glob[x.start[p] : x.start[p + 1]] if g >= 0]
        members.append(mine)
        x.moff[p] = total
        x.mn[p] = (mine[len(mine) - 1] >> 6) + 1 if mine else 0  # (no wraparound here)
        total += x.mn[p]
    x.mem = <uint64_t *>grow(NULL, (total + 1) * sizeof(uint64_t))
    x.rank = <uint32_t *>grow(NULL, (total + 1) * sizeof(uint32_t))
    memset(x.mem, 0, (total + 1) * sizeof(uint64_t))
    for p in range(x.nplaces):
        at = x.moff[p]
        for g in members[p]:
            x.mem[at + (g >> 6)] |= (<uint64_t>1) << (g & 63)
        i = 0
        for w in range(x.mn[p]):
            x.rank[at + w] = <uint32_t>i
            i += popcount64(x.mem[at + w])
    return 0


cdef SlotIndex slot_index(object slot):
    """The compiled form of an ecq.structures.ecq.SlotFilter (one place), kept on the slot
    (``SlotFilter.native``, which it drops whenever a filter comes or goes)."""
    native = slot.native
    if native is not None and (<SlotIndex>native).nplaces == 1:
        return <SlotIndex>native
    cdef SlotIndex x = _made([0], [(slot.always, slot.index)])
    slot.native = x
    return x


cdef SlotIndex class_index(dict slots):
    """The compiled form of a class's sequence positions (ECQ.seq_filters: position ->
    SlotFilter), one index for all of them. Kept on the SlotFilters (``native``, which
    each drops when one of its filters comes or goes), so a class whose filters did not
    change keeps its index when other queries come and go."""
    cdef list keys = list(slots)
    cached = None
    for k in keys:
        native = slots[k].native
        if native is None or (cached is not None and native is not cached):
            cached = None
            break
        cached = native
    if cached is not None and (<SlotIndex>cached).keys == keys:
        return <SlotIndex>cached
    cdef SlotIndex x = _made(keys, [(slots[k].always, slots[k].index) for k in keys])
    for k in keys:
        slots[k].native = x
    return x


# ------------------------------------------------------------------ per event


cdef inline void _or(SlotIndex x, Py_ssize_t at) noexcept:
    # failed |= the set at ``at`` (-1: the empty set).
    cdef Py_ssize_t i
    cdef const uint64_t *s
    if at < 0:
        return
    s = x.sets + at
    for i in range(x.L):
        x.failed[i] |= s[i]


cdef inline void _or_andnot(SlotIndex x, Py_ssize_t a, Py_ssize_t b) noexcept:
    # failed |= a & ~b (offsets; -1: the empty set).
    cdef Py_ssize_t i
    cdef const uint64_t *s
    cdef const uint64_t *u
    if a < 0:
        return
    if b < 0:
        _or(x, a)
        return
    s = x.sets + a
    u = x.sets + b
    for i in range(x.L):
        x.failed[i] |= s[i] & ~u[i]


cdef int _or_int(SlotIndex x, object bits) except -1:
    # failed |= a Python int of local numbers (what the Python index answered).
    cdef Bits b = bits_from_int(bits)
    cdef Py_ssize_t i
    for i in range(b.n):
        x.failed[i] |= b.w[i]
    return 0


cdef inline Py_ssize_t _below(const double *block, double v) noexcept:
    # How many of a block's 16 entries are below v: no branch on the comparisons (the
    # values of events are unpredictable).
    cdef Py_ssize_t k, c = 0
    for k in range(_B):
        c += block[k] < v
    return c


cdef void _cells(SlotIndex x, Py_ssize_t n) noexcept:
    # failed |= the cell's set of each of the n numbers noted by _failed (attribute
    # x.pa[j], value x.pv[j]): the cell of v among the cuts (ecq.compiler.filters.AttrIndex.
    # failed) is 2 * bisect_left(cuts, v), + 1 when v is a cut. The trees are walked
    # one level of every attribute at a time, so that their loads overlap.
    cdef Py_ssize_t j, step, k, i, top = 0
    cdef AttrC *a
    cdef double v
    cdef Py_ssize_t lines
    for j in range(n):
        a = &x.attrs[x.pa[j]]
        x.pb[j] = 0
        # The small upper levels asked for at once (8 lines: at 600 cuts all but the
        # cuts themselves), so that only the last level and the cell wait in turn.
        lines = 0
        k = a.depth - 1
        while k > 0 and lines + 2 * a.nblk[k] <= 8:
            prefetch_lines(x.t + a.lev[k], <int>(2 * a.nblk[k]))
            lines += 2 * a.nblk[k]
            k -= 1
        if a.depth > top:
            top = a.depth
    for step in range(top):
        for j in range(n):
            a = &x.attrs[x.pa[j]]
            k = a.depth - 1 - step
            if k >= 0:
                # bisect_left at level k: 16 per block wholly below v, and those below
                # v in the block it falls in.
                x.pb[j] = x.pb[j] * _B + _below(x.t + a.lev[k] + x.pb[j] * _B, x.pv[j])
    for j in range(n):
        a = &x.attrs[x.pa[j]]
        i = x.pb[j]
        v = x.pv[j]
        _or(x, a.cells + (2 * i + 1 if i < a.ncuts and x.t[a.cuts + i] == v else 2 * i) * x.L)


cdef int _str_fail(SlotIndex x, PyObject *p, object v) except -1:
    # failed |= the failure set of string family p (or nothing, p NULL) for v.
    cdef StrBounds b
    cdef Py_ssize_t i, n
    if p == NULL:
        return 0
    b = <StrBounds>p
    n = len(b.t)
    if b.lower:
        i = _bisect_left(b.t, v)
        if i < n and b.t[i] == v and b.inclusive[i]:
            i += 1
    else:
        i = _bisect_right(b.t, v)
        if i > 0 and b.t[i - 1] == v and b.inclusive[i - 1]:
            i -= 1
    _or(x, b.fail + i * x.L)
    return 0


cdef inline Py_ssize_t _offset(PyObject *table, object key) except? -2:
    # The offset the hash table gives ``key`` (-1: none).
    cdef PyObject *got
    if table == NULL:
        return -1
    got = PyDict_GetItem(<object>table, key)
    return PyLong_AsSsize_t(<object>got) if got != NULL else -1


cdef int _failed(SlotIndex x, AttrC *a, object e, object attrs, Py_ssize_t j) except -1:
    # failed |= the filters e fails on attribute a (ecq.compiler.filters.AttrIndex.failed); 1
    # when a number's cell is left to _cells (its value noted in x.pv[j]), else 0.
    cdef PyObject *p = PyDict_GetItem(attrs, <object>a.name)
    cdef int noted = 0
    cdef double d
    cdef long long i
    cdef int overflow = 0
    if p == NULL:
        if not a.fallback:
            _or(x, a.has)
            return 0
        v = getattr(e, <object>a.name)
    else:
        v = <object>p
    if PyFloat_CheckExact(v) or PyLong_CheckExact(v):
        if PyFloat_CheckExact(v):
            d = PyFloat_AS_DOUBLE(v)
            if d != d:  # NaN: every comparison false, unequal to everything
                _or(x, a.cmp_or_equal)
                return 0
        else:
            i = PyLong_AsLongLongAndOverflow(v, &overflow)
            if overflow or not (-_EXACT <= i <= _EXACT):
                return _or_int(x, (<object>a.index).failed(e))
            d = <double>i
        if not a.exact:
            return _or_int(x, (<object>a.index).failed(e))
        if a.cells < 0:
            _or(x, a.not_num)
        else:
            x.pv[j] = d
            noted = 1
    elif PyUnicode_CheckExact(v):
        _or(x, a.not_str)
        _str_fail(x, a.str_lo, v)
        _str_fail(x, a.str_up, v)
    elif v is True or v is False:
        _or(x, a.cmp_all)
        _or_andnot(x, a.has_equal, a.eq_true if v is True else a.eq_false)
        _or(x, a.ne_true if v is True else a.ne_false)
        return 0
    else:
        _or(x, a.cmp_or_equal)  # another kind: only != holds
        return 0
    _or_andnot(x, a.has_equal, _offset(a.equal, v))
    _or(x, _offset(a.unequal, v))
    return noted


cdef int _fail(SlotIndex x, object e, uint64_t *out) except -1:
    # out (L words): the local numbers whose filter e fails. The helpers write to
    # x.failed, pointed at ``out`` for this call only (an instance's own block, written
    # once rather than made in the index's scratch and copied).
    cdef Py_ssize_t i, k, at, noted = 0
    cdef const uint64_t *s
    cdef bint live
    x.failed = out
    memset(x.failed, 0, x.L * sizeof(uint64_t))
    if x.nattrs:
        attrs = ev_get(ev(e).attrs, "attrs")
        for i in range(x.nattrs):
            if _failed(x, &x.attrs[i], e, attrs, noted):
                x.pa[noted] = i
                noted += 1
        if noted:
            _cells(x, noted)
    for pred, off in x.residual:
        # Only the filters whose atoms passed (and are not failed yet) are asked.
        at = off
        s = x.sets + at
        live = False
        for k in range(x.L):
            if s[k] & ~x.failed[k]:
                live = True
                break
        if live and not pred(e):
            _or(x, at)
    return 0


cdef Bits _place(SlotIndex x, const uint64_t *failed, Py_ssize_t p, Bits mask=None):
    # The queries of place p whose filter passed (``failed``: the filters failed), as
    # query numbers, and among ``mask`` when given: when fewer of its filtered queries
    # pass than fail, its queries without a filter with the passing ones put back at
    # their numbers; else all its queries with the failing ones taken out.
    # O(words + min(passing, failing)).
    cdef Py_ssize_t lo = x.start[p] >> 6, hi = (x.start[p + 1] + 63) >> 6, n = x.width[p], i, j
    cdef Py_ssize_t passing = 0, failing = 0
    cdef Bits b, base
    cdef uint64_t word, flip, bit
    cdef uint32_t g
    cdef const uint64_t *valid = x.sets + x.valid
    if lo == hi:
        return <Bits>x.always[p] if mask is None else bits_and(<Bits>x.always[p], mask)
    for i in range(lo, hi):
        passing += popcount64(valid[i] & ~failed[i])
        failing += popcount64(valid[i] & failed[i])
    if passing <= failing:
        base = <Bits>x.always[p]
        flip = 0  # the passing ones are set
    else:
        base = <Bits>x.every[p]
        flip = ~(<uint64_t>0)  # the failing ones are cleared
    if mask is not None and mask.n < n:
        n = mask.n
    b = Bits.__new__(Bits)
    b.w = <uint64_t *>PyMem_Malloc((n + 1) * sizeof(uint64_t))
    if b.w == NULL:
        raise MemoryError()
    if mask is None:
        # (base.n <= n: the width covers every query of the place)
        memcpy(b.w, base.w, base.n * sizeof(uint64_t))
        memset(b.w + base.n, 0, (n - base.n) * sizeof(uint64_t))
    else:
        for i in range(n):
            b.w[i] = (base.w[i] if i < base.n else 0) & mask.w[i]
    for i in range(lo, hi):
        word = valid[i] & (~failed[i] ^ flip)
        while word:
            j = (i << 6) + ctz64(word)
            g = x.glob[j]
            word &= word - 1
            if g >> 6 >= n:
                continue
            bit = (<uint64_t>1) << (g & 63)
            if flip:
                b.w[g >> 6] &= ~bit  # (not there when the mask took it out)
            elif mask is None or mask.w[g >> 6] & bit:
                b.w[g >> 6] |= bit
    while n > 0 and b.w[n - 1] == 0:
        n -= 1
    b.n = n
    return b


cdef Bits slot_passing(SlotIndex x, object e):
    """The queries of a one-place index whose filter ``e`` passes (SlotFilter.passing)."""
    _fail(x, e, x.scratch)
    return _place(x, x.scratch, 0)


cdef Passing slots_passing(SlotIndex x, object e):
    """What ``e`` passes at each place (position) of the class index ``x``: its failed
    filters over local numbers, read in place by the test phase (passing_at; position
    0's as query numbers when asked for: passing_first, passing_init).
    O(attributes · log F + L words), not O(result) per place."""
    cdef Passing P = Passing.__new__(Passing)
    cdef Py_ssize_t p, i, lo, hi
    cdef const uint64_t *valid = x.sets + x.valid
    P.x = x
    P.fail = <uint64_t *>grow(NULL, (x.L + 1) * sizeof(uint64_t) + x.nplaces)
    P.live = <unsigned char *>(P.fail + x.L + 1)
    _fail(x, e, P.fail)
    for p in range(x.nplaces):
        P.live[p] = (<Bits>PyList_GET_ITEM(x.always, p)).n > 0
        if not P.live[p]:
            lo = x.start[p] >> 6
            hi = (x.start[p + 1] + 63) >> 6
            for i in range(lo, hi):
                if valid[i] & ~P.fail[i]:
                    P.live[p] = 1
                    break
    return P


cdef Bits passing_first(Passing P):
    """Position 0's passing queries as query numbers (None: no place is position 0),
    made on first use and kept (_phases.test asks for them when some query ends
    there)."""
    if P.first is None and P.x.p0 >= 0:
        P.first = _place(P.x, P.fail, P.x.p0)
    return P.first


cdef Bits passing_init(Passing P, Bits more):
    """passing_first(P) & ``more`` (the queries that go on from position 0: what the
    instance starts, kept in its PMB and its source's row), in one pass over the words
    (None: no place is position 0)."""
    if P.x.p0 < 0:
        return None
    if P.first is not None:
        return bits_and(P.first, more)
    return _place(P.x, P.fail, P.x.p0, more)


def slot_bits(object slot, object e):
    """``slot.passing(e)`` (an ecq.structures.ecq.SlotFilter: the conjunctions' filters of a class)
    in C, as a Python int. The compiled index is made on first use and kept on the
    slot (``SlotFilter.native``), which drops it whenever a filter comes or goes."""
    return bits_to_int(slot_passing(slot_index(slot), e))
