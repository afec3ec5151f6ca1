# cython: language_level=3
"""Query bitsets in the kernel's own memory: 64-bit words, least significant first.

The network describes its queries with Python ints (a query's bit, the queries that
start, go on or end at a position, the queries of a window); the compiled kernel
converts them once per generation of queries (``_constants``) and works on words from
then on. The helpers here are ``cdef inline`` so that every module using them gets
them inlined; ``Words`` is a growable scratch set owned by one kernel."""

from libc.stdint cimport uint32_t, uint64_t


cdef extern from "_portable.h":
    int ctz64 "scemon_ctz64"(uint64_t x) noexcept nogil
    int popcount64 "scemon_popcount64"(uint64_t x) noexcept nogil
    void prefetch_lines "scemon_prefetch_lines"(const void *p, int lines) noexcept nogil


cdef extern from "Python.h":
    void *PyMem_Realloc(void *p, size_t n)


cdef inline void *grow(void *p, size_t size) except NULL:
    # The kernel's arrays grow through this: p reallocated to ``size`` bytes.
    cdef void *q = PyMem_Realloc(p, size if size else 1)
    if q == NULL:
        raise MemoryError()
    return q


cdef class Bits:
    # An immutable set of query numbers: n words, the last one non-zero (n == 0: empty).
    cdef uint64_t *w
    cdef Py_ssize_t n


cdef Bits bits_from_int(object x)
cdef object bits_to_int(Bits b)
cdef Bits bits_from_words(const uint64_t *w, Py_ssize_t n)
cdef Bits bits_from_ids(const uint32_t *ids, Py_ssize_t n)
cdef Bits bits_and(Bits a, Bits b)
cdef Bits bits_or(Bits a, Bits b)
cdef Bits bits_without(Bits a, Py_ssize_t k)
cdef Bits bits_empty()
cdef object ids_to_int(const uint32_t *ids, Py_ssize_t n)


cdef inline bint words_has(const uint64_t *w, Py_ssize_t n, size_t k) noexcept nogil:
    return <Py_ssize_t>(k >> 6) < n and (w[k >> 6] >> (k & 63)) & 1


cdef inline bint bits_has(Bits b, size_t k) noexcept:
    return words_has(b.w, b.n, k)


cdef struct QuerySet:
    # A set of query numbers read in place, without being made: those of ``base`` (nbase
    # words), and those of ``mem`` (nmem words) whose local number is not in ``fail``.
    # The local number of the i-th query of mem (ascending) is start + i, found by its
    # rank: ``rank[w]`` queries of mem lie below word w. This is how the test phase reads
    # which queries pass a filtered position (_filters.Passing): base its queries
    # without a filter, mem those with one, fail the filters the instance failed (the
    # class's own local numbers, ~10 words at 10,000 queries), so the passing queries
    # are never put back at their query numbers one by one. With mem empty it is just
    # the set base (a position without filters).
    const uint64_t *base
    Py_ssize_t nbase
    const uint64_t *mem
    const uint32_t *rank
    Py_ssize_t nmem
    const uint64_t *fail
    Py_ssize_t start


cdef inline bint qset_has(const QuerySet *s, size_t k) noexcept nogil:
    cdef Py_ssize_t w = <Py_ssize_t>(k >> 6), j
    cdef uint64_t bit = (<uint64_t>1) << (k & 63), word
    if w < s.nbase and s.base[w] & bit:
        return True
    if w >= s.nmem:
        return False
    word = s.mem[w]
    if not word & bit:
        return False
    j = s.start + s.rank[w] + popcount64(word & (bit - 1))
    return not (s.fail[j >> 6] >> (j & 63)) & 1


cdef inline void qset_of_bits(QuerySet *s, Bits b) noexcept:
    # s: the set b (no filtered queries).
    s.base = b.w
    s.nbase = b.n
    s.mem = NULL
    s.rank = NULL
    s.nmem = 0
    s.fail = NULL
    s.start = 0


cdef inline bint bits_meet(Bits a, Bits b) noexcept:
    # Whether a & b is not empty.
    cdef Py_ssize_t i, n = a.n if a.n < b.n else b.n
    for i in range(n):
        if a.w[i] & b.w[i]:
            return True
    return False


cdef inline bint bits_within(Bits a, Bits b) noexcept:
    # Whether every query of a is in b.
    cdef Py_ssize_t i
    if a.n > b.n:
        return False
    for i in range(a.n):
        if a.w[i] & ~b.w[i]:
            return False
    return True


cdef inline Py_ssize_t and_ids(
    const uint64_t *a, Py_ssize_t na, const uint64_t *b, Py_ssize_t nb, const uint64_t *c, Py_ssize_t nc,
    uint32_t *out
) noexcept nogil:
    # The numbers of the queries in a & b (& c, when c is not NULL), ascending, written to
    # out (room for 64 words' worth of the shortest); returns how many.
    cdef Py_ssize_t i, count = 0, n = na if na < nb else nb
    cdef uint64_t x
    if c != NULL and nc < n:
        n = nc
    for i in range(n):
        x = a[i] & b[i]
        if c != NULL:
            x &= c[i]
        while x:
            out[count] = <uint32_t>((i << 6) + ctz64(x))
            count += 1
            x &= x - 1
    return count


cdef struct Words:
    # A growable scratch set of query numbers: words beyond n are zero.
    uint64_t *w
    Py_ssize_t n
    Py_ssize_t cap


cdef int words_room(Words *s, Py_ssize_t n) except -1
cdef void words_free(Words *s) noexcept


cdef inline int words_set(Words *s, size_t k) except -1:
    cdef Py_ssize_t i = <Py_ssize_t>(k >> 6)
    if i >= s.cap:
        words_room(s, i + 1)
    s.w[i] |= (<uint64_t>1) << (k & 63)
    if i >= s.n:
        s.n = i + 1
    return 0


cdef inline int words_or_and(Words *s, Bits a, Bits b) except -1:
    # s |= a & b.
    cdef Py_ssize_t i, n = a.n if a.n < b.n else b.n
    if n > s.cap:
        words_room(s, n)
    for i in range(n):
        s.w[i] |= a.w[i] & b.w[i]
    if n > s.n:
        s.n = n
    return 0


cdef inline Py_ssize_t words_next(const Words *s, Py_ssize_t start) noexcept:
    # The lowest query number at or above ``start`` in s, or -1.
    cdef Py_ssize_t i = start >> 6
    cdef uint64_t x
    if i >= s.n:
        return -1
    x = s.w[i] & (~(<uint64_t>0) << (start & 63))
    while x == 0:
        i += 1
        if i >= s.n:
            return -1
        x = s.w[i]
    return (i << 6) + ctz64(x)


cdef inline void words_clear(Words *s) noexcept:
    cdef Py_ssize_t i
    for i in range(s.n):
        s.w[i] = 0
    s.n = 0


cdef class WindowMasks:
    # Per distinct window bound (ascending), the nodes whose window is at least that
    # long: what a span must be checked against beyond the smallest window.
    cdef double *bounds
    cdef list masks  # Bits per bound
    cdef Py_ssize_t n
    cdef double least, most  # the smallest and largest window (-inf: none)


cdef inline Bits window_mask(WindowMasks w, double span):
    # The nodes whose window admits ``span`` (``span <= window``): bisect_left.
    cdef Py_ssize_t lo = 0, hi = w.n, mid
    while lo < hi:
        mid = (lo + hi) >> 1
        if w.bounds[mid] < span:
            lo = mid + 1
        else:
            hi = mid
    if lo < w.n:
        return <Bits>w.masks[lo]
    return <Bits>w.masks[w.n]  # the empty set, kept after the others
