/* The compiled kernel's event instance: a C struct whose fields Python reads and writes
 * as member descriptors (PyMemberDef, public API). ``ecq.event.Event`` is a Python
 * subclass of this type (with no slots of its own) when the kernel is compiled: Python
 * code reads an event's fields as fast as a __slots__ class's (the interpreter
 * specialises member descriptors), and the kernel reads them in its own struct. The
 * fields are those of the pure class's __slots__, in the order the kernel reads them.
 */
#ifndef SCEMON_EVENT_TYPE_H
#define SCEMON_EVENT_TYPE_H

#include <Python.h>
#include <stddef.h>
#if PY_VERSION_HEX < 0x030C0000
#include <structmember.h>
#define SCEMON_T_OBJECT_EX T_OBJECT_EX
#else
#define SCEMON_T_OBJECT_EX Py_T_OBJECT_EX
#endif

typedef struct {
    PyObject_HEAD
    PyObject *src;
    PyObject *type;
    PyObject *start;
    PyObject *end;
    PyObject *prob;
    PyObject *arrival;
    PyObject *moment;
    PyObject *prev;
    PyObject *pmb;
    PyObject *attrs;
    PyObject *id;
    PyObject *parts;
    PyObject *flat;
    PyObject *prims;
} scemon_event;

#define SCEMON_EVENT_MEMBER(name) {#name, SCEMON_T_OBJECT_EX, offsetof(scemon_event, name), 0, NULL}

static PyMemberDef scemon_event_members[] = {
    SCEMON_EVENT_MEMBER(src),
    SCEMON_EVENT_MEMBER(type),
    SCEMON_EVENT_MEMBER(start),
    SCEMON_EVENT_MEMBER(end),
    SCEMON_EVENT_MEMBER(prob),
    SCEMON_EVENT_MEMBER(arrival),
    SCEMON_EVENT_MEMBER(moment),
    SCEMON_EVENT_MEMBER(prev),
    SCEMON_EVENT_MEMBER(pmb),
    SCEMON_EVENT_MEMBER(attrs),
    SCEMON_EVENT_MEMBER(id),
    SCEMON_EVENT_MEMBER(parts),
    SCEMON_EVENT_MEMBER(flat),
    SCEMON_EVENT_MEMBER(prims),
    {NULL, 0, 0, 0, NULL},
};

static int scemon_event_traverse(PyObject *self, visitproc visit, void *arg) {
    scemon_event *e = (scemon_event *)self;
    Py_VISIT(Py_TYPE(self)); /* instances of a heap type hold their type */
    Py_VISIT(e->src);
    Py_VISIT(e->type);
    Py_VISIT(e->start);
    Py_VISIT(e->end);
    Py_VISIT(e->prob);
    Py_VISIT(e->arrival);
    Py_VISIT(e->moment);
    Py_VISIT(e->prev);
    Py_VISIT(e->pmb);
    Py_VISIT(e->attrs);
    Py_VISIT(e->id);
    Py_VISIT(e->parts);
    Py_VISIT(e->flat);
    Py_VISIT(e->prims);
    return 0;
}

static int scemon_event_clear(PyObject *self) {
    scemon_event *e = (scemon_event *)self;
    Py_CLEAR(e->src);
    Py_CLEAR(e->type);
    Py_CLEAR(e->start);
    Py_CLEAR(e->end);
    Py_CLEAR(e->prob);
    Py_CLEAR(e->arrival);
    Py_CLEAR(e->moment);
    Py_CLEAR(e->prev);
    Py_CLEAR(e->pmb);
    Py_CLEAR(e->attrs);
    Py_CLEAR(e->id);
    Py_CLEAR(e->parts);
    Py_CLEAR(e->flat);
    Py_CLEAR(e->prims);
    return 0;
}

static void scemon_event_dealloc(PyObject *self) {
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    scemon_event_clear(self);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyType_Slot scemon_event_slots[] = {
    {Py_tp_doc, (void *)"The fields of an event instance (ecq.event.Event is its subclass)."},
    {Py_tp_members, scemon_event_members},
    {Py_tp_traverse, (void *)scemon_event_traverse},
    {Py_tp_clear, (void *)scemon_event_clear},
    {Py_tp_dealloc, (void *)scemon_event_dealloc},
    {0, NULL},
};

static PyType_Spec scemon_event_spec = {
    "ecq.kernel._events.EventBase",
    sizeof(scemon_event),
    0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    scemon_event_slots,
};

/* A new reference to a new type object. */
static PyObject *scemon_event_type_new(void) { return PyType_FromSpec(&scemon_event_spec); }

#endif
