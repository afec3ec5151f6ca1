"""Tokens of the query language, each with the line and column where it was written.

Lexing rules (the ones a reader could not guess):

* **Names.** A name starts with a letter or ``_`` and continues with letters, digits and
  ``_``. A ``-`` *directly between two name characters* (no spaces either side) is part of
  the name, so ``SHELF-READING`` and ``CNMA-1`` are single names. Consequently
  ``a.x-b.y`` reads the attribute ``x-b``: write arithmetic minus with spaces,
  ``a.x - b.y``. ``--`` always starts a comment to the end of the line.
* **Keywords** are names compared case-insensitively (``Token.key`` is upper-cased).
* **Numbers**: ``12``, ``1.5``, ``2e-3``; ``$20`` / ``$20.5`` is currency (the number);
  ``20%`` is a percentage (0.2). ``$x1`` (``$`` then ``x`` then digits) is a positional
  component reference, not currency.
* **Strings**: ``'text'`` or ``"text"``; a backslash escapes the next character
  (``\\\\ \\' \\" \\n \\r \\t \\uXXXX \\UXXXXXXXX``). A string cannot span lines.
* ``@name`` is a derived class (the matches of the registered query ``name``).
* ``==`` is ``=``, ``<>`` is ``!=``; ``∧ ∨ ¬`` are ``AND OR NOT``.

Lines are counted as :meth:`str.splitlines` counts them, so that anyone building an
excerpt with ``splitlines`` points at the same line.

How: :func:`tokenize` reads the usual tokens (ASCII names, numbers, operators, plain
strings, spaces, tabs and ``\\n``) with one ``findall`` of a compiled pattern; any other
text (other whitespace, non-ASCII names, escapes, every error) is read by
``_tokenize_all``, one ``finditer`` over a pattern with a named group per token shape.
Both are held to a character-at-a-time lexer written from the rules above
(``tests/ecq/language/char_lexer.py``): same tokens, positions and errors.
"""

from __future__ import annotations

import functools
import math
import re
from typing import Any, NamedTuple

from ecq.errors import ParseError
from ecq.language.source import excerpt

__all__ = [
    "Token",
    "tokenize",
    "IDENT",
    "NUMBER",
    "MONEY",
    "PERCENT",
    "STRING",
    "POSREF",
    "DERIVED",
    "OP",
    "EOF",
]

IDENT = "IDENT"
NUMBER = "NUMBER"
MONEY = "MONEY"
PERCENT = "PERCENT"
STRING = "STRING"
POSREF = "POSREF"
DERIVED = "DERIVED"
OP = "OP"
EOF = "EOF"


class Token(NamedTuple):
    """One token. ``text`` is as written; ``key`` is what the parser compares against
    (upper-cased name, canonical operator, or ``<KIND>`` for literals); ``value`` is the
    literal's value (number or string contents)."""

    kind: str
    text: str
    line: int
    column: int
    key: str
    value: int | float | str | None = None


# Line breaks exactly as str.splitlines() knows them ("\r\n" counts once).
_BREAKS = r"\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
# The rest of a name: name characters (re's \w is exactly str.isalnum() or "_"), and a
# "-" directly between two of them.
_TAIL = r"\w*(?:-\w+)*"
_ESCAPE = r"""\\(?:[\\'"nrt]|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8})"""

# One alternative per token shape, tried in this order at each position (the first that
# matches wins, so "--" is a comment before "-" is an operator, "<=" before "<"). The
# last alternative takes any single character, so the scan never skips text: whatever
# lands there is an error, or a string whose error the slow path finds.
_TOKENS = (
    rf"""
     (?P<space>[^\S{_BREAKS}]+)
    |(?P<name>[A-Za-z_]{_TAIL})
    |(?P<comment>--[^{_BREAKS}]*)
    |(?P<op>==|!=|<>|<=|>=|[=<>+\-*/;&|!^{{}}\[\](),.:\u2227\u2228\u00ac])
    |(?P<number>[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?%?)
    |(?P<newline>\r\n|[{_BREAKS}])
    |(?P<string>'(?:[^'\\{_BREAKS}]|{_ESCAPE})*'|"(?:[^"\\{_BREAKS}]|{_ESCAPE})*")
    |(?P<money>\$[0-9]+(?:\.[0-9]+)?)
    |(?P<posref>\$[xX][0-9]+)(?P<badpos>\w{_TAIL})?
    |(?P<derived>@[A-Za-z_]{_TAIL})
    |(?P<uname>[^\W\d]{_TAIL})
    |(?P<uderived>@[^\W\d]{_TAIL})
    |(?P<other>.)
    """
)


@functools.cache
def _pattern(source: str) -> re.Pattern[str]:
    """A token pattern, compiled on first use (importing the language stays cheap)."""
    return re.compile(source, re.VERBOSE | re.DOTALL)



_OPS = {
    **{c: c for c in "=<>+-*/;&|!^{}[](),.:"},
    "==": "=",
    "!=": "!=",
    "<>": "!=",
    "<=": "<=",
    ">=": ">=",
    "∧": "AND",
    "∨": "OR",
    "¬": "NOT",
}
_ESCAPES = {"\\": "\\", "'": "'", '"': '"', "n": "\n", "r": "\r", "t": "\t"}
_LINE_BREAKS = frozenset("\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029")
_new_token = tuple.__new__


# The common tokens, each with the spaces and tabs before it: the fast path of
# tokenize(). Anything else lands in the last alternative and sends the whole text to
# _tokenize_all (other whitespace, non-ASCII names, escapes, every error).
_COMMON = (
    rf"""([ \t]*)(
     [A-Za-z_]{_TAIL}
    |--[^{_BREAKS}]*
    |==|!=|<>|<=|>=|[=<>+\-*/;&|!^{{}}\[\](),.:]
    |[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?%?
    |\r\n?|\n
    |'[^'\\{_BREAKS}]*'|"[^"\\{_BREAKS}]*"
    |\$[0-9]+(?:\.[0-9]+)?
    |\$[xX][0-9]+(?!\w)
    |@[A-Za-z_]{_TAIL}
    |.)"""
)
_NAME_START = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
_OP_START = frozenset("=<>+-*/;&|!^{}[](),.:")
_DIGITS = frozenset("0123456789")


def tokenize(text: str) -> list[Token]:
    """Split ``text`` into tokens ending with an ``EOF`` token; raises :class:`ParseError`
    at the first character that cannot start a token."""
    lexer = compiled_lexer()
    if lexer is not None:
        tokens: list[Token] | None = lexer.tokenize(text)
        if tokens is not None:
            return tokens
    return _tokenize_common(text)


@functools.cache
def compiled_lexer() -> Any:
    """The compiled kernel's lexer (``ecq.kernel._lexer.Lexer``: this module's common
    path and the shape key, in C), or None when the compiled kernel is off or not built."""
    from ecq.kernel.select import compiled_module

    module = compiled_module("_lexer")
    if module is None:
        return None
    kinds = {k: k for k in (IDENT, NUMBER, MONEY, PERCENT, STRING, POSREF, DERIVED, OP, EOF)}
    return module.Lexer(Token, kinds, _OPS)


def _tokenize_common(text: str) -> list[Token]:
    """:func:`tokenize` in Python: the common tokens with one ``findall``, any other text
    by :func:`_tokenize_all`."""
    tokens: list[Token] = []
    append = tokens.append
    line = 1
    column = 1
    for space, raw in _pattern(_COMMON).findall(text):
        if space:
            column += len(space)
        c = raw[0]
        if c in _NAME_START:
            append(_new_token(Token, (IDENT, raw, line, column, raw.upper(), None)))
        elif c in _OP_START:
            if c == "-" and len(raw) > 1:
                continue  # a comment: a line break or the end of the text follows
            append(_new_token(Token, (OP, raw, line, column, _OPS[raw], None)))
        elif c in _DIGITS:
            if raw.isdigit():
                append(_new_token(Token, (NUMBER, raw, line, column, "<NUMBER>", int(raw))))
            elif raw[-1] == "%":
                value = _number(text, raw[:-1], line, column, raw[:-1])
                append(_new_token(Token, (PERCENT, raw, line, column, "<PERCENT>", value / 100)))
            else:
                value = _number(text, raw, line, column, raw)
                append(_new_token(Token, (NUMBER, raw, line, column, "<NUMBER>", value)))
        elif c == "\n" or c == "\r":
            line += 1
            column = 1
            continue
        elif len(raw) == 1:
            return _tokenize_all(text)
        elif c == "$":
            if raw[1] in _DIGITS:
                value = _number(text, raw[1:], line, column, raw)
                append(_new_token(Token, (MONEY, raw, line, column, "<MONEY>", value)))
            else:
                append(_new_token(Token, (POSREF, raw, line, column, "<POSREF>", None)))
        elif c == "@":
            append(_new_token(Token, (DERIVED, raw, line, column, "<DERIVED>", None)))
        else:  # a string without escapes
            append(_new_token(Token, (STRING, raw, line, column, "<STRING>", raw[1:-1])))
        column += len(raw)
    return _ended(tokens)


def _tokenize_all(text: str) -> list[Token]:
    """:func:`tokenize` for any text: every token shape and every error."""
    tokens: list[Token] = []
    append = tokens.append
    line = 1
    line_start = 0  # index of the first character of the current line
    for m in _pattern(_TOKENS).finditer(text):
        group = m.lastgroup
        if group == "space" or group == "comment":
            continue
        raw = m.group()
        start = m.start()
        if group == "name":
            append(_new_token(Token, (IDENT, raw, line, start - line_start + 1, raw.upper(), None)))
        elif group == "op":
            append(_new_token(Token, (OP, raw, line, start - line_start + 1, _OPS[raw], None)))
        elif group == "newline":
            line += 1
            line_start = m.end()
        elif group == "number":
            column = start - line_start + 1
            if raw[-1] == "%":
                digits = raw[:-1]
                value = _number(text, digits, line, column, digits)
                append(_new_token(Token, (PERCENT, raw, line, column, "<PERCENT>", value / 100)))
            else:
                value = _number(text, raw, line, column, raw)
                append(_new_token(Token, (NUMBER, raw, line, column, "<NUMBER>", value)))
        elif group == "string":
            column = start - line_start + 1
            contents = raw[1:-1] if "\\" not in raw else _unescape(text, raw, line, column)
            append(_new_token(Token, (STRING, raw, line, column, "<STRING>", contents)))
        elif group == "money":
            column = start - line_start + 1
            value = _number(text, raw[1:], line, column, raw)
            append(_new_token(Token, (MONEY, raw, line, column, "<MONEY>", value)))
        elif group == "posref":
            append(_new_token(Token, (POSREF, raw, line, start - line_start + 1, "<POSREF>", None)))
        elif group == "derived":
            append(_new_token(Token, (DERIVED, raw, line, start - line_start + 1, "<DERIVED>", None)))
        elif group == "uname" and raw[0].isalpha():
            append(_new_token(Token, (IDENT, raw, line, start - line_start + 1, raw.upper(), None)))
        elif group == "uderived" and raw[1].isalpha():
            append(_new_token(Token, (DERIVED, raw, line, start - line_start + 1, "<DERIVED>", None)))
        else:
            _fail(text, group, m, line, start - line_start + 1)
    return _ended(tokens)


def _error(text: str, message: str, line: int, column: int, token: str) -> ParseError:
    return ParseError(message, line, column, token, excerpt(text, line, column))


def _number(text: str, digits: str, line: int, column: int, token: str) -> int | float:
    """The value of ``digits`` (ASCII digits, maybe a fraction and an exponent)."""
    if digits.isdigit():
        return int(digits)
    value = float(digits)
    if not math.isfinite(value):
        raise _error(text, "number out of range", line, column, token)
    return value


def _unescape(text: str, raw: str, line: int, column: int) -> str:
    """The contents of the string token ``raw``, whose escapes are all well-formed."""

    def one(m: re.Match[str]) -> str:
        escape = m.group()
        if len(escape) == 2:
            return _ESCAPES[escape[1]]
        code = int(escape[2:], 16)
        if code > 0x10FFFF:
            bad = escape[:2]
            raise _error(text, f"unknown escape {bad!r} in string", line, column + m.start() + 1, bad)
        return chr(code)

    return _pattern(_ESCAPE).sub(one, raw[1:-1])


def _fail(text: str, group: str | None, m: re.Match[str], line: int, column: int) -> None:
    """Raise the error for a match that is not a token (see ``_TOKENS``)."""
    raw = m.group()
    if group == "badpos":
        bad = text[m.start("posref") : m.end()]
        raise _error(text, f"bad positional reference {bad!r}: write $x1, $x2, ...", line, column, bad)
    if raw[0] == "@":
        raise _error(text, "expected a query name after '@'", line, column, "@")
    if raw == "$":
        raise _error(
            text, "expected an amount ($20) or a positional reference ($x1) after '$'", line, column, "$"
        )
    if raw in ("'", '"'):
        _string_error(text, m.start(), line, column)
    raise _error(text, f"unexpected character {raw[0]!r}", line, column, raw[0])


def _string_error(text: str, start: int, line: int, column: int) -> None:
    """Raise the error of the malformed string starting at ``start``: the first line
    break or end of text before its closing quote, or the first unknown escape."""
    quote = text[start]
    i = start + 1
    while True:
        ch = text[i] if i < len(text) else ""
        if ch == "" or ch in _LINE_BREAKS:
            raise _error(text, "unterminated string", line, column, text[start:i])
        i += 1
        if ch == quote:
            break  # not reached: a string the pattern rejects has an error before its end
        if ch != "\\":
            continue
        ch = text[i] if i < len(text) else ""
        if ch in _ESCAPES:
            i += 1
            continue
        if ch in ("u", "U"):
            width = 4 if ch == "u" else 8
            hex_digits = text[i + 1 : i + 1 + width]
            if len(hex_digits) == width and all(c in "0123456789abcdefABCDEF" for c in hex_digits):
                if int(hex_digits, 16) <= 0x10FFFF:
                    i += 1 + width
                    continue
        bad = "\\" + ch
        raise _error(text, f"unknown escape {bad!r} in string", line, column + (i - 1 - start), bad)
    raise AssertionError("a string the token pattern rejects has an error")


def _ended(tokens: list[Token]) -> list[Token]:
    """``tokens`` with the end-of-input token after the last one (at 1:1 when empty)."""
    if tokens:
        last = tokens[-1]
        tokens.append(_new_token(Token, (EOF, "", last.line, last.column + len(last.text), "<EOF>", None)))
    else:
        tokens.append(_new_token(Token, (EOF, "", 1, 1, "<EOF>", None)))
    return tokens
