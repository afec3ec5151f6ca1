# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The filter index in the compiled kernel (ecq/filters.py has the algorithm and the
semantics): per attribute, numeric thresholds as C doubles bisected in C, string
thresholds through Python's bisect, hash tables of the kernel's Bits; the failures of
an event gathered in a scratch set of words, the passing set made once. Nothing is
converted per event.

A numeric threshold or event value that a double cannot hold exactly (an integer
beyond 2**53) is left to the Python index of its attribute, whose answer is converted:
such values do not occur in practice, and the result stays exact when they do."""

from cpython.dict cimport PyDict_GetItem
from cpython.list cimport PyList_GET_ITEM
from cpython.mem cimport PyMem_Free
from cpython.ref cimport PyObject
from libc.stdint cimport uint64_t

from ecq.kernel._bitset cimport (
    Bits,
    Words,
    bits_from_int,
    bits_from_words,
    bits_meet,
    bits_to_int,
    grow,
    words_clear,
    words_free,
    words_room,
)
from ecq.kernel._events cimport ev, ev_get

from bisect import bisect_left as _py_bisect_left, bisect_right as _py_bisect_right

__all__ = ["SlotIndex", "slot_bits"]

cdef extern from "Python.h":
    bint PyFloat_CheckExact(object o)
    double PyFloat_AS_DOUBLE(object o)
    bint PyLong_CheckExact(object o)
    bint PyUnicode_CheckExact(object o)
    long long PyLong_AsLongLongAndOverflow(object o, int *overflow) except? -1

cdef object _bisect_left = _py_bisect_left
cdef object _bisect_right = _py_bisect_right
# Integers a double holds exactly, and so compares exactly.
cdef long long _EXACT = 1LL << 53
cdef object _BOOL_TRUE = ("bool", True)
cdef object _BOOL_FALSE = ("bool", False)


cdef class NumBounds:
    def __dealloc__(self):
        PyMem_Free(self.t)
        PyMem_Free(self.inclusive)


cdef class StrBounds:
    pass


cdef class NativeAttr:
    pass


cdef class SlotIndex:
    """One SlotFilter's index in the kernel's form (see _filters.pxd)."""

    def __dealloc__(self):
        words_free(&self.failed)
        words_free(&self.out)


cdef inline bint _exact_number(object t):
    cdef int overflow = 0
    cdef long long i
    if PyFloat_CheckExact(t):
        return True
    i = PyLong_AsLongLongAndOverflow(t, &overflow)
    return not overflow and -_EXACT <= i <= _EXACT


cdef NumBounds _num_bounds(object b):
    # ecq.filters.Bounds of numbers, its thresholds as doubles.
    cdef NumBounds x = NumBounds.__new__(NumBounds)
    cdef Py_ssize_t i, n = len(b.t)
    x.n = n
    x.lower = b.lower
    x.t = <double *>grow(NULL, n * sizeof(double))
    x.inclusive = <char *>grow(NULL, n * sizeof(char))
    for i in range(n):
        x.t[i] = <double>b.t[i]
        x.inclusive[i] = 1 if b.inclusive[i] else 0
    x.fail = [bits_from_int(f) for f in b.fail]
    return x


cdef StrBounds _str_bounds(object b):
    cdef StrBounds x = StrBounds.__new__(StrBounds)
    x.t = list(b.t)
    x.inclusive = list(b.inclusive)
    x.lower = b.lower
    x.fail = [bits_from_int(f) for f in b.fail]
    return x


cdef NativeAttr _attr(object a):
    # An ecq.filters.AttrIndex (built) in the kernel's form.
    cdef NativeAttr x = NativeAttr.__new__(NativeAttr)
    if a.dirty:
        a.build()
    x.name = a.name
    x.index = a
    x.fallback = a.fallback
    x.has = bits_from_int(a.has)
    x.cmp_all = bits_from_int(a.cmp_all)
    x.not_num = bits_from_int(a.not_num)
    x.not_str = bits_from_int(a.not_str)
    x.has_equal = bits_from_int(a.has_equal)
    x.cmp_or_equal = bits_from_int(a.cmp_all | a.has_equal)
    x.exact = True
    num_lo, num_up, str_lo, str_up = a.bounds
    for b in (num_lo, num_up):
        if b is not None and not all(_exact_number(t) for t in b.t):
            x.exact = False
    x.num_lo = _num_bounds(num_lo) if num_lo is not None and x.exact else None
    x.num_up = _num_bounds(num_up) if num_up is not None and x.exact else None
    x.str_lo = _str_bounds(str_lo) if str_lo is not None else None
    x.str_up = _str_bounds(str_up) if str_up is not None else None
    x.equal, x.equal_true, x.equal_false = _by_key(a.equal)
    x.unequal, x.unequal_true, x.unequal_false = _by_key(a.unequal)
    return x


cdef tuple _by_key(dict table):
    """A Python hash table of =/!= keys as Bits: (the other keys, true's, false's), the
    booleans apart so that a test of a boolean value reads a field, not the table."""
    cdef dict rest = {}
    true_bits = false_bits = None
    for key, bits in table.items():
        if key == _BOOL_TRUE:
            true_bits = bits_from_int(bits)
        elif key == _BOOL_FALSE:
            false_bits = bits_from_int(bits)
        else:
            rest[key] = bits_from_int(bits)
    return rest, true_bits, false_bits


cdef SlotIndex slot_index(object slot):
    """The compiled form of an ecq.ecq.SlotFilter (its index built first)."""
    cdef SlotIndex x = SlotIndex.__new__(SlotIndex)
    index = slot.index
    x.all = bits_from_int(slot.always | index.all)
    x.attrs = [_attr(a) for a in index.attrs.values()]
    x.residual = [(pred, bits_from_int(bits)) for pred, bits in index.residual.values()]
    return x


# ------------------------------------------------------------------ per event


cdef inline int _or(Words *f, object b) except -1:
    # f |= b (b a Bits, or None for the empty set).
    cdef Bits x
    cdef Py_ssize_t i
    if b is None:
        return 0
    x = <Bits>b
    if x.n > f.cap:
        words_room(f, x.n)
    for i in range(x.n):
        f.w[i] |= x.w[i]
    if x.n > f.n:
        f.n = x.n
    return 0


cdef inline int _or_andnot(Words *f, Bits a, object b) except -1:
    # f |= a & ~b (b a Bits or None).
    cdef Bits x
    cdef Py_ssize_t i
    if b is None:
        return _or(f, a)
    x = <Bits>b
    if a.n > f.cap:
        words_room(f, a.n)
    for i in range(a.n):
        f.w[i] |= a.w[i] & ~(x.w[i] if i < x.n else 0)
    if a.n > f.n:
        f.n = a.n
    return 0


cdef inline Py_ssize_t _num_at(NumBounds b, double v) noexcept:
    # ecq.filters.Bounds.at for a double.
    cdef Py_ssize_t lo = 0, hi = b.n, mid
    if b.lower:
        while lo < hi:  # bisect_left
            mid = (lo + hi) >> 1
            if b.t[mid] < v:
                lo = mid + 1
            else:
                hi = mid
        if lo < b.n and b.t[lo] == v and b.inclusive[lo]:
            lo += 1
        return lo
    while lo < hi:  # bisect_right
        mid = (lo + hi) >> 1
        if v < b.t[mid]:
            hi = mid
        else:
            lo = mid + 1
    if lo > 0 and b.t[lo - 1] == v and b.inclusive[lo - 1]:
        lo -= 1
    return lo


cdef inline Py_ssize_t _str_at(StrBounds b, object v) except -1:
    cdef Py_ssize_t i, n = len(b.t)
    if b.lower:
        i = _bisect_left(b.t, v)
        if i < n and b.t[i] == v and b.inclusive[i]:
            i += 1
        return i
    i = _bisect_right(b.t, v)
    if i > 0 and b.t[i - 1] == v and b.inclusive[i - 1]:
        i -= 1
    return i


cdef int _failed(NativeAttr a, object e, object attrs, Words *f) except -1:
    # f |= the filters e fails on attribute a (ecq.filters.AttrIndex.failed).
    cdef PyObject *p = PyDict_GetItem(attrs, a.name)
    cdef double d
    cdef long long i
    cdef int overflow = 0
    cdef object got
    if p == NULL:
        if not a.fallback:
            return _or(f, a.has)
        v = getattr(e, a.name)
    else:
        v = <object>p
    if PyFloat_CheckExact(v) or PyLong_CheckExact(v):
        if PyFloat_CheckExact(v):
            d = PyFloat_AS_DOUBLE(v)
            if d != d:  # NaN: every comparison false, unequal to everything
                return _or(f, a.cmp_or_equal)
        else:
            i = PyLong_AsLongLongAndOverflow(v, &overflow)
            if overflow or not (-_EXACT <= i <= _EXACT) or not a.exact:
                return _or(f, bits_from_int(a.index.failed(e)))
            d = <double>i
        if not a.exact:
            return _or(f, bits_from_int(a.index.failed(e)))
        _or(f, a.not_num)
        if a.num_lo is not None:
            _or(f, a.num_lo.fail[_num_at(a.num_lo, d)])
        if a.num_up is not None:
            _or(f, a.num_up.fail[_num_at(a.num_up, d)])
    elif PyUnicode_CheckExact(v):
        _or(f, a.not_str)
        if a.str_lo is not None:
            _or(f, a.str_lo.fail[_str_at(a.str_lo, v)])
        if a.str_up is not None:
            _or(f, a.str_up.fail[_str_at(a.str_up, v)])
    elif v is True or v is False:
        _or(f, a.cmp_all)
        if a.has_equal.n:
            _or_andnot(f, a.has_equal, a.equal_true if v is True else a.equal_false)
        return _or(f, a.unequal_true if v is True else a.unequal_false)
    else:
        return _or(f, a.cmp_or_equal)  # another kind: only != holds
    if a.has_equal.n:
        got = a.equal.get(v)
        _or_andnot(f, a.has_equal, got)
    if a.unequal:
        _or(f, a.unequal.get(v))
    return 0


cdef Bits slot_passing(SlotIndex x, object e):
    """The queries of the slot whose filter ``e`` passes (SlotFilter.passing)."""
    cdef Words *f = &x.failed
    cdef Words *o = &x.out
    cdef Bits passed = x.all
    cdef Bits rb
    cdef Py_ssize_t i
    if x.attrs:
        words_clear(f)
        attrs = ev_get(ev(e).attrs, "attrs")
        for a in x.attrs:
            _failed(<NativeAttr>a, e, attrs, f)
        if f.n:
            words_room(o, passed.n)
            for i in range(passed.n):
                o.w[i] = passed.w[i] & ~(f.w[i] if i < f.n else 0)
            passed = bits_from_words(o.w, passed.n)
    for pred, r in x.residual:
        rb = <Bits>r
        if bits_meet(passed, rb) and not pred(e):
            words_room(o, passed.n)
            for i in range(passed.n):
                o.w[i] = passed.w[i] & ~(rb.w[i] if i < rb.n else 0)
            passed = bits_from_words(o.w, passed.n)
    return passed


def slot_bits(object slot, object e):
    """``slot.passing(e)`` (an ecq.ecq.SlotFilter: the conjunctions' filters of a class)
    in C, as a Python int. The compiled index is made on first use and kept on the
    slot (``SlotFilter.native``), which drops it whenever a filter comes or goes."""
    native = slot.native
    if native is None:
        native = slot.native = slot_index(slot)
    return bits_to_int(slot_passing(<SlotIndex>native, e))
