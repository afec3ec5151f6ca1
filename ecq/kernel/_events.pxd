# cython: language_level=3
"""Events and matches of the compiled kernel: the event struct (_event_type.h) and the
helpers that read and write its fields, and the compiled ``Match``."""

from cpython.ref cimport PyObject, Py_INCREF, Py_XDECREF


cdef extern from "Python.h":
    bint PyFloat_CheckExact(PyObject *o)
    double PyFloat_AS_DOUBLE(PyObject *o)
    double PyFloat_AsDouble(object o) except? -1.0
    long long PyLong_AsLongLong(object o) except? -1


cdef extern from "_event_type.h":
    ctypedef struct scemon_event:
        PyObject *src
        PyObject *type
        PyObject *start
        PyObject *end
        PyObject *prob
        PyObject *arrival
        PyObject *moment
        PyObject *prev
        PyObject *pmb
        PyObject *attrs
        PyObject *id
        PyObject *parts
        PyObject *flat
        PyObject *prims


cdef inline scemon_event *ev(object e) noexcept:
    # The fields of an event (an instance of EventBase: the caller checked).
    return <scemon_event *><PyObject *>e


cdef object unset(str name)


cdef inline object ev_get(PyObject *f, str name):
    # A field's value (AttributeError when it was never set, as for a slot).
    if f == NULL:
        return unset(name)
    return <object>f


cdef inline double ev_float(PyObject *f, str name) except? -1.0:
    # A float field (start, end, prob) as a C double.
    if f != NULL and PyFloat_CheckExact(f):
        return PyFloat_AS_DOUBLE(f)
    return PyFloat_AsDouble(ev_get(f, name))


cdef inline long long ev_int(PyObject *f, str name) except? -1:
    # An int field (arrival, moment) as a C integer.
    return PyLong_AsLongLong(ev_get(f, name))


cdef inline int ev_put(PyObject **slot, object v) except -1:
    # Set a field to v (a new reference; the old one released).
    cdef PyObject *old = slot[0]
    Py_INCREF(v)
    slot[0] = <PyObject *>v
    Py_XDECREF(old)
    return 0


cdef enum:
    INLINE_EVENTS = 4  # events a Match holds inside


cdef class Match:
    cdef public object query, src
    cdef object _events, _attrs
    cdef PyObject *held[INLINE_EVENTS]  # owned, until ``events`` is first read
    cdef Py_ssize_t nev
    cdef public double start, end, prob
    cdef public long long seq, trigger
    cdef void drop_inline(self) noexcept
