/* Query bitsets (non-negative Python ints) read and combined digit by digit.
 *
 * The engine keeps its bitsets as Python ints so that the pure-Python code and this
 * extension share every data structure. Python's `a & b & c` allocates one int per
 * operator; the hot loops of ecq/_speedups.pyx only need the final result (often zero,
 * which needs no allocation at all) or a yes/no answer, so these helpers work on the
 * digits of CPython 3.11's int layout directly (3.12 changed it: setup.py builds the
 * extension only for 3.11; elsewhere the engine runs its pure-Python code).
 */
#ifndef SCEMON_BITS_H
#define SCEMON_BITS_H

#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <structmember.h> /* PyMemberDef */

#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000 && !defined(Py_LIMITED_API)
#define SCEMON_DIGITS 1
#else
#define SCEMON_DIGITS 0
#endif

#if SCEMON_DIGITS

typedef struct {
    digit *d;
    Py_ssize_t n;   /* digits in use (trailing zero digits allowed) */
    Py_ssize_t cap;
} scemon_buf;

static inline Py_ssize_t bits_ndigits(PyObject *o) { return Py_SIZE(o); }
static inline digit *bits_digits(PyObject *o) { return ((PyLongObject *)o)->ob_digit; }

/* Usable only for exact, non-negative ints (every bitset of the engine). */
static inline int bits_plain(PyObject *o) { return PyLong_CheckExact(o) && Py_SIZE(o) >= 0; }

/* Slots of the engine's own __slots__ classes (Event, PMB), read and written at their
 * offsets: the generic attribute lookup (type dict, descriptor, call) costs more than
 * the rest of the hot loops. Every slot of those classes is set in __init__. */
static Py_ssize_t slot_offset(PyObject *cls, const char *name) {
    PyObject *descr = PyObject_GetAttrString(cls, name);
    if (descr == NULL) return -1;
    if (Py_TYPE(descr) != &PyMemberDescr_Type) {
        Py_DECREF(descr);
        PyErr_Format(PyExc_TypeError, "%s is not a slot", name);
        return -1;
    }
    Py_ssize_t off = ((PyMemberDescrObject *)descr)->d_member->offset;
    Py_DECREF(descr);
    return off;
}

/* Borrowed reference; NULL (an AttributeError) when the slot is unset. */
static inline PyObject *slot_get(PyObject *o, Py_ssize_t off) {
    PyObject *v = *(PyObject **)((char *)o + off);
    if (v == NULL) PyErr_SetString(PyExc_AttributeError, "slot is not set");
    return v;
}

static inline int slot_set(PyObject *o, Py_ssize_t off, PyObject *v) {
    PyObject **p = (PyObject **)((char *)o + off);
    Py_INCREF(v);
    Py_XSETREF(*p, v);
    return 0;
}

/* Ask for the `lines` cache lines from p on (reads only; no effect on results). */
static inline void prefetch_lines(const void *p, int lines) {
    for (int i = 0; i < lines; i++) __builtin_prefetch((const char *)p + 64 * i);
}

/* Whether a & b is non-zero; -1 on error. */
static int bits_meet(PyObject *a, PyObject *b) {
    if (!bits_plain(a) || !bits_plain(b)) {
        PyObject *ab = PyNumber_And(a, b);
        if (ab == NULL) return -1;
        int r = PyObject_IsTrue(ab);
        Py_DECREF(ab);
        return r;
    }
    Py_ssize_t n = bits_ndigits(a) < bits_ndigits(b) ? bits_ndigits(a) : bits_ndigits(b);
    const digit *da = bits_digits(a), *db = bits_digits(b);
    for (Py_ssize_t i = 0; i < n; i++)
        if (da[i] & db[i]) return 1;
    return 0;
}

/* Whether bit number `k` of a is set; -1 on error. */
static int bits_test(PyObject *a, Py_ssize_t k) {
    if (!bits_plain(a)) {
        PyObject *one = PyLong_FromLong(1), *sh = PyLong_FromSsize_t(k);
        if (one == NULL || sh == NULL) { Py_XDECREF(one); Py_XDECREF(sh); return -1; }
        PyObject *bit = PyNumber_Lshift(one, sh);
        Py_DECREF(one); Py_DECREF(sh);
        if (bit == NULL) return -1;
        int r = bits_meet(a, bit);
        Py_DECREF(bit);
        return r;
    }
    Py_ssize_t i = k / PyLong_SHIFT;
    if (i >= bits_ndigits(a)) return 0;
    return (bits_digits(a)[i] >> (k % PyLong_SHIFT)) & 1;
}

static int buf_reserve(scemon_buf *b, Py_ssize_t n) {
    if (n <= b->cap) return 0;
    Py_ssize_t cap = b->cap ? b->cap : 16;
    while (cap < n) cap *= 2;
    digit *d = (digit *)PyMem_Realloc(b->d, (size_t)cap * sizeof(digit));
    if (d == NULL) { PyErr_NoMemory(); return -1; }
    memset(d + b->cap, 0, (size_t)(cap - b->cap) * sizeof(digit));
    b->d = d;
    b->cap = cap;
    return 0;
}

static void buf_free(scemon_buf *b) { PyMem_Free(b->d); b->d = NULL; b->n = b->cap = 0; }

/* b |= a & c. */
static int buf_or_and(scemon_buf *b, PyObject *a, PyObject *c) {
    if (!bits_plain(a) || !bits_plain(c)) { PyErr_SetString(PyExc_ValueError, "bitsets must be non-negative ints"); return -1; }
    Py_ssize_t n = bits_ndigits(a) < bits_ndigits(c) ? bits_ndigits(a) : bits_ndigits(c);
    if (buf_reserve(b, n) < 0) return -1;
    const digit *da = bits_digits(a), *dc = bits_digits(c);
    for (Py_ssize_t i = 0; i < n; i++) b->d[i] |= da[i] & dc[i];
    if (n > b->n) b->n = n;
    return 0;
}

/* The lowest set bit of b at or above `from`, or -1. */
static Py_ssize_t buf_next_bit(const scemon_buf *b, Py_ssize_t from) {
    Py_ssize_t i = from / PyLong_SHIFT;
    if (i >= b->n) return -1;
    digit d = b->d[i] & (digit)(~(digit)0 << (from % PyLong_SHIFT)) & PyLong_MASK;
    while (d == 0) {
        if (++i >= b->n) return -1;
        d = b->d[i];
    }
    return i * PyLong_SHIFT + __builtin_ctz(d);
}

/* b |= bit k. */
static inline int buf_set(scemon_buf *b, Py_ssize_t k) {
    Py_ssize_t i = k / PyLong_SHIFT;
    if (buf_reserve(b, i + 1) < 0) return -1;
    b->d[i] |= (digit)1 << (k % PyLong_SHIFT);
    if (i + 1 > b->n) b->n = i + 1;
    return 0;
}

/* The numbers of the set bits of r & m (& w, when not NULL) over n digits, ascending,
 * written to out (room for n * PyLong_SHIFT); returns how many. Sparse query sets are
 * what the engine stores per instance: a few queries out of thousands. */
static Py_ssize_t digits_and_ids(const digit *r, const digit *m, const digit *w, Py_ssize_t n, uint32_t *out) {
    Py_ssize_t count = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        digit x = r[i] & m[i];
        if (w != NULL) x &= w[i];
        while (x) {
            out[count++] = (uint32_t)(i * PyLong_SHIFT + __builtin_ctz(x));
            x &= x - 1;
        }
    }
    return count;
}

/* A new int with the bits numbered ids[0..n) (ascending) set. */
static PyObject *bits_from_ids(const uint32_t *ids, Py_ssize_t n) {
    if (n == 0) return PyLong_FromLong(0);
    Py_ssize_t nd = ids[n - 1] / PyLong_SHIFT + 1;
    PyLongObject *r = _PyLong_New(nd);
    if (r == NULL) return NULL;
    memset(r->ob_digit, 0, (size_t)nd * sizeof(digit));
    for (Py_ssize_t i = 0; i < n; i++) r->ob_digit[ids[i] / PyLong_SHIFT] |= (digit)1 << (ids[i] % PyLong_SHIFT);
    return (PyObject *)r;
}

static inline int bits_is_zero(PyObject *a) { return bits_plain(a) ? Py_SIZE(a) == 0 : !PyObject_IsTrue(a); }

#else
#error "ecq/_speedups needs CPython 3.11's int layout; setup.py builds it only there"
#endif

#endif
