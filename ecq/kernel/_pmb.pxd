# cython: language_level=3
"""Partial matching blocks of the compiled kernel: sparse query sets (``Groups``), the
scratch they are put together in (``Builder``), and ``NativePMB``."""

from libc.stdint cimport int32_t, uint32_t, uint64_t

from ecq.kernel._bitset cimport Bits, QuerySet


cdef inline bint find_in(const void *block, Py_ssize_t n, Py_ssize_t bitno, double *start) noexcept:
    # Whether one of the n groups of a Groups block (t[n], then off[n + 1], then ids)
    # holds query ``bitno``; that group's start goes to ``start``.
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


cdef class Groups:
    cdef Py_ssize_t n
    cdef double *t
    cdef Py_ssize_t *off  # group i holds ids[off[i]:off[i + 1]]
    cdef uint32_t *ids
    cdef void *block
    cdef size_t cap  # bytes of block
    cdef object bits_of(self, Py_ssize_t i)


cdef class Builder:
    cdef double *t
    cdef Py_ssize_t *off
    cdef uint32_t *ids
    cdef Py_ssize_t n, cap_g, cap_i
    cdef int reserve(self, Py_ssize_t more_ids) except -1
    cdef Groups finish(self)


cdef inline void builder_reset(Builder b) noexcept:
    b.n = 0
    b.off[0] = 0


cdef inline Py_ssize_t builder_used(Builder b) noexcept:
    return b.off[b.n]


cdef inline void builder_close(Builder b, double t, Py_ssize_t end) noexcept:
    # The ids written from off[n] to ``end`` become group n, starting at ``t``.
    b.t[b.n] = t
    b.n += 1
    b.off[b.n] = end


cdef class GroupScratch:
    # One kernel's working memory for putting groups together.
    cdef Builder raw  # an extension's groups as found
    cdef Builder made  # groups being made from others
    cdef Py_ssize_t *order  # resolve's order of the raw groups
    cdef Py_ssize_t order_cap
    cdef uint64_t *claimed  # resolve's set of the queries placed so far (zero between uses)
    cdef Py_ssize_t claimed_n


cdef Groups resolve(Builder raw, GroupScratch s)
cdef object keep_of(Groups g, Bits more, GroupScratch s)
cdef Groups groups_of_list(list groups, GroupScratch s)
cdef int add_ids_in(
    const uint32_t *ids, Py_ssize_t count, const uint64_t *d, Py_ssize_t nd, Bits wm, const QuerySet *also, Builder b,
    double t
) except -1


cdef class NativePMB:
    cdef Bits init_bits  # the initial entries (PMB reduction)
    cdef Groups g1  # at position 1, or None
    cdef dict rest  # {position: Groups} for the other positions, or None
    cdef object event
    cdef NativePMB prev
    cdef double start, end, prob
    cdef long long moment
    cdef void *g1block
    cdef int32_t g1n, g1bytes
    cdef object groups_at(self, Py_ssize_t k)
