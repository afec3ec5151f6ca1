"""A character-at-a-time lexer written straight from the rules of ``ecq.language.lexer``'s
docstring, sharing no code with it: the expectation the token-pattern lexer is checked
against (tests/ecq/language/test_lexer.py).

It gives plain tuples ``(kind, text, line, column, key, value)`` and raises
:class:`LexError` with ``(message, line, column, token)``. Columns count characters from
1 on each line; lines are counted as :meth:`str.splitlines` counts them.
"""

from __future__ import annotations

import math

Tok = tuple[str, str, int, int, str, "int | float | str | None"]

LINE_BREAKS = frozenset("\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029")
TWO_CHAR_OPS = {"==": "=", "!=": "!=", "<>": "!=", "<=": "<=", ">=": ">="}
ONE_CHAR_OPS = {**{c: c for c in "=<>+-*/;&|!^{}[](),.:"}, "∧": "AND", "∨": "OR", "¬": "NOT"}
ESCAPES = {"\\": "\\", "'": "'", '"': '"', "n": "\n", "r": "\r", "t": "\t"}


class LexError(Exception):
    def __init__(self, message: str, line: int, column: int, token: str) -> None:
        super().__init__(message, line, column, token)
        self.where = (message, line, column, token)


def name_start(ch: str) -> bool:
    return ch.isalpha() or ch == "_"


def name_char(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def digit(ch: str) -> bool:
    return "0" <= ch <= "9"


def char_tokenize(text: str) -> list[Tok]:
    return _Lexer(text).run()


class _Lexer:
    def __init__(self, text: str) -> None:
        self.text = text
        self.i = 0
        self.line = 1
        self.column = 1
        self.tokens: list[Tok] = []

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.text[j] if j < len(self.text) else ""

    def error(self, message: str, token: str, column: int | None = None) -> LexError:
        return LexError(message, self.line, self.column if column is None else column, token)

    def emit(self, kind: str, start: int, key: str, value: int | float | str | None = None) -> None:
        self.tokens.append((kind, self.text[start : self.i], self.line, self.column, key, value))
        self.column += self.i - start

    def run(self) -> list[Tok]:
        text = self.text
        while self.i < len(text):
            ch = text[self.i]
            if ch in LINE_BREAKS:
                self.i += 2 if text.startswith("\r\n", self.i) else 1
                self.line += 1
                self.column = 1
            elif ch.isspace():
                self.i += 1
                self.column += 1
            elif text.startswith("--", self.i):
                while self.i < len(text) and text[self.i] not in LINE_BREAKS:
                    self.i += 1
            elif name_start(ch):
                start = self.i
                self.scan_name()
                self.emit("IDENT", start, text[start : self.i].upper())
            elif digit(ch):
                self.number()
            elif ch == "$":
                self.dollar()
            elif ch == "@":
                if not name_start(self.peek(1)):
                    raise self.error("expected a query name after '@'", "@")
                start = self.i
                self.i += 1
                self.scan_name()
                self.emit("DERIVED", start, "<DERIVED>")
            elif ch in "'\"":
                self.string()
            elif text[self.i : self.i + 2] in TWO_CHAR_OPS:
                self.i += 2
                self.emit("OP", self.i - 2, TWO_CHAR_OPS[text[self.i - 2 : self.i]])
            elif ch in ONE_CHAR_OPS:
                self.i += 1
                self.emit("OP", self.i - 1, ONE_CHAR_OPS[ch])
            else:
                raise self.error(f"unexpected character {ch!r}", ch)
        if self.tokens:
            _, last_text, line, column, _, _ = self.tokens[-1]
            self.tokens.append(("EOF", "", line, column + len(last_text), "<EOF>", None))
        else:
            self.tokens.append(("EOF", "", 1, 1, "<EOF>", None))
        return self.tokens

    def scan_name(self) -> None:
        self.i += 1
        while self.i < len(self.text):
            if name_char(self.text[self.i]):
                self.i += 1
            elif self.text[self.i] == "-" and name_char(self.peek(1)):
                self.i += 2
            else:
                break

    def digits(self) -> None:
        while digit(self.peek()):
            self.i += 1

    def unsigned(self, exponent: bool) -> bool:
        is_float = False
        self.digits()
        if self.peek() == "." and digit(self.peek(1)):
            is_float = True
            self.i += 1
            self.digits()
        if exponent and self.peek() in ("e", "E"):
            sign = 1 if self.peek(1) in ("+", "-") else 0
            if digit(self.peek(1 + sign)):
                is_float = True
                self.i += 1 + sign
                self.digits()
        return is_float

    def value(self, start: int, digits: str, is_float: bool) -> int | float:
        if not is_float:
            return int(digits)
        value = float(digits)
        if not math.isfinite(value):
            raise self.error("number out of range", self.text[start : self.i])
        return value

    def number(self) -> None:
        start = self.i
        is_float = self.unsigned(exponent=True)
        value = self.value(start, self.text[start : self.i], is_float)
        if self.peek() == "%":
            self.i += 1
            self.emit("PERCENT", start, "<PERCENT>", value / 100)
        else:
            self.emit("NUMBER", start, "<NUMBER>", value)

    def dollar(self) -> None:
        start = self.i
        if digit(self.peek(1)):
            self.i += 1
            digits_start = self.i
            is_float = self.unsigned(exponent=False)
            self.emit("MONEY", start, "<MONEY>", self.value(start, self.text[digits_start : self.i], is_float))
            return
        if self.peek(1) in ("x", "X") and digit(self.peek(2)):
            self.i += 2
            self.digits()
            if name_char(self.peek()):
                self.scan_name()
                bad = self.text[start : self.i]
                raise self.error(f"bad positional reference {bad!r}: write $x1, $x2, ...", bad)
            self.emit("POSREF", start, "<POSREF>")
            return
        raise self.error("expected an amount ($20) or a positional reference ($x1) after '$'", "$")

    def string(self) -> None:
        start = self.i
        quote = self.text[self.i]
        self.i += 1
        out: list[str] = []
        while True:
            ch = self.peek()
            if ch == "" or ch in LINE_BREAKS:
                raise self.error("unterminated string", self.text[start : self.i])
            self.i += 1
            if ch == quote:
                break
            if ch != "\\":
                out.append(ch)
                continue
            ch = self.peek()
            if ch in ESCAPES:
                self.i += 1
                out.append(ESCAPES[ch])
                continue
            if ch in ("u", "U"):
                width = 4 if ch == "u" else 8
                hex_digits = self.text[self.i + 1 : self.i + 1 + width]
                if len(hex_digits) == width and all(c in "0123456789abcdefABCDEF" for c in hex_digits):
                    if int(hex_digits, 16) <= 0x10FFFF:
                        self.i += 1 + width
                        out.append(chr(int(hex_digits, 16)))
                        continue
            bad = "\\" + ch
            raise self.error(f"unknown escape {bad!r} in string", bad, self.column + (self.i - 1 - start))
        self.emit("STRING", start, "<STRING>", "".join(out))
