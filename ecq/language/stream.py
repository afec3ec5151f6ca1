"""The token cursor the recursive-descent parser walks, and where it notes node positions.

Positions are recorded per node object (``id``) while parsing, because a node's JSON path
is only known once the whole query is built; :mod:`ecq.language.spans` turns them into
``Query.spans`` afterwards.
"""

from __future__ import annotations

from typing import TypeVar

from ecq.errors import ParseError
from ecq.language.keywords import RESERVED
from ecq.language.lexer import EOF, IDENT, Token, tokenize
from ecq.language.source import excerpt

__all__ = ["TokenStream"]

T = TypeVar("T")


class TokenStream:
    """Tokens of one text with a read position, error construction and a span registry.

    ``tok`` is the next token (``tokens[pos]``; it stays on the final ``EOF`` token once
    there): the parser reads it directly on its hot paths rather than through
    :meth:`peek`.
    """

    __slots__ = ("text", "tokens", "pos", "tok", "marks", "component_tokens")

    def __init__(self, text: str, tokens: list[Token] | None = None) -> None:
        self.text = text
        self.tokens = tokenize(text) if tokens is None else tokens
        self.pos = 0
        self.tok = self.tokens[0]
        # id(node) -> (node, the token it was written at); the node is kept so ids stay unique.
        self.marks: dict[int, tuple[object, Token]] = {}
        # id(component) -> tokens of its '!' and its Kleene suffix, for structural errors.
        self.component_tokens: dict[int, tuple[Token | None, Token | None]] = {}

    # ---------------------------------------------------------------- reading

    def peek(self, k: int = 0) -> Token:
        if k == 0:
            return self.tok
        tokens = self.tokens
        i = self.pos + k
        return tokens[i] if i < len(tokens) else tokens[-1]

    def next(self) -> Token:
        tok = self.tok
        if tok.kind != EOF:
            self.pos += 1
            self.tok = self.tokens[self.pos]
        return tok

    def at(self, *keys: str) -> bool:
        return self.tok.key in keys

    def at_end(self) -> bool:
        return self.tok.kind == EOF

    def accept(self, key: str) -> Token | None:
        tok = self.tok
        if tok.key != key:
            return None
        if tok.kind != EOF:
            self.pos += 1
            self.tok = self.tokens[self.pos]
        return tok

    def expect(self, key: str, message: str) -> Token:
        if self.tok.key != key:
            raise self.error(message)
        return self.next()

    def at_name(self, k: int = 0) -> bool:
        """A name that may be a class, an alias or a reference (not a reserved word)."""
        tok = self.peek(k)
        return tok.kind == IDENT and tok.key not in RESERVED

    # ----------------------------------------------------------------- errors

    def error(self, message: str, tok: Token | None = None) -> ParseError:
        """A :class:`ParseError` at ``tok`` (default: the next token)."""
        tok = tok if tok is not None else self.tok
        return ParseError(message, tok.line, tok.column, tok.text, excerpt(self.text, tok.line, tok.column))

    @staticmethod
    def describe(tok: Token) -> str:
        return "end of input" if tok.kind == EOF else repr(tok.text)

    # ------------------------------------------------------------------ spans

    def mark(self, node: T, tok: Token) -> T:
        """Remember that ``node`` was written at ``tok``; returns ``node``."""
        self.marks[id(node)] = (node, tok)
        return node

    def span_of(self, node: object) -> tuple[int, int, str] | None:
        entry = self.marks.get(id(node))
        if entry is None or entry[0] is not node:
            return None
        tok = entry[1]
        return (tok.line, tok.column, tok.text)
