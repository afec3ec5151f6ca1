# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The query lexer's common path and a query's shape key, compiled: registering many
queries spent half of its parsing splitting their texts into tokens and keying them
(``ecq.language.lexer``, ``ecq.language.shapes``), a Python step per token.

:meth:`Lexer.tokenize` reads the same tokens as the lexer's common path (ASCII names,
numbers, operators, plain strings, spaces, tabs and ``\\n``/``\\r`` line breaks), one
character at a time; it returns None for any other text (other whitespace, non-ASCII,
escapes, a number out of range, every error), which the Python lexer then reads, so
that every error and every rare token stays the Python lexer's own. :meth:`Lexer.shape`
is ``ecq.language.shapes.shape_of`` step for step. Both are held to the Python code by
tests (tests/ecq/language/test_lexer.py, test_shapes.py).
"""

from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.object cimport PyObject, PyTypeObject
from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_SET_ITEM
from cpython.unicode cimport PyUnicode_AsUTF8AndSize
from libc.math cimport isfinite

__all__ = ["Lexer"]

cdef extern from "Python.h":
    # A new instance of a tuple subclass with room for n items: what tuple.__new__ of
    # the subclass allocates, without making and copying a plain tuple first.
    object PyType_GenericAlloc(PyTypeObject* type, Py_ssize_t n)


cdef inline void _put(object tup, Py_ssize_t i, object item) noexcept:
    Py_INCREF(item)
    PyTuple_SET_ITEM(tup, i, item)


cdef inline bint _letter(char c) noexcept:
    return (b'a' <= c <= b'z') or (b'A' <= c <= b'Z') or c == b'_'


cdef inline bint _digit(char c) noexcept:
    return b'0' <= c <= b'9'


cdef inline bint _word(char c) noexcept:
    # re's \w on ASCII: a letter, a digit or "_"
    return _letter(c) or _digit(c)


cdef inline bint _break(char c) noexcept:
    # The ASCII line breaks of str.splitlines()
    return c == b'\n' or c == b'\r' or c == b'\x0b' or c == b'\x0c' or c == b'\x1c' or c == b'\x1d' or c == b'\x1e'


# Longest run of digits read as a C integer (19 digits may overflow 64 bits): longer
# ones go to the Python lexer.
DEF _MAX_DIGITS = 18


cdef inline Py_ssize_t _name_end(const char* s, Py_ssize_t i, Py_ssize_t n) noexcept:
    """The end of the name whose first character is at ``i``: name characters, and a
    "-" directly between two of them."""
    i += 1
    while i < n and _word(s[i]):
        i += 1
    while i + 1 < n and s[i] == b'-' and _word(s[i + 1]):
        i += 2
        while i < n and _word(s[i]):
            i += 1
    return i


cdef inline Py_ssize_t _digits_end(const char* s, Py_ssize_t i, Py_ssize_t n) noexcept:
    """The end of the run of digits from ``i``, and of its fraction (".5") if any."""
    while i < n and _digit(s[i]):
        i += 1
    if i + 1 < n and s[i] == b'.' and _digit(s[i + 1]):
        i += 2
        while i < n and _digit(s[i]):
            i += 1
    return i


cdef object _number(str text, const char* s, Py_ssize_t start, Py_ssize_t end, bint whole):
    """The value of the number written at ``start:end``: an int when ``whole`` (digits
    only), else a float; None when the Python lexer must read it (out of range, or
    too many digits for a C integer)."""
    cdef long long value = 0
    cdef double real
    cdef Py_ssize_t j
    if not whole:
        real = float(text[start:end])
        return real if isfinite(real) else None
    if end - start > _MAX_DIGITS:
        return None
    for j in range(start, end):
        value = value * 10 + (s[j] - 48)
    return value


cdef class Lexer:
    """The lexer's common path and the shape key, made with the Python lexer's own token
    class, kinds and operator table (this module imports nothing of the language)."""

    cdef object token
    cdef PyTypeObject* token_type
    cdef str ident, number, money, percent, string, posref, derived, op, eof
    cdef dict ops
    cdef frozenset literals

    def __init__(self, token: type, kinds: dict, ops: dict) -> None:
        if not (issubclass(token, tuple) and token.__basicsize__ == tuple.__basicsize__):
            raise TypeError("the token class must be a tuple subclass without fields of its own")
        self.token = token
        self.token_type = <PyTypeObject*>token
        self.ident = kinds["IDENT"]
        self.number = kinds["NUMBER"]
        self.money = kinds["MONEY"]
        self.percent = kinds["PERCENT"]
        self.string = kinds["STRING"]
        self.posref = kinds["POSREF"]
        self.derived = kinds["DERIVED"]
        self.op = kinds["OP"]
        self.eof = kinds["EOF"]
        self.ops = ops
        self.literals = frozenset([self.number, self.money, self.percent, self.string])

    cdef inline object _tok(self, str kind, str raw, long line, long column, str key, object value):
        tok = PyType_GenericAlloc(self.token_type, 6)
        _put(tok, 0, kind)
        _put(tok, 1, raw)
        _put(tok, 2, line)
        _put(tok, 3, column)
        _put(tok, 4, key)
        _put(tok, 5, value)
        return tok

    def tokenize(self, str text):
        """The tokens of ``text`` ending with the end-of-input token, as
        ``ecq.language.lexer.tokenize`` reads them; None when ``text`` needs the
        Python lexer (see the module's docstring)."""
        cdef Py_ssize_t n, i = 0, start, j
        cdef const char* s
        cdef char c, d
        cdef long line = 1, column = 1
        cdef bint whole
        cdef str raw
        cdef object number
        if not text.isascii():
            return None
        s = PyUnicode_AsUTF8AndSize(text, &n)
        tokens = []
        append = tokens.append
        last_line = 0
        last_end = 0
        while i < n:
            c = s[i]
            if c == b' ' or c == b'\t':
                i += 1
                column += 1
                continue
            start = i
            if _letter(c):
                i = _name_end(s, i, n)
                raw = text[start:i]
                append(self._tok(self.ident, raw, line, column, raw.upper(), None))
            elif c == b'-' and i + 1 < n and s[i + 1] == b'-':
                # a comment, to the line break (which is read next) or the end
                i += 2
                while i < n and not _break(s[i]):
                    i += 1
                continue
            elif c == b'\n' or c == b'\r':
                i += 1
                if c == b'\r' and i < n and s[i] == b'\n':
                    i += 1
                line += 1
                column = 1
                continue
            elif _digit(c):
                i = _digits_end(s, i, n)
                whole = True
                for j in range(start, i):
                    if s[j] == b'.':
                        whole = False
                if i < n and (s[i] == b'e' or s[i] == b'E'):
                    j = i + 1
                    if j < n and (s[j] == b'+' or s[j] == b'-'):
                        j += 1
                    if j < n and _digit(s[j]):
                        whole = False
                        i = j
                        while i < n and _digit(s[i]):
                            i += 1
                number = _number(text, s, start, i, whole)
                if number is None:
                    return None
                if i < n and s[i] == b'%':
                    i += 1
                    append(self._tok(self.percent, text[start:i], line, column, "<PERCENT>", number / 100))
                else:
                    append(self._tok(self.number, text[start:i], line, column, "<NUMBER>", number))
            elif c == b"'" or c == b'"':
                i += 1
                while i < n and s[i] != c:
                    d = s[i]
                    if d == b'\\' or _break(d):
                        return None
                    i += 1
                if i == n:
                    return None
                i += 1
                raw = text[start:i]
                append(self._tok(self.string, raw, line, column, "<STRING>", raw[1:-1]))
            elif c == b'$':
                if i + 1 < n and _digit(s[i + 1]):
                    i = _digits_end(s, i + 1, n)
                    whole = True
                    for j in range(start + 1, i):
                        if s[j] == b'.':
                            whole = False
                    number = _number(text, s, start + 1, i, whole)
                    if number is None:
                        return None
                    append(self._tok(self.money, text[start:i], line, column, "<MONEY>", number))
                elif i + 2 < n and (s[i + 1] == b'x' or s[i + 1] == b'X') and _digit(s[i + 2]):
                    i += 2
                    while i < n and _digit(s[i]):
                        i += 1
                    if i < n and _word(s[i]):
                        return None  # "$x1a": not a positional reference
                    append(self._tok(self.posref, text[start:i], line, column, "<POSREF>", None))
                else:
                    return None
            elif c == b'@':
                if not (i + 1 < n and _letter(s[i + 1])):
                    return None
                i = _name_end(s, i + 1, n)
                append(self._tok(self.derived, text[start:i], line, column, "<DERIVED>", None))
            else:
                d = s[i + 1] if i + 1 < n else 0
                if (d == b'=' and (c == b'=' or c == b'!' or c == b'<' or c == b'>')) or (c == b'<' and d == b'>'):
                    i += 2
                else:
                    i += 1
                raw = text[start:i]
                key = self.ops.get(raw)
                if key is None:
                    return None
                append(self._tok(self.op, raw, line, column, key, None))
            column += i - start
            last_line = line
            last_end = column
        if tokens:
            append(self._tok(self.eof, "", last_line, last_end, "<EOF>", None))
        else:
            append(self._tok(self.eof, "", 1, 1, "<EOF>", None))
        return tokens

    def shape(self, list tokens, frozenset words):
        """``ecq.language.shapes.shape_of(tokens)`` (``words``: its ``WORDS``): the shape
        key and the free tokens' indexes."""
        cdef Py_ssize_t i, n = PyList_GET_SIZE(tokens)
        cdef tuple tok
        cdef list key = []
        cdef list free = []
        cdef dict by_text = {}
        cdef dict by_key = {}
        cdef frozenset literals = self.literals
        cdef str ident = self.ident
        for i in range(n):
            tok = <tuple>PyList_GET_ITEM(tokens, i)
            kind = tok[0]
            if kind == ident:
                upper = tok[4]
                if upper in words:
                    key.append(tok[1])
                    continue
                text = tok[1]
                if text.isascii():
                    key.append(f"\x01{by_text.setdefault(text, i)}.{by_key.setdefault(upper, i)}")
                else:
                    key.append(
                        f"\x01{by_text.setdefault(text, i)}.{by_key.setdefault(upper, i)}"
                        f".{by_key.setdefault(chr(0) + text.lower(), i)}"
                    )
                free.append(i)
            elif kind in literals:
                value = tok[5]
                key.append(f"\x02{kind}.{type(value).__name__}.{by_text.setdefault(value, i)}")
                free.append(i)
            else:
                key.append(tok[1])
        return "\x00".join(key), free
