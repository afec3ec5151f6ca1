# cython: language_level=3
"""Per-source summaries of the compiled kernel (see _summary.pyx)."""

from cpython.ref cimport PyObject
from libc.stdint cimport uint16_t, uint32_t, uint64_t

from ecq.kernel._bitset cimport Bits, QuerySet, WindowMasks
from ecq.kernel._pmb cimport Builder, GroupScratch, NativePMB


cdef struct Row:
    double t  # the latest start
    PyObject *b  # the query set: an owned reference to a Bits
    Py_ssize_t tag  # the class id of a first-position row


cdef class Rows:
    cdef Row *r
    cdef Py_ssize_t n, cap
    cdef int append(self, double t, Bits bits, Py_ssize_t tag) except -1
    cdef void delete(self, Py_ssize_t i) noexcept
    cdef int or_row(self, Py_ssize_t i, Bits bits) except -1
    cdef int clear_bit(self, Py_ssize_t bitno) except -1
    cdef int _put(self, Py_ssize_t i, Bits bits) except -1


cdef struct Ent:
    # One query's entry at one later position of a source's summary: its latest start.
    double t
    uint32_t q  # the query's number
    uint16_t k  # the PMB position it came from (>= 1); extending at k + 1 reads it
    uint16_t b  # its bucket: 1 + the id of the class position k + 1 takes


cdef inline uint64_t ent_key(const Ent *x) noexcept nogil:
    # The entries' order: bucket, then position, then query.
    return (<uint64_t>x.b << 48) | (<uint64_t>x.k << 32) | x.q


cdef enum:
    NO_BUCKET = 0xFFFF  # bucket numbers stay below it


cdef class SummaryScratch:
    # One kernel's working memory for summaries.
    cdef Ent *picked  # entries picked from a summary (extension, view)
    cdef Py_ssize_t picked_cap
    cdef Ent *fresh  # the entries an instance brings (folded, then joined)
    cdef Py_ssize_t fresh_cap
    cdef Ent *spare  # the buffer a summary's entries are merged into
    cdef Py_ssize_t spare_cap
    cdef Ent *sorted  # the fresh entries' other buffer
    cdef Py_ssize_t sorted_cap
    cdef uint32_t *added  # per bucket, entries added (zero between uses)
    cdef Py_ssize_t added_cap
    cdef GroupScratch groups
    cdef int fresh_room(self, Py_ssize_t n) except -1


cdef class SrcSummary:
    cdef list s_cls
    cdef Rows starts
    cdef Ent *ent  # sorted by bucket, position, query (ent_key)
    cdef Py_ssize_t nent, cap
    cdef uint32_t *boff  # bucket b: ent[boff[b]:boff[b + 1]] for b < nbo
    cdef Py_ssize_t nbo, cap_bo
    cdef double *mark  # per position k >= 1: mark[k - 1]
    cdef Py_ssize_t nlater
    cdef Py_ssize_t sifted
    cdef PyObject **heads
    cdef Py_ssize_t nheads

    cdef int set_head(self, Py_ssize_t cid, NativePMB pmb) except -1
    cdef int widen(self, Py_ssize_t k) except -1
    cdef int keep_if(self, Py_ssize_t without) except -1
    cdef int drop_start(self, Py_ssize_t i) except -1
    cdef int index(self) except -1
    cdef int _boff_room(self, Py_ssize_t nb) except -1
    cdef int _bucket_room(self, Py_ssize_t nb) except -1


cdef inline PyObject *summary_head(SrcSummary s, Py_ssize_t cid) noexcept:
    return s.heads[cid] if cid < s.nheads else NULL


cdef inline bint ent_live(SrcSummary s, const Ent *x) noexcept:
    return x.t >= s.mark[x.k - 1]


cdef int set_mark(SrcSummary s, Py_ssize_t k, double cutoff) except -1
cdef int join(SrcSummary s, Py_ssize_t nf, SummaryScratch x) except -1
cdef int pick(
    SrcSummary s, Py_ssize_t bq, Py_ssize_t k, double e_end, const QuerySet *m, WindowMasks wins, Builder raw,
    SummaryScratch x
) except -1
cdef int prune(SrcSummary s, double cutoff) except -1
cdef int remove_bit(SrcSummary s, Py_ssize_t bitno) except -1
cdef bint is_empty(SrcSummary s) noexcept
cdef object view(SrcSummary s, SummaryScratch x)
