# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Events and matches of the compiled kernel.

- ``EventBase``: the event struct (_event_type.h), the base of ``ecq.event.Event`` when
  the kernel is compiled.
- ``EventReader``: ``Event.from_dict`` for well-formed dicts (what ``scemon replay`` and
  the ingest read), built natively; anything unusual goes to ``Event.from_dict``, which
  accepts or rejects it and names the mistake. ``EventReader.columns``: the same events
  from a batch's columns (the service's Arrow posts), no dict per row.
- ``Match``: ``ecq.match.Match`` when the kernel is compiled; ``write_match``: its wire
  form (``Match.to_dict``) built natively for matches of primitive events;
  ``BlockText``: a batch's matches as one JSON text, numbered (what the service logs
  and sends).
"""

cimport cython
from cpython.float cimport PyFloat_AS_DOUBLE
from cpython.ref cimport PyObject, Py_XDECREF
from libc.math cimport isfinite
from libc.string cimport memchr, memcmp, memcpy

cdef extern from "_event_type.h":
    object scemon_event_type_new()

cdef extern from "Python.h":
    ctypedef struct PyTypeObject
    object PyType_GenericAlloc(PyTypeObject *cls, Py_ssize_t n)

__all__ = ["BlockText", "EventBase", "EventReader", "KeyViews", "Match", "write_match"]

EventBase = scemon_event_type_new()
cdef type _EventBase = EventBase


cdef object unset(str name):
    raise AttributeError(f"the event's {name!r} is not set")


cdef object _ABSENT = object()


cdef inline object _seconds(object v):
    # A finite number of seconds as a float, or None (then Event.from_dict decides).
    cdef double x
    if type(v) is float:
        x = PyFloat_AS_DOUBLE(v)
    elif type(v) is int:
        try:
            x = float(v)
        except OverflowError:
            return None
    else:
        return None
    if x - x != 0.0:  # inf or nan
        return None
    return x


# ------------------------------------------------- a plain JSON Lines event, read here
#
# ``EventReader.jsonl`` reads a line that is plainly an event itself: an object of the
# event's fields, strings of printable ASCII without escapes, numbers of at most 18
# digits (integers) or 40 characters (others), an attributes object of such strings,
# numbers and booleans. Anything else (escapes, non-ASCII, nesting, nulls among the
# attributes, unknown or repeated fields, a mistake) is not read here: the line goes
# to ``orjson.loads`` and the reader as before, which accept it or name its mistake.
# Numbers are read by the correctly rounded conversion (PyOS_string_to_double), as
# orjson reads them: the same float for the same text (tests/ecq/test_accel.py); a
# short decimal is read by Clinger's exact fast path first (_short_decimal).

cdef extern from "float.h":
    # 0: double arithmetic is done in doubles (SSE2; not the x87's 80 bits), which the
    # fast path's one correctly rounded operation needs.
    int FLT_EVAL_METHOD

# The powers of ten a double holds exactly (5**22 < 2**53).
cdef double[23] _EXACT_TENS = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
]

cdef extern from "Python.h":
    double PyOS_string_to_double(const char *s, char **endptr, PyObject *overflow_exception) except? -1.0
    object PyUnicode_FromStringAndSize(const char *u, Py_ssize_t size)
    object PyLong_FromLongLong(long long v)

# What a field's value turned out to be.
cdef enum:
    _STR = 1
    _INT = 2
    _FLOAT = 3
    _NULL = 4
    _TRUE = 5
    _FALSE = 6

# The fields, as bits of the ones seen.
cdef enum:
    _F_SRC = 1
    _F_TYPE = 2
    _F_START = 4
    _F_END = 8
    _F_ID = 16
    _F_PROB = 32
    _F_ATTRS = 64


cdef struct _Scan:
    const char *b
    Py_ssize_t i, end
    # the last value read: its kind, its text's span, its number
    int kind
    Py_ssize_t lo, hi
    long long n
    double x


cdef inline void _ws(_Scan *s) noexcept:
    cdef char c
    while s.i < s.end:
        c = s.b[s.i]
        if c == 32 or c == 9 or c == 13 or c == 10:
            s.i += 1
        else:
            return


cdef inline bint _string(_Scan *s) noexcept:
    # A string of printable ASCII with no escape; its characters are b[lo:hi].
    cdef Py_ssize_t j = s.i + 1
    cdef unsigned char c
    while j < s.end:
        c = <unsigned char>s.b[j]
        if c == 34:  # '"'
            s.lo, s.hi, s.i, s.kind = s.i + 1, j, j + 1, _STR
            return True
        if c < 32 or c == 92 or c >= 127:  # a control, '\\', not ASCII
            return False
        j += 1
    return False


cdef inline bint _digits(_Scan *s, Py_ssize_t *j) noexcept:
    cdef Py_ssize_t k = j[0]
    while k < s.end and 48 <= s.b[k] <= 57:
        k += 1
    if k == j[0]:
        return False
    j[0] = k
    return True


cdef bint _number(_Scan *s) noexcept:
    # A number by JSON's grammar: an integer of at most 18 digits as a C integer, any
    # other of at most 40 characters as a finite double.
    cdef Py_ssize_t j = s.i, first
    cdef bint integer = True
    cdef char buf[48]
    cdef long long n = 0
    cdef Py_ssize_t k
    if j < s.end and s.b[j] == 45:  # '-'
        j += 1
    first = j
    if j < s.end and s.b[j] == 48:  # a leading 0 stands alone
        j += 1
    elif not _digits(s, &j):
        return False
    if j < s.end and s.b[j] == 46:  # '.'
        integer = False
        j += 1
        if not _digits(s, &j):
            return False
    if j < s.end and (s.b[j] == 101 or s.b[j] == 69):  # 'e', 'E'
        integer = False
        j += 1
        if j < s.end and (s.b[j] == 43 or s.b[j] == 45):
            j += 1
        if not _digits(s, &j):
            return False
    if integer:
        if j - first > 18:
            return False
        for k in range(first, j):
            n = n * 10 + (s.b[k] - 48)
        s.n = -n if s.b[s.i] == 45 else n
        s.x = <double>s.n
        s.kind = _INT
    else:
        if j - s.i > 40:
            return False
        if _short_decimal(s, first, j):
            s.lo, s.hi, s.i = s.i, j, j
            return True
        memcpy(buf, s.b + s.i, j - s.i)
        buf[j - s.i] = 0
        try:
            # NULL: out of range is ±inf (refused below, as orjson refuses it), not an error.
            s.x = PyOS_string_to_double(buf, NULL, NULL)
        except Exception:
            return False
        if not isfinite(s.x):
            return False
        s.kind = _FLOAT
    s.lo, s.hi, s.i = s.i, j, j
    return True


cdef inline bint _short_decimal(_Scan *s, Py_ssize_t first, Py_ssize_t j) noexcept:
    # s.x: the number b[s.i:j] (JSON's grammar already checked; its digits from
    # ``first``) when it has at most 15 significant digits w and a decimal exponent e
    # with |e| <= 22: then w and 10**|e| are doubles exactly, and w * 10**e (or
    # w / 10**-e) is one IEEE operation, so correctly rounded: the double nearest the
    # text, what PyOS_string_to_double gives (Clinger, 1990). Else False, and the text
    # goes to PyOS_string_to_double, whose x87 control-word switches cost more than the
    # whole parse here. Why a fast path at all: most event numbers are short (payments).
    cdef unsigned long long w = 0
    cdef Py_ssize_t k = first, significant = 0, exp = 0, scale = 0
    cdef bint fraction = False, negative_exp = False
    cdef char c
    if FLT_EVAL_METHOD != 0:
        return False
    while k < j:
        c = s.b[k]
        if c == 46:  # '.'
            fraction = True
        elif c == 101 or c == 69:  # 'e', 'E'
            break
        else:
            if w or c != 48:
                significant += 1
                if significant > 15:
                    return False
            w = w * 10 + <unsigned long long>(c - 48)
            scale -= fraction
        k += 1
    if k < j:  # the exponent: at most 3 digits (more is never within reach of 10**22)
        k += 1
        if s.b[k] == 43 or s.b[k] == 45:
            negative_exp = s.b[k] == 45
            k += 1
        if j - k > 3:
            return False
        while k < j:
            exp = exp * 10 + (s.b[k] - 48)
            k += 1
        if negative_exp:
            exp = -exp
    exp += scale
    if exp < -22 or exp > 22:
        return False
    s.x = <double>w / _EXACT_TENS[-exp] if exp < 0 else <double>w * _EXACT_TENS[exp]
    if s.b[s.i] == 45:
        s.x = -s.x
    s.kind = _FLOAT
    return True


cdef inline bint _word(_Scan *s, const char *w, Py_ssize_t n, int kind) noexcept:
    if s.i + n <= s.end and memcmp(s.b + s.i, w, n) == 0:
        s.i += n
        s.kind = kind
        return True
    return False


cdef bint _scalar(_Scan *s) noexcept:
    # A string, a number, true, false or null; anything else fails.
    if s.i >= s.end:
        return False
    cdef char c = s.b[s.i]
    if c == 34:
        return _string(s)
    if c == 116:
        return _word(s, "true", 4, _TRUE)
    if c == 102:
        return _word(s, "false", 5, _FALSE)
    if c == 110:
        return _word(s, "null", 4, _NULL)
    return _number(s)


cdef inline object _text(_Scan *s):
    return PyUnicode_FromStringAndSize(s.b + s.lo, s.hi - s.lo)


cdef object _value(_Scan *s):
    # The Python value of the last scalar (not null).
    if s.kind == _STR:
        return _text(s)
    if s.kind == _INT:
        return PyLong_FromLongLong(s.n)
    if s.kind == _FLOAT:
        return s.x
    return s.kind == _TRUE


cdef object _attrs_object(_Scan *s, dict names):
    # An attributes object of strings, numbers and booleans; None when it is not one.
    cdef dict attrs = {}
    s.i += 1  # '{'
    _ws(s)
    if s.i < s.end and s.b[s.i] == 125:  # '}'
        s.i += 1
        return attrs
    while True:
        if s.i >= s.end or s.b[s.i] != 34 or not _string(s):
            return None
        key = _share(names, _text(s), _NAMES_MAX)
        _ws(s)
        if s.i >= s.end or s.b[s.i] != 58:  # ':'
            return None
        s.i += 1
        _ws(s)
        if not _scalar(s) or s.kind == _NULL:
            return None
        attrs[key] = _value(s)
        _ws(s)
        if s.i >= s.end:
            return None
        if s.b[s.i] == 44:  # ','
            s.i += 1
            _ws(s)
            continue
        if s.b[s.i] == 125:
            s.i += 1
            return attrs
        return None


cdef inline int _field(_Scan *s) noexcept:
    # Which field the key b[lo:hi] names (0: none of them).
    cdef Py_ssize_t n = s.hi - s.lo
    cdef const char *k = s.b + s.lo
    if n == 3:
        if memcmp(k, "src", 3) == 0:
            return _F_SRC
        if memcmp(k, "end", 3) == 0:
            return _F_END
    elif n == 4:
        if memcmp(k, "type", 4) == 0:
            return _F_TYPE
        if memcmp(k, "prob", 4) == 0:
            return _F_PROB
    elif n == 5:
        if memcmp(k, "start", 5) == 0:
            return _F_START
        if memcmp(k, "attrs", 5) == 0:
            return _F_ATTRS
    elif n == 2 and k[0] == 105 and k[1] == 100:  # "id"
        return _F_ID
    return 0


# Distinct texts an EventReader shares (one str each): class names and attribute names
# (few), sources (up to a million in the workloads this serves; past the cap a new
# text is used as it comes, so a stream of junk names costs memory only up to it).
cdef Py_ssize_t _NAMES_MAX = 100_000
cdef Py_ssize_t _SOURCES_MAX = 250_000


cdef inline object _share(dict table, object text, Py_ssize_t cap):
    # The str equal to ``text`` that the table holds, else ``text`` (kept, under the cap):
    # the engine's dict lookups by class and by source then find their key by identity,
    # and a million events do not hold a million copies of a few hundred texts.
    shared = table.get(text)
    if shared is not None:
        return shared
    if len(table) < cap:
        table[text] = text
    return text


cdef object _new_event(object cls, object src, object etype, object start, object end, object attrs, object prob, object eid):
    # cls(src, etype, start, end, attrs, prob, eid), field by field (cls: EventBase's
    # subclass), unstamped.
    e = PyType_GenericAlloc(<PyTypeObject *>cls, 0)
    cdef scemon_event *f = ev(e)
    ev_put(&f.src, src)
    ev_put(&f.type, etype)
    ev_put(&f.start, start)
    ev_put(&f.end, end)
    ev_put(&f.attrs, attrs)
    ev_put(&f.prob, prob)
    ev_put(&f.id, eid)
    ev_put(&f.arrival, -1)
    ev_put(&f.moment, -1)
    ev_put(&f.parts, None)
    ev_put(&f.flat, None)
    ev_put(&f.prims, None)
    ev_put(&f.prev, None)
    ev_put(&f.pmb, None)
    return e


cdef class EventReader:
    """``Event.from_dict`` for one reader (a file, a batch): a well-formed event given
    as a dict (exact types, as ``orjson`` gives them) is checked and built here, with
    one shared ``str`` per class name and per source (see ``_share``); anything else
    goes to ``Event.from_dict``. The same Event either way (tests/ecq/test_accel.py)."""

    cdef object cls, slow
    cdef dict names, sources

    def __cinit__(self, cls):
        if not issubclass(cls, EventBase):
            raise TypeError("EventReader reads events of a subclass of EventBase")
        self.cls = cls
        self.slow = cls.from_dict
        self.names = {}
        self.sources = {}

    def __call__(self, data, where=None):
        return self.read(data, where, False)

    cdef object read(self, object data, object where, bint owned):
        # ``owned``: ``data`` was made for this call (a line's ``loads``), so its
        # attributes' dict is the event's own, not a copy.
        if type(data) is not dict:
            return self.slow(data, where)
        cdef dict d = <dict>data
        src = d.get("src")
        etype = d.get("type")
        start_o = d.get("start")
        cdef Py_ssize_t known = 3
        end_o = d.get("end", _ABSENT)
        if end_o is not _ABSENT:
            known += 1
        eid = d.get("id", _ABSENT)
        if eid is not _ABSENT:
            known += 1
        prob_o = d.get("prob", _ABSENT)
        if prob_o is not _ABSENT:
            known += 1
        attrs = d.get("attrs", _ABSENT)
        if attrs is not _ABSENT:
            known += 1
        if len(d) != known or not (type(src) is int or type(src) is str):
            return self.slow(data, where)
        if type(etype) is not str or not etype:
            return self.slow(data, where)
        etype = _share(self.names, etype, _NAMES_MAX)
        if type(src) is str:
            src = _share(self.sources, src, _SOURCES_MAX)
        start = _seconds(start_o)
        if start is None:
            return self.slow(data, where)
        if end_o is _ABSENT or end_o is None:
            end = start
        else:
            end = _seconds(end_o)
            if end is None or <double>end < <double>start:
                return self.slow(data, where)
        if eid is _ABSENT:
            eid = None
        elif eid is not None and not (type(eid) is int or type(eid) is str):
            return self.slow(data, where)
        if prob_o is _ABSENT or prob_o is None:
            prob = 1.0
        elif (type(prob_o) is float or type(prob_o) is int) and 0.0 < prob_o <= 1.0:
            prob = float(prob_o)
        else:
            return self.slow(data, where)
        cdef dict copied
        if attrs is _ABSENT or attrs is None:
            copied = {}
        elif type(attrs) is dict:
            for key, value in (<dict>attrs).items():
                if type(key) is not str:
                    return self.slow(data, where)
                if type(value) is float:
                    if value - value != 0.0:
                        return self.slow(data, where)
                elif not (type(value) is str or type(value) is int or type(value) is bool):
                    return self.slow(data, where)
            copied = <dict>attrs if owned else dict(<dict>attrs)
        else:
            return self.slow(data, where)
        return self.make(src, etype, start, end, copied, prob, eid)

    cdef object plain(self, const char *b, Py_ssize_t at, Py_ssize_t end):
        # The event of a plain line b[at:end] (see "a plain JSON Lines event" above), or
        # None: then the line is not plain, and orjson and ``read`` decide.
        cdef _Scan s
        cdef int seen = 0, f
        cdef double start = 0.0, stop = 0.0, prob = 1.0
        cdef bint has_end = False, number
        src = etype = eid = attrs = None
        s.b, s.i, s.end = b, at, end
        _ws(&s)
        if s.i >= s.end or b[s.i] != 123:  # '{'
            return None
        s.i += 1
        _ws(&s)
        while True:
            if s.i >= s.end or b[s.i] != 34 or not _string(&s):
                return None
            f = _field(&s)
            if f == 0 or seen & f:
                return None
            seen |= f
            _ws(&s)
            if s.i >= s.end or b[s.i] != 58:  # ':'
                return None
            s.i += 1
            _ws(&s)
            if f == _F_ATTRS and s.i < s.end and b[s.i] == 123:
                attrs = _attrs_object(&s, self.names)
                if attrs is None:
                    return None
            else:
                if not _scalar(&s):
                    return None
                number = s.kind == _INT or s.kind == _FLOAT
                if f == _F_SRC or f == _F_ID:  # a string or an integer (an id may be null)
                    if s.kind == _STR or s.kind == _INT:
                        value = _value(&s)
                    elif f == _F_ID and s.kind == _NULL:
                        value = None
                    else:
                        return None
                    if f == _F_SRC:
                        src = value
                    else:
                        eid = value
                elif f == _F_TYPE:
                    if s.kind != _STR or s.hi == s.lo:
                        return None
                    etype = _text(&s)
                elif f == _F_START:
                    if not number:
                        return None
                    start = s.x
                elif f == _F_END or f == _F_PROB:  # a number or null
                    if not number:
                        if s.kind != _NULL:
                            return None
                    elif f == _F_END:
                        stop = s.x
                        has_end = True
                    else:
                        prob = s.x
                elif s.kind != _NULL:  # attrs: an object (above) or null
                    return None
            _ws(&s)
            if s.i >= s.end:
                return None
            if b[s.i] == 44:  # ','
                s.i += 1
                _ws(&s)
                continue
            if b[s.i] == 125:  # '}'
                s.i += 1
                break
            return None
        _ws(&s)
        if s.i != s.end or (seen & (_F_SRC | _F_TYPE | _F_START)) != (_F_SRC | _F_TYPE | _F_START):
            return None
        if (has_end and stop < start) or not (0.0 < prob <= 1.0):
            return None
        etype = _share(self.names, etype, _NAMES_MAX)
        if type(src) is str:
            src = _share(self.sources, src, _SOURCES_MAX)
        start_o = start
        end_o = stop if has_end else start_o
        return self.make(src, etype, start_o, end_o, {} if attrs is None else <dict>attrs, prob, eid)

    def jsonl(
        self, bytes data, Py_ssize_t at, Py_ssize_t index, object loads, list out, object progress,
        list indexes=None
    ):
        """Events from JSON Lines text, from byte ``at`` of ``data`` (whose line there
        is line ``index``) to the first line that is not plainly valid; appended to
        ``out``, each without an id given the line's index as its id; ``progress(index)``
        every 4,096 lines. Blank lines are skipped (and counted). Returns ``(at,
        index)`` of the line it stopped at, ``at == len(data)`` when it read them all:
        the caller reads that line itself, and names its mistake (the line number, the
        column). With ``indexes``, each event's line index is appended to it instead,
        and ids stay as given (the Spark job names id-less events itself).

        A plain line (the common case: see "a plain JSON Lines event") is read here
        without ``loads`` (no dict of fields per line); any other through ``loads`` and
        ``read``. No Python loop, no line ``bytes`` from a file's iterator, no copy of
        each event's attributes: what ``scemon replay`` spent reading the demo's
        payments was about a fifth of its time."""
        cdef const char *buf = data
        cdef Py_ssize_t n = len(data), end, k
        cdef const char *nl
        cdef bint blank
        cdef char c
        while at < n:
            nl = <const char *>memchr(buf + at, 10, n - at)  # b"\n"
            end = n if nl == NULL else nl - buf
            blank = True
            for k in range(at, end):
                c = buf[k]
                if not (c == 32 or c == 9 or c == 13 or c == 11 or c == 12):
                    blank = False
                    break
            if not blank:
                event = self.plain(buf, at, end)
                if event is None:
                    try:
                        event = self.read(loads(data[at:end]), None, True)
                    except Exception:
                        return at, index
                if indexes is not None:
                    indexes.append(index)
                elif ev(event).id == <PyObject *>None:
                    ev_put(&ev(event).id, index)
                out.append(event)
            if progress is not None and not index & 0xFFF:
                progress(index)
            at = end + 1 if end < n else n
            index += 1
        return at, index

    cdef object make(self, object src, object etype, object start, object end, dict attrs, object prob, object eid):
        return _new_event(self.cls, src, etype, start, end, attrs, prob, eid)

    def columns(self, list srcs, list types, list starts, object ends, object texts, object probs, object ids, object loads):
        """Events from a batch's columns (lists of one length; ``ends``, ``texts`` (the
        attributes as JSON object text, read by ``loads``), ``probs`` and ``ids`` may
        be None: every row null), without a dict per row; or None at the first row
        that is not plainly valid (the caller's general path then names it). The same
        checks as ``__call__`` and the same Event; ids stay as given (None included)."""
        cdef Py_ssize_t n = len(srcs), i
        if len(types) != n or len(starts) != n:
            raise ValueError("the columns differ in length")
        for column in (ends, texts, probs, ids):
            if column is not None and len(<list>column) != n:
                raise ValueError("the columns differ in length")
        cdef list out = [None] * n
        cdef dict names = self.names
        cdef dict sources = self.sources
        cdef dict copied
        for i in range(n):
            src = srcs[i]
            if not (type(src) is int or type(src) is str):
                return None
            etype = types[i]
            if type(etype) is not str or not etype:
                return None
            etype = _share(names, etype, _NAMES_MAX)
            if type(src) is str:
                src = _share(sources, src, _SOURCES_MAX)
            start = _seconds(starts[i])
            if start is None:
                return None
            end_o = None if ends is None else (<list>ends)[i]
            if end_o is None:
                end = start
            else:
                end = _seconds(end_o)
                if end is None or <double>end < <double>start:
                    return None
            prob_o = None if probs is None else (<list>probs)[i]
            if prob_o is None:
                prob = 1.0
            elif (type(prob_o) is float or type(prob_o) is int) and 0.0 < prob_o <= 1.0:
                prob = float(prob_o)
            else:
                return None
            eid = None if ids is None else (<list>ids)[i]
            if eid is not None and not (type(eid) is int or type(eid) is str):
                return None
            text = None if texts is None else (<list>texts)[i]
            if text is None:
                copied = {}
            else:
                try:
                    attrs = loads(text)
                except ValueError:  # orjson.JSONDecodeError is one
                    return None
                if type(attrs) is not dict:
                    return None
                for key, value in (<dict>attrs).items():
                    if type(key) is not str:
                        return None
                    if type(value) is float:
                        if value - value != 0.0:
                            return None
                    elif not (type(value) is str or type(value) is int or type(value) is bool):
                        return None
                copied = <dict>attrs
            out[i] = self.make(src, etype, start, end, copied, prob, eid)
        return out


@cython.freelist(8192)
cdef class Match:
    """``ecq.match.Match``, compiled: the same constructor, attributes and methods (the
    functions of ecq.match). The engine makes a few matches per event at thousands of
    queries, and in CPython each was six allocations (the object, ``seq``, ``start``,
    ``attrs``, the events list and its items), each a read of a cold free block. Here
    the numbers are C values (made into Python objects when read), ``attrs`` is made
    when first read, the kernel's matches hold their events inside until ``events`` is
    read, and the object comes from a free list (an array: no chain of cold reads)."""

    def __init__(
        self, query, src, double start, double end, events, attrs=None, double prob=1.0, long long seq=-1,
        long long trigger=-1
    ):
        self.query = query
        self.src = src
        self.start = start
        self.end = end
        self.drop_inline()
        self._events = events
        self._attrs = attrs
        self.prob = prob
        self.seq = seq
        self.trigger = trigger

    def __dealloc__(self):
        self.drop_inline()

    cdef void drop_inline(self) noexcept:
        cdef Py_ssize_t k
        for k in range(self.nev):
            Py_XDECREF(self.held[k])
            self.held[k] = NULL
        self.nev = 0

    @property
    def events(self):
        cdef Py_ssize_t k
        if self._events is None:
            self._events = [<object>self.held[k] for k in range(self.nev)]
            self.drop_inline()
        return self._events

    @events.setter
    def events(self, value):
        self.drop_inline()
        self._events = value

    @property
    def attrs(self):
        if self._attrs is None:
            self._attrs = {}
        return self._attrs

    @attrs.setter
    def attrs(self, value):
        self._attrs = value

    # The methods are ecq.match's functions (imported when called: ecq.match imports
    # this module).

    def __repr__(self):
        from ecq.match import describe

        return describe(self)

    def __reduce__(self):
        from ecq.match import fields

        return (Match, fields(self))

    def event_ids(self, name=None):
        """``events`` with each event replaced by ``name(event)`` (default: its ``id``, or
        its arrival index when it has none), keeping the nesting of groups."""
        from ecq.match import event_ids

        return event_ids(self, name)

    def arrivals(self):
        """``events`` as arrival indexes (nested the same way); what tests compare."""
        from ecq.match import arrivals

        return arrivals(self)

    def to_dict(self, name=None):
        """The wire form of docs/semantics.md §9."""
        from ecq.match import to_dict

        return to_dict(self, name)


cdef inline Py_ssize_t _event_count(Match c) except -1:
    return c.nev if c._events is None else len(<list?>c._events)


cdef inline object _event_at(Match c, Py_ssize_t k):
    # Entry k of the match's events, held inline or in its list.
    return <object>c.held[k] if c._events is None else (<list>c._events)[k]


cdef inline object _plain_id(object e):
    # How the wire names a primitive event (its id, else its arrival index); _ABSENT
    # for anything else (a Kleene group's list, a derived instance), which only
    # ``Match.to_dict`` writes.
    if not isinstance(e, _EventBase):
        return _ABSENT
    cdef scemon_event *f = ev(e)
    if f.parts == NULL or <object>f.parts is not None:
        return _ABSENT
    eid = ev_get(f.id, "id")
    return eid if eid is not None else ev_get(f.arrival, "arrival")


def write_match(m):
    """``Match.to_dict()``: for a match of primitive events, its wire form built here
    (events named by id, or arrival index); anything else goes to ``to_dict``."""
    if type(m) is not Match:
        return m.to_dict()
    cdef Match c = <Match>m
    cdef list ids = []
    cdef Py_ssize_t k
    for k in range(_event_count(c)):
        eid = _plain_id(_event_at(c, k))
        if eid is _ABSENT:
            return m.to_dict()
        ids.append(eid)
    return {
        "query": c.query,
        "src": c.src,
        "start": c.start,
        "end": c.end,
        "events": ids,
        "attrs": {} if c._attrs is None else dict(c._attrs),
        "prob": c.prob,
        "seq": c.seq,
    }


# ------------------------------------------------------------ a block of matches as text

cdef extern from "Python.h":
    const char *PyUnicode_AsUTF8AndSize(object s, Py_ssize_t *size) except NULL
    Py_ssize_t PyUnicode_GET_LENGTH(object s)
    object PyUnicode_DecodeUTF8(const char *s, Py_ssize_t size, const char *errors)
    object PyBytes_FromStringAndSize(const char *s, Py_ssize_t size)
    long long PyLong_AsLongLongAndOverflow(object o, int *overflow) except? -1
    void *PyMem_Malloc(size_t n)
    void *PyMem_Realloc(void *p, size_t n)
    void PyMem_Free(void *p)



@cython.final
cdef class _Text:
    # A growing UTF-8 buffer and its length in characters (what ``str`` indexes count).
    cdef char *buf
    cdef Py_ssize_t size, cap, chars

    def __cinit__(self, Py_ssize_t cap):
        self.cap = cap if cap > 64 else 64
        self.buf = <char *>PyMem_Malloc(self.cap)
        if self.buf == NULL:
            raise MemoryError()
        self.size = 0
        self.chars = 0

    def __dealloc__(self):
        PyMem_Free(self.buf)

    cdef inline int room(self, Py_ssize_t n) except -1:
        if self.size + n <= self.cap:
            return 0
        return self.grow(n)

    cdef int grow(self, Py_ssize_t n) except -1:
        cdef Py_ssize_t cap = self.cap
        cdef char *grown
        while self.size + n > cap:
            cap *= 2
        grown = <char *>PyMem_Realloc(self.buf, cap)
        if grown == NULL:
            raise MemoryError()
        self.buf = grown
        self.cap = cap
        return 0

    cdef inline int ascii(self, const char *s, Py_ssize_t n) except -1:
        self.room(n)
        memcpy(self.buf + self.size, s, n)
        self.size += n
        self.chars += n
        return 0

    cdef int text(self, str s) except -1:
        # Any str, already JSON (a fragment ``dumps`` wrote).
        cdef Py_ssize_t n
        cdef const char *u = PyUnicode_AsUTF8AndSize(s, &n)
        self.room(n)
        memcpy(self.buf + self.size, u, n)
        self.size += n
        self.chars += PyUnicode_GET_LENGTH(s)
        return 0

    cdef int string(self, str s, object dumps) except -1:
        # A JSON string: printable ASCII with nothing to escape is written as it is;
        # anything else (escapes, non-ASCII) as ``dumps`` writes it.
        cdef Py_ssize_t n, k
        cdef const char *u = PyUnicode_AsUTF8AndSize(s, &n)
        cdef unsigned char c
        if n != PyUnicode_GET_LENGTH(s):
            return self.text(dumps(s))
        for k in range(n):
            c = <unsigned char>u[k]
            if c < 0x20 or c == 0x22 or c == 0x5C or c >= 0x7F:
                return self.text(dumps(s))
        self.room(n + 2)
        self.buf[self.size] = b'"'
        memcpy(self.buf + self.size + 1, u, n)
        self.buf[self.size + n + 1] = b'"'
        self.size += n + 2
        self.chars += n + 2
        return 0

    cdef int integer(self, object v, object dumps) except -1:
        cdef int overflow = 0
        cdef long long x = PyLong_AsLongLongAndOverflow(v, &overflow)
        if overflow:
            return self.text(dumps(v))  # beyond 64 bits: as the encoder decides
        return self.decimal(x)

    cdef int decimal(self, long long x) except -1:
        cdef char digits[24]
        cdef int k = 24
        cdef unsigned long long u = <unsigned long long>x
        if x < 0:
            u = 0 - u
        while True:
            k -= 1
            digits[k] = <char>(48 + u % 10)
            u //= 10
            if u == 0:
                break
        if x < 0:
            k -= 1
            digits[k] = b'-'
        return self.ascii(digits + k, 24 - k)

    cdef int scalar(self, object v, object dumps) except -1:
        # An event's id or a match's source: a str or an int as written natively.
        if type(v) is str:
            return self.string(<str>v, dumps)
        if type(v) is int:
            return self.integer(v, dumps)
        return self.text(dumps(v))


cdef int _ids(_Text out, Match c, object dumps) except -1:
    # The ids of a match of primitive events (as ``write_match`` names them) written
    # as a JSON array; 0 for anything else (groups, nested matches), whose partial
    # text the caller then takes back.
    cdef Py_ssize_t k
    out.ascii("[", 1)
    for k in range(_event_count(c)):
        eid = _plain_id(_event_at(c, k))
        if eid is _ABSENT:
            return 0
        if k:
            out.ascii(",", 1)
        out.scalar(eid, dumps)
    out.ascii("]", 1)
    return 1


cdef class _Floats:
    # The text of each float of a chunk of matches (start, end, prob of each compiled
    # one), all written by one ``dumps`` of them: exactly as the encoder writes floats.
    cdef object text
    cdef const char *nums
    cdef Py_ssize_t *spans
    cdef Py_ssize_t count

    def __cinit__(self):
        self.spans = NULL

    def __dealloc__(self):
        PyMem_Free(self.spans)

    cdef int read(self, list matches, Py_ssize_t lo, Py_ssize_t hi, object dumps) except -1:
        cdef list floats = []
        cdef Match c
        cdef Py_ssize_t k, at, end, nlen
        cdef const char *nums
        for k in range(lo, hi):
            m = matches[k]
            if type(m) is Match:
                c = <Match>m
                floats.append(c.start)
                floats.append(c.end)
                floats.append(c.prob)
        self.text = dumps(floats)
        nums = self.nums = PyUnicode_AsUTF8AndSize(self.text, &nlen)
        PyMem_Free(self.spans)
        self.count = len(floats)
        self.spans = <Py_ssize_t *>PyMem_Malloc((2 * self.count + 1) * sizeof(Py_ssize_t))
        if self.spans == NULL:
            raise MemoryError()
        # Each number's text: between '[' or ',' and the next ',' or ']', spaces aside.
        at = 0
        while at < nlen and nums[at] != b'[':
            at += 1
        for k in range(self.count):
            at += 1
            while at < nlen and (nums[at] == b' ' or nums[at] == b'\n'):
                at += 1
            end = at
            while end < nlen and nums[end] != b',' and nums[end] != b']' and nums[end] != b' ' and nums[end] != b'\n':
                end += 1
            self.spans[2 * k] = at
            self.spans[2 * k + 1] = end - at
            at = end
            while at < nlen and nums[at] != b',' and nums[at] != b']':
                at += 1
        return 0

    cdef inline int write(self, _Text out, Py_ssize_t k) except -1:
        return out.ascii(self.nums + self.spans[2 * k], self.spans[2 * k + 1])


cdef class BlockText:
    """The wire text of a batch's matches, written a chunk at a time: one JSON array
    (``"[m0,m1,...]"``, each ``m`` the text of ``Match.to_dict()`` with its ``seq``) and
    where each match starts in it, in characters, with one start more (the text's
    length; 1 for no match): what ``service.server.blocks.Block`` takes.

    The same text as ``dumps`` of each wire dict joined, with no dict, list or text per
    match: the floats are written by one ``dumps`` of a chunk's floats (so exactly as
    the encoder writes floats), plain ASCII strings and 64-bit integers here, anything
    else (strings to escape, larger integers, matches of groups or with attributes) by
    ``dumps`` itself. O(total length). ``ecq.kernel.make.block_writer`` drives it in
    chunks; ``ecq.match.write_block`` is the pure twin.

    With ``lines``, the text is JSON Lines instead, as ``scemon replay`` writes them:
    each match's text (its own ``seq``; ``first`` is not used) and a newline, read by
    :meth:`finish_lines`; ``ecq.kernel.make.lines_writer`` drives it."""

    cdef _Text out
    cdef _Floats floats
    cdef list starts
    cdef object dumps
    cdef bint done, lines

    def __init__(self, dumps, Py_ssize_t expected=0, bint lines=False):
        self.out = _Text(expected * 128 + 2)
        self.floats = _Floats()
        self.starts = []
        self.dumps = dumps
        self.lines = lines
        if not lines:
            self.out.ascii("[", 1)

    def add(self, list matches, Py_ssize_t lo, Py_ssize_t hi, long long first):
        """Write ``matches[lo:hi]``, numbered from ``first``."""
        cdef _Text out = self.out
        cdef _Floats floats = self.floats
        cdef list starts = self.starts
        cdef object dumps = self.dumps
        cdef Py_ssize_t k, at = 0, size, chars  # at: the chunk's next float
        cdef long long seq = first
        cdef bint lines = self.lines
        cdef Match c
        if lo < 0 or hi > len(matches) or lo > hi:
            raise IndexError(f"no matches [{lo}:{hi}] of {len(matches)}")
        if self.done:
            raise ValueError("the block's text is finished")
        floats.read(matches, lo, hi, dumps)
        for k in range(lo, hi):
            m = matches[k]
            if not lines:
                if len(starts):
                    out.ascii(",", 1)
                starts.append(out.chars)
            size, chars = out.size, out.chars
            if type(m) is Match:
                c = <Match>m
                at += 3
                if c._attrs is None or not len(c._attrs):
                    out.ascii('{"query":', 9)
                    out.scalar(c.query, dumps)
                    out.ascii(',"src":', 7)
                    out.scalar(c.src, dumps)
                    out.ascii(',"start":', 9)
                    floats.write(out, at - 3)
                    out.ascii(',"end":', 7)
                    floats.write(out, at - 2)
                    out.ascii(',"events":', 10)
                    if _ids(out, c, dumps):
                        out.ascii(',"attrs":{},"prob":', 19)
                        floats.write(out, at - 1)
                        out.ascii(',"seq":', 7)
                        out.decimal(c.seq if lines else seq)
                        if lines:
                            out.ascii("}\n", 2)
                        else:
                            out.ascii("}", 1)
                        seq += 1
                        continue
                    out.size, out.chars = size, chars  # not plain after all: start again
            wire = m.to_dict()
            if not lines:
                wire["seq"] = seq
            out.text(dumps(wire))
            if lines:
                out.ascii("\n", 1)
            seq += 1

    def finish(self):
        """The text and the starts; nothing can be added after."""
        if self.done:
            raise ValueError("the block's text is finished")
        if self.lines:
            raise ValueError("a text of lines is read by finish_lines")
        self.done = True
        if not self.starts:
            return "[]", [1]  # as ``Block.of`` has it
        self.out.ascii("]", 1)
        self.starts.append(self.out.chars)
        return PyUnicode_DecodeUTF8(self.out.buf, self.out.size, NULL), self.starts

    def finish_lines(self):
        """The JSON Lines text as UTF-8 bytes (``lines`` only); nothing can be added after."""
        if self.done:
            raise ValueError("the block's text is finished")
        if not self.lines:
            raise ValueError("a block's text is read by finish")
        self.done = True
        return PyBytes_FromStringAndSize(self.out.buf, self.out.size)


cdef extern from "Python.h":
    PyObject *PyDict_GetItem(object d, object key)


cdef class KeyViews:
    """A batch's events as one partition key's network sees them: per event what
    ``ecq.partitions.key_value`` and ``view`` make, built here. The keyed path makes a
    view per event per key in use, and in Python that loop cost about as much as one
    network's own run (tests/ecq/test_partitions_native.py holds the two to the same
    views)."""

    cdef object cls, typed
    cdef frozenset fields

    def __cinit__(self, cls, typed, frozenset fields):
        if not issubclass(cls, EventBase):
            raise TypeError("KeyViews makes events of a subclass of EventBase")
        self.cls = cls
        self.typed = typed
        self.fields = fields

    cdef object read(self, object e, scemon_event *f, object attr):
        # ``_read``: the attribute, else the field of that name, else _ABSENT.
        cdef PyObject *v = PyDict_GetItem(ev_get(f.attrs, "attrs"), attr)
        if v != NULL:
            return <object>v
        if attr in self.fields:
            return getattr(e, attr)
        return _ABSENT

    cdef inline object part(self, object v):
        # ``_typed``: ints and strings as they are, anything else wrapped.
        if type(v) is int or type(v) is str:
            return v
        return self.typed(v)

    cdef object view(self, scemon_event *f, object src, object etype, object attrs):
        return _new_event(
            self.cls, src, etype, ev_get(f.start, "start"), ev_get(f.end, "end"), attrs,
            ev_get(f.prob, "prob"), ev_get(f.id, "id"),
        )

    cdef object value_of(self, object e, scemon_event *f, object etype, tuple key, object classes):
        # The event's value of ``key`` when its class is in ``classes``, else _ABSENT.
        cdef list parts
        cdef Py_ssize_t n = len(key)
        if etype not in classes:
            return _ABSENT
        if n == 1:
            v = self.read(e, f, key[0])
            return v if v is _ABSENT else self.part(v)
        if n == 0:
            return None
        parts = []
        for attr in key:
            v = self.read(e, f, attr)
            if v is _ABSENT:
                return _ABSENT
            parts.append(self.part(v))
        return tuple(parts)

    def seen(self, list events, list keys, object owns=None):
        """Per key of ``keys`` (``(key, classes, keep_src)`` each, a keyed network's):
        ``(items, unseen)``, where per event of ``events`` ``items`` holds its view for
        the key when its class is in ``classes``, it has the key's attributes and
        ``owns(key, value)`` (when given) holds of the view's value (``attrs`` with
        ``src`` added under ``keep_src``); else the event itself, marked 1 in ``unseen``
        (bytes, one per event): an event the network does not see, which the compiled
        event loop only counts and reads the end of (``CompiledKernel.run_events``),
        standing for its placeholder view (``ecq.partitions.placeholder``). Every key's
        views of an event are made together: its attributes are read once from memory."""
        cdef Py_ssize_t count = len(events), nk = len(keys), at = 0, j
        cdef list outs = [[] for j in range(nk)]
        cdef list key_of = [spec[0] for spec in keys]
        cdef list classes_of = [spec[1] for spec in keys]
        cdef list keep_of = [bool(spec[2]) for spec in keys]
        cdef bytearray marks = bytearray(nk * count)
        cdef unsigned char *mark = marks
        cdef scemon_event *f
        for e in events:
            if not isinstance(e, _EventBase):
                raise TypeError("KeyViews reads events of a subclass of EventBase")
            f = ev(e)
            etype = ev_get(f.type, "type")
            for j in range(nk):
                key = <tuple?>key_of[j]
                value = self.value_of(e, f, etype, key, classes_of[j])
                if value is not _ABSENT and owns is not None and not owns(key, value):
                    value = _ABSENT  # a value another shard owns
                if value is _ABSENT:
                    (<list>outs[j]).append(e)
                    mark[j * count + at] = 1
                    continue
                attrs = ev_get(f.attrs, "attrs")
                if keep_of[j] and "src" not in attrs:
                    attrs = dict(attrs)
                    attrs["src"] = ev_get(f.src, "src")
                (<list>outs[j]).append(self.view(f, value, etype, attrs))
            at += 1
        return [(outs[j], bytes(marks[j * count : (j + 1) * count])) for j in range(nk)]
