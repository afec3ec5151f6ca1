# cython: language_level=3
"""The filter index in the compiled kernel: ecq.compiler.filters' index of one or several places
(the positions a class fills in the sequences: one index for all of them; or the
conjunctions' filters of a class), over the local numbers of ecq.compiler.filters.LocalSlots,
its sets in one block of words and its numeric cuts as C doubles (see _filters.pyx). Made once per change of the places' filters."""

from cpython.list cimport PyList_GET_ITEM
from cpython.ref cimport PyObject
from libc.stdint cimport uint32_t, uint64_t

from ecq.kernel._bitset cimport Bits, QuerySet


cdef struct AttrC:
    # The atoms of every filter on one attribute (ecq.compiler.filters.AttrIndex). Sets are
    # offsets into SlotIndex.sets (-1: the empty set); the objects are owned by
    # SlotIndex.refs.
    PyObject *name
    PyObject *index  # the AttrIndex: asked for what doubles cannot say exactly
    PyObject *equal  # value key -> offset of the filters that must equal it, or NULL
    PyObject *unequal  # value key -> offset of those that must not, or NULL
    PyObject *str_lo  # StrBounds, or NULL
    PyObject *str_up
    bint fallback  # an event field of that name is read when the attribute is absent
    bint exact  # every numeric threshold is a double exactly
    Py_ssize_t has, cmp_all, not_num, not_str, has_equal, cmp_or_equal
    Py_ssize_t eq_true, eq_false, ne_true, ne_false
    # The numeric thresholds' cuts (ecq.compiler.filters.AttrIndex.cuts: SlotIndex.t + cuts,
    # ncuts of them) and the 2 * ncuts + 1 sets of their cells (from offset cells, L
    # words each; -1: no numeric threshold, a number fails not_num only).
    Py_ssize_t ncuts, cuts, cells
    # The cuts as a tree of blocks of 16 (see _filters._tree): ``depth`` levels, level
    # 0 the cuts themselves (at ``cuts``), level k + 1 the last cut of each block of
    # level k; level k at SlotIndex.t + lev[k], nblk[k] blocks, each on its own cache
    # lines and padded with +inf.
    Py_ssize_t depth
    Py_ssize_t lev[8]
    Py_ssize_t nblk[8]


cdef class StrBounds:
    # A family of string half-lines: Python's bisect on the thresholds.
    cdef list t, inclusive
    cdef Py_ssize_t fail  # offset of the first of its n + 1 cumulative failure sets
    cdef bint lower


cdef class SlotIndex:
    # The filters of ``nplaces`` places (keys: their positions) over L words of local
    # numbers; per place its local numbers start[p] .. start[p + 1] - 1, their query
    # numbers (glob), its queries without a filter (always), all its queries (every)
    # and the words of its passing sets (width).
    cdef Py_ssize_t nplaces, L, nattrs
    cdef list keys, always, every, residual, refs  # residual: [(predicate, offset), ...]
    cdef Py_ssize_t *start
    cdef Py_ssize_t *width
    cdef uint32_t *glob
    cdef AttrC *attrs
    cdef uint64_t *sets  # every set of local numbers, L words each
    cdef Py_ssize_t valid  # the local numbers in use
    cdef double *t  # the numeric cuts' trees (AttrC.lev), 64-byte aligned in t_mem
    cdef void *t_mem
    # Scratch for an event's numeric attributes (at most nattrs): which attribute,
    # its value, the block reached in its tree.
    cdef Py_ssize_t *pa
    cdef double *pv
    cdef Py_ssize_t *pb
    cdef uint64_t *failed  # where _fail writes an event's failures (L words), during a call
    cdef uint64_t *scratch  # L words of the index's own, for slot_passing
    cdef Py_ssize_t *key  # keys as C integers
    # Per place its filtered queries over query numbers (mn[p] words from moff[p] in
    # mem), and beside each word how many of them lie below it (rank): a query's local
    # number is start[p] + its rank (see QuerySet).
    cdef uint64_t *mem
    cdef uint32_t *rank
    cdef Py_ssize_t *moff
    cdef Py_ssize_t *mn
    cdef Py_ssize_t p0  # the place of position 0, -1: none


cdef class Passing:
    # What one instance passes at each place of a class index (slots_passing): the
    # filters it failed (L words of local numbers) and per place whether any query
    # passes (live). The places are read in place (passing_at); position 0's passing
    # queries are put back at their query numbers only when asked for (passing_first,
    # kept in ``first``; passing_init: those that go on, for the PMB and the summary's
    # rows, which are over query numbers). It holds its index (which holds no Passing:
    # no cycle), so it stays readable after the index is replaced.
    cdef SlotIndex x
    cdef uint64_t *fail  # L words, then the live bytes, in one block
    cdef unsigned char *live
    cdef Bits first


cdef inline void passing_at(Passing P, Py_ssize_t p, QuerySet *s) noexcept:
    # s: the queries passing place p (those without a filter there, and those whose
    # filter P did not fail).
    cdef SlotIndex x = P.x
    cdef Bits alw = <Bits>PyList_GET_ITEM(x.always, p)
    s.base = alw.w
    s.nbase = alw.n
    s.mem = x.mem + x.moff[p]
    s.rank = x.rank + x.moff[p]
    s.nmem = x.mn[p]
    s.fail = P.fail
    s.start = x.start[p]


cdef SlotIndex slot_index(object slot)
cdef Bits slot_passing(SlotIndex x, object e)
cdef SlotIndex class_index(dict slots)
cdef Passing slots_passing(SlotIndex x, object e)
cdef Bits passing_first(Passing P)
cdef Bits passing_init(Passing P, Bits more)
