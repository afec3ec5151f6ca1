# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Query bitsets in the kernel's own memory (see _bitset.pxd), and their conversion
from and to Python ints through public API only (_portable.h)."""

cimport cython
from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc
from libc.stdint cimport uint32_t, uint64_t
from libc.string cimport memcpy, memset

cdef extern from "_portable.h":
    Py_ssize_t scemon_int_words(object x) except -1
    int scemon_int_fill(object x, uint64_t *w, Py_ssize_t n) except -1
    object scemon_int_from_words(const uint64_t *w, Py_ssize_t n)

__all__ = ["Bits"]


@cython.freelist(256)
cdef class Bits:
    """A set of query numbers as 64-bit words (immutable). ``Bits.from_int(x)`` and
    ``to_int()`` convert from and to the Python int with the same bits; ``&``, ``|``
    and ``==`` are the kernel's own operations, exposed for tests."""

    def __dealloc__(self):
        PyMem_Free(self.w)

    @staticmethod
    def from_int(x):
        return bits_from_int(x)

    def to_int(self):
        return bits_to_int(self)

    @property
    def words(self):
        return self.n

    def __and__(self, other):
        return bits_and(<Bits?>self, <Bits?>other)

    def __or__(self, other):
        return bits_or(<Bits?>self, <Bits?>other)

    def __eq__(self, other):
        cdef Bits o
        if type(other) is not Bits:
            return NotImplemented
        o = <Bits>other
        return self.n == o.n and (self.n == 0 or memcmp_words(self.w, o.w, self.n))

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    __hash__ = None

    def __contains__(self, Py_ssize_t k):
        return k >= 0 and bits_has(self, <size_t>k)

    def __repr__(self):
        return f"Bits({bits_to_int(self):#x})"


cdef bint memcmp_words(const uint64_t *a, const uint64_t *b, Py_ssize_t n) noexcept:
    cdef Py_ssize_t i
    for i in range(n):
        if a[i] != b[i]:
            return False
    return True


cdef Bits _alloc(Py_ssize_t n):
    # A Bits of n zeroed words (the caller trims).
    cdef Bits b = Bits.__new__(Bits)
    if n:
        b.w = <uint64_t *>PyMem_Malloc(n * sizeof(uint64_t))
        if b.w == NULL:
            raise MemoryError()
        memset(b.w, 0, n * sizeof(uint64_t))
    b.n = n
    return b


cdef inline void _trim(Bits b) noexcept:
    while b.n > 0 and b.w[b.n - 1] == 0:
        b.n -= 1


cdef Bits bits_from_int(object x):
    if type(x) is Bits:
        return <Bits>x
    cdef Py_ssize_t n = scemon_int_words(x)
    cdef Bits b = _alloc(n)
    scemon_int_fill(x, b.w, n)
    _trim(b)
    return b


cdef object bits_to_int(Bits b):
    return scemon_int_from_words(b.w, b.n)


cdef Bits bits_from_words(const uint64_t *w, Py_ssize_t n):
    while n > 0 and w[n - 1] == 0:
        n -= 1
    cdef Bits b = _alloc(n)
    if n:
        memcpy(b.w, w, n * sizeof(uint64_t))
    return b


cdef Bits bits_from_ids(const uint32_t *ids, Py_ssize_t n):
    # The set of the ascending query numbers ids[:n].
    if n == 0:
        return _alloc(0)
    cdef Bits b = _alloc((ids[n - 1] >> 6) + 1)
    cdef Py_ssize_t i
    for i in range(n):
        b.w[ids[i] >> 6] |= (<uint64_t>1) << (ids[i] & 63)
    return b


cdef object ids_to_int(const uint32_t *ids, Py_ssize_t n):
    return bits_to_int(bits_from_ids(ids, n))


cdef Bits bits_and(Bits a, Bits b):
    cdef Py_ssize_t i, n = a.n if a.n < b.n else b.n
    cdef Bits r = _alloc(n)
    for i in range(n):
        r.w[i] = a.w[i] & b.w[i]
    _trim(r)
    return r


cdef Bits bits_or(Bits a, Bits b):
    cdef Bits big = a if a.n >= b.n else b, small = b if a.n >= b.n else a
    cdef Bits r = _alloc(big.n)
    cdef Py_ssize_t i
    for i in range(big.n):
        r.w[i] = big.w[i] | (small.w[i] if i < small.n else 0)
    return r


cdef Bits bits_without(Bits a, Py_ssize_t k):
    cdef Bits r = bits_from_words(a.w, a.n)
    if (k >> 6) < r.n:
        r.w[k >> 6] &= ~((<uint64_t>1) << (k & 63))
        _trim(r)
    return r


cdef Bits bits_empty():
    return _alloc(0)


cdef int words_room(Words *s, Py_ssize_t n) except -1:
    # Room for n words (the new ones zero).
    cdef Py_ssize_t cap
    cdef uint64_t *w
    if n <= s.cap:
        return 0
    cap = s.cap * 2 if s.cap else 16
    while cap < n:
        cap *= 2
    w = <uint64_t *>PyMem_Realloc(s.w, cap * sizeof(uint64_t))
    if w == NULL:
        raise MemoryError()
    memset(w + s.cap, 0, (cap - s.cap) * sizeof(uint64_t))
    s.w = w
    s.cap = cap
    return 0


cdef void words_free(Words *s) noexcept:
    PyMem_Free(s.w)
    s.w = NULL
    s.n = s.cap = 0


cdef class WindowMasks:
    """The window masks of one generation of queries, as Bits (see _bitset.pxd)."""

    def __cinit__(self, list bounds, list masks):
        cdef Py_ssize_t i
        self.n = len(bounds)
        self.bounds = <double *>grow(NULL, (self.n + 1) * sizeof(double))
        for i in range(self.n):
            self.bounds[i] = bounds[i]
        self.masks = [bits_from_int(m) for m in masks] + [bits_empty()]
        self.least = bounds[0] if self.n else float("-inf")
        self.most = bounds[self.n - 1] if self.n else float("-inf")

    def __dealloc__(self):
        PyMem_Free(self.bounds)
