"""Match specifications for call tracing, as 17.x ``erl_db_util.c`` compiles
(``db_match_compile``) and runs (``db_prog_match``) them in trace mode.

A match spec is a list of ``{Head, Guards, Body}`` clauses, tried in order:

* Head: a list of argument patterns or ``'_'``.  Patterns are ``'_'``,
  variables ``'$1'``..``'$N'`` (a repeated variable must match the same term),
  literals, and tuples/lists of patterns.
* Guards: expressions that must all evaluate to ``true``; an expression that
  fails (``badarg``, a bad type) makes the guard false.
* Body: expressions evaluated in order; a failing one makes the whole match
  fail (no trace message).  The trace action functions set what the call
  trace does: ``{message, X}`` the extra element of the call message (``true``
  none, ``false`` no message), ``{return_trace}``, ``{exception_trace}``,
  ``{silent, Bool}``; and the process functions read or change the calling
  process: ``{caller}``, ``{self}``, ``{display, X}``, ``{process_dump}``,
  ``{get_seq_token}``, ``{is_seq_trace}``, ``{enable_trace, [Pid,] Flag}``,
  ``{disable_trace, [Pid,] Flag}``.

Expressions are ``'$N'``, ``'$_'`` (the argument list), ``'$$'`` (the bound
variables in order), ``{const, T}``, ``{{A, B}}`` (a tuple built from
expressions), lists of expressions, literals, and calls ``{Fun, Args...}`` of
the guard functions in ``_GUARD_FUNS`` (type tests, comparisons, ``andalso``,
``orelse``, ``not``, ``and``, ``or``, ``xor``, ``element``, ``hd``, ``tl``,
``size``, ``tuple_size``, ``byte_size``, ``length``, ``abs``, ``self``,
``node``, ``is_record``, arithmetic).  Anything else is refused by
``compile_match_spec`` with a ``BadArg`` naming the clause and the part.

``run`` returns ``None`` when no clause matches or the body fails (the seed's
non-value: no trace message), else a ``MatchResult``.  What the process
functions need comes from a ``MatchContext`` (the scheduler's process), so
this module holds no process and no socket.
"""

from __future__ import annotations

import operator
from typing import Callable, NamedTuple, Protocol

from smp.core.errors import BadArg
from smp.core.pretty import format_term
from smp.core.terms import (
    Atom,
    BitString,
    ExportFun,
    Fun,
    ImproperList,
    Map,
    Pid,
    Port,
    Ref,
    Term,
)
from smp.core.termtext import parse_term

__all__ = [
    "MatchSpec",
    "MatchResult",
    "MatchContext",
    "MATCH_SET_RETURN_TRACE",
    "MATCH_SET_RETURN_TO_TRACE",
    "MATCH_SET_EXCEPTION_TRACE",
    "compile_match_spec",
    "DBG_SHORTCUTS",
]

MATCH_SET_RETURN_TRACE = 0x1
MATCH_SET_RETURN_TO_TRACE = 0x2
MATCH_SET_EXCEPTION_TRACE = 0x4

_WILD = Atom("_")
_ALL_ARGS = Atom("$_")
_ALL_VARS = Atom("$$")
_TRUE, _FALSE, _UNDEFINED = Atom("true"), Atom("false"), Atom("undefined")
_CONST = Atom("const")

#: dbg's match-spec shortcuts (dbg.erl ``transform_flags``/``ms``): ``x``
#: exception trace, ``c`` the caller in the message, ``cx`` both.
DBG_SHORTCUTS = {
    "x": "[{'_',[],[{exception_trace}]}]",
    "c": "[{'_',[],[{message,{caller}}]}]",
    "cx": "[{'_',[],[{exception_trace},{message,{caller}}]}]",
}


class MatchContext(Protocol):
    """What a match spec may ask of the calling process."""

    pid: Pid

    def ms_caller(self) -> Term: ...  # {M, F, A} or 'undefined'
    def ms_display(self, term: Term) -> None: ...
    def ms_process_dump(self) -> bytes: ...
    def ms_seq_token(self) -> Term: ...  # the token tuple or []
    def ms_set_trace_flag(self, pid: Pid, flag: Atom, on: bool) -> bool: ...


class _Fail(Exception):
    """An expression failed (``badarg``/``badarith``): the guard is false, the body fails."""


class MatchResult(NamedTuple):
    pam_result: object  # Python True means the atom true (no extra element)
    return_flags: int
    silent: bool | None  # None: unchanged


def _is_var(t: Term) -> bool:
    return type(t) is Atom and t.name.startswith("$") and t.name[1:].isdigit()


def _match(pat: Term, val: Term, binds: dict[Atom, Term]) -> bool:
    if pat is _WILD:
        return True
    if _is_var(pat):
        if pat in binds:
            return binds[pat] == val and type(binds[pat]) is type(val)
        binds[pat] = val
        return True
    tp = type(pat)
    if tp is tuple:
        return (
            type(val) is tuple
            and len(val) == len(pat)
            and all(_match(p, v, binds) for p, v in zip(pat, val, strict=False))
        )
    if tp is list:
        return (
            type(val) is list
            and len(val) == len(pat)
            and all(_match(p, v, binds) for p, v in zip(pat, val, strict=False))
        )
    return tp is type(val) and pat == val


# ---------------------------------------------------------------- guard functions
def _bool(v: Term) -> bool:
    if v is _TRUE:
        return True
    if v is _FALSE:
        return False
    raise _Fail("not a boolean")


def _atom_of(b: bool) -> Atom:
    return _TRUE if b else _FALSE


def _num(v: Term) -> int | float:
    if type(v) is int or type(v) is float:
        return v
    raise _Fail("badarith")


def _int(v: Term) -> int:
    if type(v) is int:
        return v
    raise _Fail("badarith")


def _element(n: Term, t: Term) -> Term:
    if type(n) is not int or type(t) is not tuple or not 1 <= n <= len(t):
        raise _Fail("badarg")
    return t[n - 1]


def _hd(x: Term) -> Term:
    if type(x) is list and x:
        return x[0]
    if type(x) is ImproperList:
        return x.elements[0]
    raise _Fail("badarg")


def _tl(x: Term) -> Term:
    if type(x) is list and x:
        return x[1:]
    if type(x) is ImproperList:
        rest = x.elements[1:]
        return ImproperList(rest, x.tail) if rest else x.tail
    raise _Fail("badarg")


def _size(x: Term) -> int:
    if type(x) in (tuple, bytes):
        return len(x)
    raise _Fail("badarg")


def _typed(kind: type, fn: Callable[[Term], Term]) -> Callable[[Term], Term]:
    def f(x: Term) -> Term:
        if type(x) is not kind:
            raise _Fail("badarg")
        return fn(x)

    return f


def _div(a: Term, b: Term) -> int:
    x, y = _int(a), _int(b)
    if y == 0:
        raise _Fail("badarith")
    q = abs(x) // abs(y)
    return q if (x >= 0) == (y >= 0) else -q


def _rem(a: Term, b: Term) -> int:
    return _int(a) - _div(a, b) * _int(b)


def _fdiv(a: Term, b: Term) -> float:
    x, y = _num(a), _num(b)
    if y == 0:
        raise _Fail("badarith")
    return x / y


def _is_record(t: Term, name: Term, size: Term) -> Atom:
    return _atom_of(
        type(t) is tuple
        and type(name) is Atom
        and type(size) is int
        and len(t) == size
        and size > 0
        and t[0] is name
    )


def _cmp(op: Callable[[Term, Term], bool]) -> Callable[[Term, Term], Atom]:
    def f(a: Term, b: Term) -> Atom:
        try:
            return _atom_of(op(a, b))
        except TypeError:
            raise _Fail("incomparable") from None

    return f


def _exact_eq(a: Term, b: Term) -> Atom:
    return _atom_of(type(a) is type(b) and a == b)


_TYPE_TESTS: dict[str, type] = {
    "is_atom": Atom,
    "is_integer": int,
    "is_float": float,
    "is_tuple": tuple,
    "is_list": list,
    "is_binary": bytes,
    "is_pid": Pid,
    "is_port": Port,
    "is_reference": Ref,
}

# name -> (arity, function of the evaluated arguments)
_GUARD_FUNS: dict[str, tuple[int, Callable[..., Term]]] = {
    **{
        n: (1, (lambda kind: lambda x: _atom_of(type(x) is kind))(k))
        for n, k in _TYPE_TESTS.items()
    },
    "is_list": (1, lambda x: _atom_of(type(x) in (list, ImproperList))),
    "is_number": (1, lambda x: _atom_of(type(x) in (int, float))),
    "is_boolean": (1, lambda x: _atom_of(x is _TRUE or x is _FALSE)),
    "is_record": (3, _is_record),
    "==": (2, _cmp(operator.eq)),
    "/=": (2, _cmp(operator.ne)),
    "=:=": (2, _exact_eq),
    "=/=": (2, lambda a, b: _atom_of(_exact_eq(a, b) is _FALSE)),
    "<": (2, _cmp(operator.lt)),
    ">": (2, _cmp(operator.gt)),
    "=<": (2, _cmp(operator.le)),
    ">=": (2, _cmp(operator.ge)),
    "not": (1, lambda x: _atom_of(not _bool(x))),
    "and": (2, lambda a, b: _atom_of(_bool(a) & _bool(b))),
    "or": (2, lambda a, b: _atom_of(_bool(a) | _bool(b))),
    "xor": (2, lambda a, b: _atom_of(_bool(a) ^ _bool(b))),
    "element": (2, _element),
    "hd": (1, _hd),
    "tl": (1, _tl),
    "size": (1, _size),
    "tuple_size": (1, _typed(tuple, len)),
    "byte_size": (1, _typed(bytes, len)),
    "length": (1, _typed(list, len)),
    "abs": (1, lambda x: abs(_num(x))),
    "+": (2, lambda a, b: _num(a) + _num(b)),
    "-": (2, lambda a, b: _num(a) - _num(b)),
    "*": (2, lambda a, b: _num(a) * _num(b)),
    "/": (2, _fdiv),
    "div": (2, _div),
    "rem": (2, _rem),
    "band": (2, lambda a, b: _int(a) & _int(b)),
    "bor": (2, lambda a, b: _int(a) | _int(b)),
    "bxor": (2, lambda a, b: _int(a) ^ _int(b)),
}
_UNARY_MINUS: tuple[int, Callable[[Term], Term]] = (1, lambda x: -_num(x))

# body-only functions: name -> allowed arities
_BODY_FUNS: dict[str, tuple[int, ...]] = {
    "message": (1,),
    "return_trace": (0,),
    "exception_trace": (0,),
    "silent": (1,),
    "caller": (0,),
    "display": (1,),
    "process_dump": (0,),
    "get_seq_token": (0,),
    "is_seq_trace": (0,),
    "enable_trace": (1, 2),
    "disable_trace": (1, 2),
}
# usable in guards and bodies, but need the process
_PROC_FUNS: dict[str, tuple[int, ...]] = {"self": (0,), "node": (0,)}


class _Clause(NamedTuple):
    head: Term
    guards: list[Term]
    body: list[Term]


class _Run:
    """One evaluation: the bindings, the process, and what the body set."""

    __slots__ = ("binds", "args", "ctx", "pam", "flags", "silent")

    def __init__(self, binds: dict[Atom, Term], args: list[Term], ctx: MatchContext | None) -> None:
        self.binds, self.args, self.ctx = binds, args, ctx
        self.pam: object = True
        self.flags = 0
        self.silent: bool | None = None

    def value(self, e: Term, in_body: bool) -> Term:
        if type(e) is Atom:
            if e is _ALL_ARGS:
                return self.args
            if e is _ALL_VARS:
                return [self.binds[k] for k in sorted(self.binds, key=lambda a: int(a.name[1:]))]
            if _is_var(e):
                return self.binds[e]  # compile checked it is bound
            return e
        if type(e) is list:
            return [self.value(x, in_body) for x in e]
        if type(e) is not tuple or not e:
            return e
        head = e[0]
        if type(head) is tuple:  # {{A, B}}: a tuple built from expressions
            return tuple(self.value(x, in_body) for x in head)
        if head is _CONST:
            return e[1]
        name = head.name
        vals = [self.value(x, in_body) for x in e[1:]]
        if name in _BODY_FUNS or name in _PROC_FUNS:
            return self.action(name, vals)
        if name == "-" and len(vals) == 1:
            return _UNARY_MINUS[1](*vals)
        if name == "andalso":
            return _atom_of(_bool(vals[0]) and _bool(vals[1]))
        if name == "orelse":
            return _atom_of(_bool(vals[0]) or _bool(vals[1]))
        return _GUARD_FUNS[name][1](*vals)

    def action(self, name: str, vals: list[Term]) -> Term:
        ctx = self.ctx
        if name == "message":
            v = vals[0]
            self.pam = True if v is _TRUE else (False if v is _FALSE else v)
            return _TRUE
        if name == "return_trace":
            self.flags |= MATCH_SET_RETURN_TRACE
            return _TRUE
        if name == "exception_trace":
            self.flags |= MATCH_SET_EXCEPTION_TRACE | MATCH_SET_RETURN_TRACE
            return _TRUE
        if name == "silent":
            if vals[0] is _TRUE:
                self.silent = True
            elif vals[0] is _FALSE:
                self.silent = False
            return _TRUE
        if name == "node":
            return Atom("nonode@nohost")
        if ctx is None:
            raise _Fail(f"{name} needs a process")
        if name == "self":
            return ctx.pid
        if name == "caller":
            return ctx.ms_caller()
        if name == "display":
            ctx.ms_display(vals[0])
            return _TRUE
        if name == "process_dump":
            return ctx.ms_process_dump()
        if name == "get_seq_token":
            return ctx.ms_seq_token()
        if name == "is_seq_trace":
            return _atom_of(ctx.ms_seq_token() != [])
        # enable_trace / disable_trace
        pid, flag = (ctx.pid, vals[0]) if len(vals) == 1 else vals
        if type(flag) is not Atom or type(pid) is not Pid:
            raise _Fail("badarg")
        if not ctx.ms_set_trace_flag(pid, flag, name == "enable_trace"):
            raise _Fail("badarg")
        return _TRUE


class MatchSpec:
    """A compiled match spec."""

    def __init__(self, clauses: list[_Clause], source: Term) -> None:
        self.clauses = clauses
        self.source = source

    def __repr__(self) -> str:
        return f"MatchSpec({format_term(self.source)})"

    def run(self, args: list[Term], ctx: MatchContext | None = None) -> MatchResult | None:
        for c in self.clauses:
            binds: dict[Atom, Term] = {}
            if c.head is not _WILD and not _match(c.head, args, binds):
                continue
            r = _Run(binds, args, ctx)
            try:
                ok = all(r.value(g, False) is _TRUE for g in c.guards)
            except _Fail:
                ok = False
            if not ok:
                continue
            try:
                for action in c.body:
                    r.value(action, True)
            except _Fail:
                return None
            return MatchResult(r.pam, r.flags, r.silent)
        return None


#: How deep a match spec may nest (a guard or body expression, a head
#: pattern, a ``{const, T}``): far beyond any written one, and well within
#: what evaluating and carrying it between processes can take.  17.x's
#: compiler has no such bound; a deeper match spec is badarg here.
MAX_DEPTH = 200
#: How many terms and how many bytes of binaries a match spec may hold: a
#: match spec travels to every scheduler and is copied into trace messages.
MAX_TERMS = 1_000_000
MAX_BYTES = 16 * 1024 * 1024

_ATOMIC = (Atom, int, Pid, Port, Ref, Fun, ExportFun)


def _not_a_term(t: Term, budget: list[int]) -> str | None:
    """Why ``t`` is not an Erlang term this emulator takes in a match spec,
    or None.  Iterative, so no nesting reaches Python's recursion limit;
    ``budget`` is ``[terms left, bytes left]``, shared by a whole match spec."""
    stack: list[tuple[Term, int]] = [(t, 1)]
    while stack:
        x, depth = stack.pop()
        budget[0] -= 1
        if budget[0] < 0:
            return f"more than {MAX_TERMS:,} terms"
        if depth > MAX_DEPTH:
            return f"nested deeper than {MAX_DEPTH}"
        tp = type(x)
        if tp is tuple or tp is list:
            stack.extend((e, depth + 1) for e in x)
        elif tp in _ATOMIC:
            continue
        elif tp is float:
            if x != x or x in (float("inf"), float("-inf")):
                return f"{x!r} is not an Erlang float"
        elif tp is bytes:
            budget[1] -= len(x)
            if budget[1] < 0:
                return f"more than {MAX_BYTES:,} bytes of binaries"
        elif tp is BitString:
            budget[1] -= len(x.data)
            if budget[1] < 0:
                return f"more than {MAX_BYTES:,} bytes of binaries"
        elif tp is ImproperList:
            stack.extend((e, depth + 1) for e in x.elements)
            stack.append((x.tail, depth + 1))
        elif tp is Map:
            for k, v in x.items():
                stack.append((k, depth + 1))
                stack.append((v, depth + 1))
        elif tp is bool:
            return f"a Python bool ({x!r}) is not an Erlang term (use Atom('{str(x).lower()}'))"
        elif tp is str:
            return f"a Python str ({_clip(repr(x))}) is not an Erlang term"
        else:
            return f"a Python {tp.__name__} is not an Erlang term"
    return None


def _clip(text: str, n: int = 60) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."


def _show(t: Term) -> str:
    """``t`` for an error message: checked to be a term first, and cut short."""
    return _clip(format_term(t), 120)


def _head_vars(pat: Term, out: set[Atom]) -> None:
    if _is_var(pat):
        out.add(pat)
    elif type(pat) in (tuple, list):
        for p in pat:
            _head_vars(p, out)


def _check_expr(e: Term, bound: set[Atom], in_body: bool, where: str) -> None:
    """Refuse, naming it, anything ``db_match_compile`` would not take."""
    if type(e) is Atom:
        if _is_var(e) and e not in bound:
            raise BadArg(f"{where}: variable {e.name} is not bound in the head")
        return
    if type(e) is list:
        for x in e:
            _check_expr(x, bound, in_body, where)
        return
    if type(e) is not tuple or not e:
        return
    head = e[0]
    if type(head) is tuple:
        if len(e) != 1:
            raise BadArg(f"{where}: {_show(e)} is not an expression")
        for x in head:
            _check_expr(x, bound, in_body, where)
        return
    if head is _CONST and len(e) == 2:
        return
    if type(head) is not Atom:
        raise BadArg(f"{where}: {_show(e)} is not an expression")
    name, n = head.name, len(e) - 1
    if name in _BODY_FUNS:
        if not in_body:
            raise BadArg(f"{where}: {name} may only be used in the body")
        if n not in _BODY_FUNS[name]:
            raise BadArg(
                f"{where}: {name} takes {' or '.join(map(str, _BODY_FUNS[name]))} "
                f"argument(s), not {n}"
            )
    elif name in _PROC_FUNS:
        if n not in _PROC_FUNS[name]:
            raise BadArg(f"{where}: {name} takes no argument")
    elif name in ("andalso", "orelse"):
        if n != 2:
            raise BadArg(f"{where}: {name} takes 2 arguments, not {n}")
    elif name == "-" and n == 1:
        pass
    elif name in _GUARD_FUNS:
        if _GUARD_FUNS[name][0] != n:
            raise BadArg(
                f"{where}: {name}/{n} is not a match-spec function "
                f"({name}/{_GUARD_FUNS[name][0]} is)"
            )
    else:
        raise BadArg(f"{where}: {name}/{n} is not a match-spec function")
    for x in e[1:]:
        _check_expr(x, bound, in_body, where)


def compile_match_spec(ms: Term) -> MatchSpec | None:
    """Check and compile ``ms``; ``True``/``False``/``[]`` mean "no match spec".

    ``ms`` may be a term or Erlang text (``"[{'_',[],[{return_trace}]}]"``) or
    one of dbg's shortcuts ``"x"``, ``"c"``, ``"cx"``.

    Raises:
        BadArg: naming the clause and the part that is not a match spec.
    """
    if isinstance(ms, str):
        text = DBG_SHORTCUTS.get(ms.strip(), ms)
        try:
            ms = parse_term(text)
        except ValueError as e:
            raise BadArg(f"match spec text {ms!r}: {e}") from None
    if ms is True or ms is False or ms is _TRUE or ms is _FALSE or ms == []:
        return None
    if type(ms) is not list:
        raise BadArg(f"match spec must be a list of {{Head, Guards, Body}}, not {ms!r}")
    clauses: list[_Clause] = []
    budget = [MAX_TERMS, MAX_BYTES]
    for i, c in enumerate(ms):
        where = f"match spec clause {i + 1}"
        if type(c) is not tuple or len(c) != 3:
            raise BadArg(f"{where} is not a {{Head, Guards, Body}} tuple")
        head, guards, body = c
        if head is not _WILD and type(head) is not list:
            raise BadArg(f"{where}: head must be a list or '_'")
        why = _not_a_term(head, budget)
        if why is not None:
            raise BadArg(f"{where}, head: {why}")
        bound: set[Atom] = set()
        _head_vars(head, bound)
        if type(guards) is not list:
            raise BadArg(f"{where}: guards must be a list")
        for j, g in enumerate(guards):
            why = _not_a_term(g, budget)
            if why is not None:
                raise BadArg(f"{where}, guard {j + 1}: {why}")
            try:
                _check_expr(g, bound, False, "")
            except BadArg as e:
                raise BadArg(f"{where}, guard {_show(g)}{e}") from None
        if type(body) is not list:
            raise BadArg(f"{where}: body must be a list")
        for j, a in enumerate(body):
            why = _not_a_term(a, budget)
            if why is not None:
                raise BadArg(f"{where}, body {j + 1}: {why}")
            try:
                _check_expr(a, bound, True, "")
            except BadArg as e:
                raise BadArg(f"{where}, body {_show(a)}{e}") from None
        clauses.append(_Clause(head, guards, body))
    return MatchSpec(clauses, ms)
