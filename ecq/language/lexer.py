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
"""

from __future__ import annotations

import math
from dataclasses import dataclass

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


@dataclass(frozen=True)
class Token:
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
_LINE_BREAKS = frozenset("\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029")

_TWO_CHAR_OPS = {"==": "=", "!=": "!=", "<>": "!=", "<=": "<=", ">=": ">="}
_ONE_CHAR_OPS = {
    **{c: c for c in "=<>+-*/;&|!^{}[](),."},
    "∧": "AND",
    "∨": "OR",
    "¬": "NOT",
}
_ESCAPES = {"\\": "\\", "'": "'", '"': '"', "n": "\n", "r": "\r", "t": "\t"}


def _is_name_start(ch: str) -> bool:
    return ch.isalpha() or ch == "_"


def _is_name_char(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def _is_digit(ch: str) -> bool:
    return "0" <= ch <= "9"


def tokenize(text: str) -> list[Token]:
    """Split ``text`` into tokens ending with an ``EOF`` token; raises :class:`ParseError`
    at the first character that cannot start a token."""
    return _Lexer(text).run()


class _Lexer:
    def __init__(self, text: str) -> None:
        self.text = text
        self.i = 0
        self.line = 1
        self.column = 1
        self.tokens: list[Token] = []

    # ------------------------------------------------------------------ helpers

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.text[j] if j < len(self.text) else ""

    def error(self, message: str, line: int, column: int, token: str) -> ParseError:
        return ParseError(message, line, column, token, excerpt(self.text, line, column))

    def emit(self, kind: str, start: int, key: str, value: int | float | str | None = None) -> None:
        raw = self.text[start : self.i]
        self.tokens.append(Token(kind, raw, self.line, self.column, key, value))
        self.column += self.i - start

    # --------------------------------------------------------------------- run

    def run(self) -> list[Token]:
        text = self.text
        while self.i < len(text):
            ch = text[self.i]
            if ch in _LINE_BREAKS:
                self.i += 2 if text.startswith("\r\n", self.i) else 1
                self.line += 1
                self.column = 1
            elif ch.isspace():
                self.i += 1
                self.column += 1
            elif text.startswith("--", self.i):
                while self.i < len(text) and text[self.i] not in _LINE_BREAKS:
                    self.i += 1
            elif _is_name_start(ch):
                self.name()
            elif _is_digit(ch):
                self.number()
            elif ch == "$":
                self.dollar()
            elif ch == "@":
                self.derived()
            elif ch in "'\"":
                self.string()
            elif text[self.i : self.i + 2] in _TWO_CHAR_OPS:
                start = self.i
                self.i += 2
                self.emit(OP, start, _TWO_CHAR_OPS[text[start : self.i]])
            elif ch in _ONE_CHAR_OPS:
                start = self.i
                self.i += 1
                self.emit(OP, start, _ONE_CHAR_OPS[ch])
            else:
                raise self.error(f"unexpected character {ch!r}", self.line, self.column, ch)
        if self.tokens:
            last = self.tokens[-1]
            line, column = last.line, last.column + len(last.text)
        else:
            line, column = 1, 1
        self.tokens.append(Token(EOF, "", line, column, "<EOF>"))
        return self.tokens

    # ------------------------------------------------------------------ tokens

    def scan_name(self) -> None:
        """Advance over a name (the ``-`` rule of the module docstring)."""
        text = self.text
        self.i += 1
        while self.i < len(text):
            ch = text[self.i]
            if _is_name_char(ch):
                self.i += 1
            elif ch == "-" and _is_name_char(self.peek(1)):
                self.i += 2
            else:
                break

    def name(self) -> None:
        start = self.i
        self.scan_name()
        self.emit(IDENT, start, self.text[start : self.i].upper())

    def derived(self) -> None:
        start = self.i
        if not _is_name_start(self.peek(1)):
            raise self.error("expected a query name after '@'", self.line, self.column, "@")
        self.i += 1
        self.scan_name()
        self.emit(DERIVED, start, "<DERIVED>")

    def digits(self) -> None:
        while _is_digit(self.peek()):
            self.i += 1

    def number(self) -> None:
        start = self.i
        is_float = self.unsigned(allow_exponent=True)
        value = self.convert(start, self.text[start : self.i], is_float)
        if self.peek() == "%":
            self.i += 1
            self.emit(PERCENT, start, "<PERCENT>", value / 100)
        else:
            self.emit(NUMBER, start, "<NUMBER>", value)

    def unsigned(self, allow_exponent: bool) -> bool:
        """Advance over ``digits[.digits][e[+-]digits]``; tell whether it is a float."""
        is_float = False
        self.digits()
        if self.peek() == "." and _is_digit(self.peek(1)):
            is_float = True
            self.i += 1
            self.digits()
        if allow_exponent and self.peek() in ("e", "E"):
            sign = 1 if self.peek(1) in ("+", "-") else 0
            if _is_digit(self.peek(1 + sign)):
                is_float = True
                self.i += 1 + sign
                self.digits()
        return is_float

    def convert(self, start: int, digits: str, is_float: bool) -> int | float:
        if not is_float:
            return int(digits)
        value = float(digits)
        if not math.isfinite(value):
            raise self.error("number out of range", self.line, self.column, self.text[start : self.i])
        return value

    def dollar(self) -> None:
        start = self.i
        if _is_digit(self.peek(1)):
            self.i += 1
            digits_start = self.i
            is_float = self.unsigned(allow_exponent=False)
            value = self.convert(start, self.text[digits_start : self.i], is_float)
            self.emit(MONEY, start, "<MONEY>", value)
            return
        if self.peek(1) in ("x", "X") and _is_digit(self.peek(2)):
            self.i += 2
            self.digits()
            if _is_name_char(self.peek()):
                self.scan_name()
                bad = self.text[start : self.i]
                raise self.error(
                    f"bad positional reference {bad!r}: write $x1, $x2, ...", self.line, self.column, bad
                )
            self.emit(POSREF, start, "<POSREF>")
            return
        raise self.error(
            "expected an amount ($20) or a positional reference ($x1) after '$'", self.line, self.column, "$"
        )

    def string(self) -> None:
        start = self.i
        quote = self.text[self.i]
        self.i += 1
        out: list[str] = []
        while True:
            ch = self.peek()
            if ch == "" or ch in _LINE_BREAKS:
                raise self.error("unterminated string", self.line, self.column, self.text[start : self.i])
            self.i += 1
            if ch == quote:
                break
            if ch != "\\":
                out.append(ch)
                continue
            out.append(self.escape(start))
        self.emit(STRING, start, "<STRING>", "".join(out))

    def escape(self, start: int) -> str:
        """Read the character(s) after a backslash inside a string."""
        ch = self.peek()
        if ch in _ESCAPES:
            self.i += 1
            return _ESCAPES[ch]
        if ch in ("u", "U"):
            width = 4 if ch == "u" else 8
            hex_digits = self.text[self.i + 1 : self.i + 1 + width]
            if len(hex_digits) == width and all(c in "0123456789abcdefABCDEF" for c in hex_digits):
                code = int(hex_digits, 16)
                if code <= 0x10FFFF:
                    self.i += 1 + width
                    return chr(code)
        bad = "\\" + ch
        column = self.column + (self.i - 1 - start)
        raise self.error(f"unknown escape {bad!r} in string", self.line, column, bad)
