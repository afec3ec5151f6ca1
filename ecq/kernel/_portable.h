/* What the compiled kernel needs from the compiler and from CPython, through portable
 * code and public API only (docs/architecture.md, "The kernel", and its "Only public CPython API"):
 *
 * - the index of a word's lowest set bit and cache prefetches: compiler builtins where
 *   GCC or Clang provides them, else a portable de Bruijn lookup and no prefetch (a
 *   prefetch never changes a result); the number of a word's set bits, counted in
 *   portable code (SWAR) everywhere;
 * - converting a non-negative Python int to 64-bit words (least significant first) and
 *   back: PyLong_AsNativeBytes / PyLong_FromUnsignedNativeBytes from CPython 3.13 on,
 *   the int.to_bytes / int.from_bytes methods before. Conversions happen when queries
 *   change and where Python code reads a kernel structure, never per event.
 */
#ifndef SCEMON_PORTABLE_H
#define SCEMON_PORTABLE_H

#include <Python.h>
#include <stdint.h>
#include <string.h>

static inline int scemon_ctz64(uint64_t x) {
#if defined(__GNUC__) || defined(__clang__)
    return __builtin_ctzll(x);
#else
    /* x & -x isolates the lowest set bit; the de Bruijn product maps each of the 64
     * possible words to a distinct 6-bit index. */
    static const unsigned char index64[64] = {
        0, 1, 48, 2, 57, 49, 28, 3, 61, 58, 50, 42, 38, 29, 17, 4,
        62, 55, 59, 36, 53, 51, 43, 22, 45, 39, 33, 30, 24, 18, 12, 5,
        63, 47, 56, 27, 60, 41, 37, 16, 54, 35, 52, 21, 44, 32, 23, 11,
        46, 26, 40, 15, 34, 20, 31, 10, 25, 14, 19, 9, 13, 8, 7, 6};
    return index64[((x & (0 - x)) * UINT64_C(0x03f79d71b4cb0a89)) >> 58];
#endif
}

/* The number of set bits of a word, SWAR on every compiler: the builtin, without an
 * instruction set the build may not assume (-mpopcnt), is a call into libgcc. */
static inline int scemon_popcount64(uint64_t x) {
    x = x - ((x >> 1) & UINT64_C(0x5555555555555555));
    x = (x & UINT64_C(0x3333333333333333)) + ((x >> 2) & UINT64_C(0x3333333333333333));
    x = (x + (x >> 4)) & UINT64_C(0x0F0F0F0F0F0F0F0F);
    return (int)((x * UINT64_C(0x0101010101010101)) >> 56);
}

/* Ask for the `lines` cache lines from p on (reads only; no effect on results). */
static inline void scemon_prefetch_lines(const void *p, int lines) {
#if defined(__GNUC__) || defined(__clang__)
    for (int i = 0; i < lines; i++) __builtin_prefetch((const char *)p + 64 * i);
#else
    (void)p;
    (void)lines;
#endif
}

/* Little-endian bytes to and from a word, whatever the host's byte order. */
static inline uint64_t scemon_load_le64(const unsigned char *p) {
    uint64_t v = 0;
    for (int j = 7; j >= 0; j--) v = (v << 8) | p[j];
    return v;
}

static inline void scemon_store_le64(unsigned char *p, uint64_t v) {
    for (int j = 0; j < 8; j++) p[j] = (unsigned char)(v >> (8 * j));
}

/* The number of words a non-negative int needs (an upper bound: trailing zero words
 * are possible); -1 with TypeError or ValueError for anything else. */
static Py_ssize_t scemon_int_words(PyObject *x) {
    if (!PyLong_Check(x)) {
        PyErr_Format(PyExc_TypeError, "a query bitset must be an int, not %.100s", Py_TYPE(x)->tp_name);
        return -1;
    }
#if PY_VERSION_HEX >= 0x030D0000
    Py_ssize_t nbytes = PyLong_AsNativeBytes(
        x, NULL, 0,
        Py_ASNATIVEBYTES_LITTLE_ENDIAN | Py_ASNATIVEBYTES_UNSIGNED_BUFFER | Py_ASNATIVEBYTES_REJECT_NEGATIVE);
    if (nbytes < 0) return -1;
    return (nbytes + 7) / 8;
#else
    PyObject *zero = PyLong_FromLong(0);
    if (zero == NULL) return -1;
    int negative = PyObject_RichCompareBool(x, zero, Py_LT);
    Py_DECREF(zero);
    if (negative < 0) return -1;
    if (negative) {
        PyErr_SetString(PyExc_ValueError, "a query bitset must be a non-negative int");
        return -1;
    }
    PyObject *bits = PyObject_CallMethod(x, "bit_length", NULL);
    if (bits == NULL) return -1;
    Py_ssize_t nbits = PyLong_AsSsize_t(bits);
    Py_DECREF(bits);
    if (nbits < 0) return -1;
    return (nbits + 63) / 64;
#endif
}

/* Write non-negative int x into n words (n at least scemon_int_words(x)); -1 on error. */
static int scemon_int_fill(PyObject *x, uint64_t *w, Py_ssize_t n) {
    if (n == 0) return 0;
#if PY_VERSION_HEX >= 0x030D0000
    Py_ssize_t got = PyLong_AsNativeBytes(
        x, w, n * 8,
        Py_ASNATIVEBYTES_LITTLE_ENDIAN | Py_ASNATIVEBYTES_UNSIGNED_BUFFER | Py_ASNATIVEBYTES_REJECT_NEGATIVE);
    if (got < 0) return -1;
    if (got > n * 8) {
        PyErr_SetString(PyExc_OverflowError, "query bitset wider than its buffer");
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) w[i] = scemon_load_le64((const unsigned char *)&w[i]);
    return 0;
#else
    PyObject *raw = PyObject_CallMethod(x, "to_bytes", "ns", n * 8, "little");
    if (raw == NULL) return -1;
    if (!PyBytes_Check(raw) || PyBytes_GET_SIZE(raw) != n * 8) {
        Py_DECREF(raw);
        PyErr_SetString(PyExc_SystemError, "int.to_bytes gave an unexpected result");
        return -1;
    }
    const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(raw);
    for (Py_ssize_t i = 0; i < n; i++) w[i] = scemon_load_le64(p + 8 * i);
    Py_DECREF(raw);
    return 0;
#endif
}

/* The non-negative int of n words. */
static PyObject *scemon_int_from_words(const uint64_t *w, Py_ssize_t n) {
    while (n > 0 && w[n - 1] == 0) n--;
    if (n <= 1) return PyLong_FromUnsignedLongLong(n ? (unsigned long long)w[0] : 0ULL);
    unsigned char *buf = (unsigned char *)PyMem_Malloc((size_t)n * 8);
    if (buf == NULL) return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < n; i++) scemon_store_le64(buf + 8 * i, w[i]);
#if PY_VERSION_HEX >= 0x030D0000
    PyObject *out = PyLong_FromUnsignedNativeBytes(buf, (size_t)n * 8, Py_ASNATIVEBYTES_LITTLE_ENDIAN);
#else
    PyObject *out = NULL;
    PyObject *raw = PyBytes_FromStringAndSize((const char *)buf, n * 8);
    if (raw != NULL) {
        out = PyObject_CallMethod((PyObject *)&PyLong_Type, "from_bytes", "Os", raw, "little");
        Py_DECREF(raw);
    }
#endif
    PyMem_Free(buf);
    return out;
}

#endif
