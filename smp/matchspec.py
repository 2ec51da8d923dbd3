"""The match-spec subset the emulator runs for call tracing (``erts_match_set_run``).

A match spec is a list of ``{Head, Guards, Body}`` clauses, tried in order:

* Head: a list of argument patterns or ``'_'``.  Patterns are ``'_'``,
  variables ``'$1'``..``'$N'`` (a repeated variable must match the same term),
  literals, and tuples/lists of patterns.
* Guards: a list of guard tests, all of which must be true: ``{Op, A, B}`` with
  Op one of ``'=='``, ``'/='``, ``'=:='``, ``'=/='``, ``'<'``, ``'>'``, ``'=<'``,
  ``'>='``, and ``{is_atom|is_integer|is_float|is_tuple|is_list|is_binary|is_pid, A}``.
  A, B are variables, ``'$_'`` (the argument list) or constants (``{const, T}``
  or plain literals).
* Body: a list of actions.  ``{message, X}`` sets the extra element of the call
  message (``true`` = none, ``false`` = no message), ``{return_trace}`` and
  ``{exception_trace}`` ask for ``return_from`` / ``exception_from``,
  ``{silent, Bool}`` sets the process's ``silent`` flag.  Any other action is
  rejected by ``compile`` with ``BadArg``.

``run`` returns ``None`` when no clause matches (the seed's non-value: no
trace message), else a ``MatchResult``.
"""
from __future__ import annotations

from typing import NamedTuple

from .errors import BadArg
from .terms import Atom, Pid, format_term

__all__ = ["MatchSpec", "MatchResult", "MATCH_SET_RETURN_TRACE", "MATCH_SET_RETURN_TO_TRACE",
           "MATCH_SET_EXCEPTION_TRACE", "compile_match_spec"]

MATCH_SET_RETURN_TRACE = 0x1
MATCH_SET_RETURN_TO_TRACE = 0x2
MATCH_SET_EXCEPTION_TRACE = 0x4

_WILD = Atom("_")
_ALL_ARGS = Atom("$_")
_TRUE, _FALSE = Atom("true"), Atom("false")
_CMP = {
    "==": lambda a, b: a == b, "/=": lambda a, b: a != b,
    "=:=": lambda a, b: type(a) is type(b) and a == b,
    "=/=": lambda a, b: not (type(a) is type(b) and a == b),
    "<": lambda a, b: a < b, ">": lambda a, b: a > b,
    "=<": lambda a, b: a <= b, ">=": lambda a, b: a >= b,
}
_TYPE_TESTS = {
    "is_atom": lambda x: type(x) is Atom, "is_integer": lambda x: type(x) is int,
    "is_float": lambda x: type(x) is float, "is_tuple": lambda x: type(x) is tuple,
    "is_list": lambda x: type(x) is list, "is_binary": lambda x: type(x) is bytes,
    "is_pid": lambda x: type(x) is Pid,
}


class MatchResult(NamedTuple):
    pam_result: object          # Python True means the atom true (no extra element)
    return_flags: int
    silent: bool | None         # None: unchanged


def _is_var(t) -> bool:
    return type(t) is Atom and t.name.startswith("$") and t.name[1:].isdigit()


def _match(pat, val, binds: dict) -> bool:
    if pat is _WILD:
        return True
    if _is_var(pat):
        if pat in binds:
            return binds[pat] == val and type(binds[pat]) is type(val)
        binds[pat] = val
        return True
    tp = type(pat)
    if tp is tuple:
        return (type(val) is tuple and len(val) == len(pat)
                and all(_match(p, v, binds) for p, v in zip(pat, val)))
    if tp is list:
        return (type(val) is list and len(val) == len(pat)
                and all(_match(p, v, binds) for p, v in zip(pat, val)))
    return tp is type(val) and pat == val


def _value(expr, binds: dict, args: list):
    if expr is _ALL_ARGS:
        return args
    if _is_var(expr):
        if expr not in binds:
            raise BadArg(f"match spec uses unbound variable {expr!r}")
        return binds[expr]
    if type(expr) is tuple and len(expr) == 2 and expr[0] == Atom("const"):
        return expr[1]
    if type(expr) is tuple and len(expr) == 1 and type(expr[0]) is tuple:
        # {{A, B}} builds the tuple {A, B}
        return tuple(_value(e, binds, args) for e in expr[0])
    if type(expr) is list:
        return [_value(e, binds, args) for e in expr]
    return expr


class _Clause(NamedTuple):
    head: object
    guards: list
    body: list


class MatchSpec:
    """A compiled match spec."""

    def __init__(self, clauses: list[_Clause], source):
        self.clauses = clauses
        self.source = source

    def __repr__(self) -> str:
        return f"MatchSpec({format_term(self.source)})"

    def run(self, args: list) -> MatchResult | None:
        for c in self.clauses:
            binds: dict = {}
            if c.head is not _WILD and not _match(c.head, args, binds):
                continue
            if not all(self._guard(g, binds, args) for g in c.guards):
                continue
            return self._body(c.body, binds, args)
        return None

    @staticmethod
    def _guard(g, binds, args) -> bool:
        name = g[0].name
        if name in _CMP:
            try:
                return _CMP[name](_value(g[1], binds, args), _value(g[2], binds, args))
            except TypeError:
                return False
        return _TYPE_TESTS[name](_value(g[1], binds, args))

    @staticmethod
    def _body(body, binds, args) -> MatchResult:
        pam: object = True
        flags = 0
        silent = None
        for action in body:
            name = action[0].name
            if name == "message":
                v = _value(action[1], binds, args)
                pam = True if v is _TRUE else (False if v is _FALSE else v)
            elif name == "return_trace":
                flags |= MATCH_SET_RETURN_TRACE
            elif name == "exception_trace":
                flags |= MATCH_SET_EXCEPTION_TRACE | MATCH_SET_RETURN_TRACE
            elif name == "silent":
                silent = _value(action[1], binds, args) is _TRUE
        return MatchResult(pam, flags, silent)


def compile_match_spec(ms) -> MatchSpec | None:
    """Check and compile ``ms``; ``True``/``False``/``[]`` mean "no match spec".

    Raises:
        BadArg: naming the clause part that is outside the supported subset.
    """
    if ms is True or ms is False or ms is _TRUE or ms is _FALSE or ms == []:
        return None
    if type(ms) is not list:
        raise BadArg(f"match spec must be a list of {{Head, Guards, Body}}, not {ms!r}")
    clauses = []
    for i, c in enumerate(ms):
        if type(c) is not tuple or len(c) != 3:
            raise BadArg(f"match spec clause {i + 1} is not a {{Head, Guards, Body}} tuple")
        head, guards, body = c
        if head is not _WILD and type(head) is not list:
            raise BadArg(f"match spec clause {i + 1}: head must be a list or '_'")
        if type(guards) is not list:
            raise BadArg(f"match spec clause {i + 1}: guards must be a list")
        for g in guards:
            if (type(g) is not tuple or not g or type(g[0]) is not Atom
                    or not ((g[0].name in _CMP and len(g) == 3)
                            or (g[0].name in _TYPE_TESTS and len(g) == 2))):
                raise BadArg(f"match spec clause {i + 1}: unsupported guard {g!r}")
        if type(body) is not list:
            raise BadArg(f"match spec clause {i + 1}: body must be a list")
        for a in body:
            ok = (type(a) is tuple and a and type(a[0]) is Atom and (
                (a[0].name == "message" and len(a) == 2)
                or (a[0].name in ("return_trace", "exception_trace") and len(a) == 1)
                or (a[0].name == "silent" and len(a) == 2)))
            if not ok:
                raise BadArg(f"match spec clause {i + 1}: unsupported action {a!r}")
        clauses.append(_Clause(head, guards, body))
    return MatchSpec(clauses, ms)
