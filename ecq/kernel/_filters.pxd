# cython: language_level=3
"""The filter index in the compiled kernel: ecq.filters' index of one place (a class's
position in the sequences) with its bitsets as the kernel's Bits and its numeric
thresholds as C doubles, made once per generation of queries (see _filters.pyx)."""

from ecq.kernel._bitset cimport Bits, Words


cdef class NumBounds:
    # One family of numeric half-lines (ecq.filters.Bounds): n thresholds ascending,
    # whether each is inclusive, and the n + 1 failure sets.
    cdef double *t
    cdef char *inclusive
    cdef Py_ssize_t n
    cdef bint lower
    cdef list fail  # Bits


cdef class StrBounds:
    # The same for strings: Python's bisect on the thresholds, the failure sets as Bits.
    cdef list t, inclusive, fail
    cdef bint lower


cdef class NativeAttr:
    cdef object name  # the attribute
    cdef object index  # its ecq.filters.AttrIndex: asked for what doubles cannot say exactly
    cdef bint fallback  # an event field of that name is read when the attribute is absent
    cdef bint exact  # every numeric threshold is a double exactly
    cdef Bits has, cmp_all, not_num, not_str, has_equal, cmp_or_equal
    cdef NumBounds num_lo, num_up
    cdef StrBounds str_lo, str_up
    cdef dict equal, unequal  # number or string -> Bits
    cdef Bits equal_true, equal_false, unequal_true, unequal_false


cdef class SlotIndex:
    # One SlotFilter: its unfiltered queries and filters (``all``), the attributes, the
    # residual predicates with their queries, and a scratch set for the failures.
    cdef Bits all
    cdef list attrs  # NativeAttr
    cdef list residual  # [(predicate, Bits), ...]
    cdef Words failed, out  # scratch: the failures, the passing set being made


cdef SlotIndex slot_index(object slot)
cdef Bits slot_passing(SlotIndex x, object e)
