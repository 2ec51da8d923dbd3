"""Print trace messages as dbg's default handler (``dbg:dhandler/2``, OTP 25) does.

``format_dbg(term)`` returns the text ``dbg:dhandler`` writes for one trace
message, trailing newline included, or ``""`` for terms dhandler prints
nothing for (``end_of_trace``, ``{trace, _, 'receive', {dbg, ok}}``, and any
term that is not a ``trace``/``trace_ts``/``seq_trace``/``drop`` tuple of the
sizes dhandler matches, or on which dhandler would crash).

The text is byte for byte what ``dbg:trace_client`` prints on a latin-1
device (``erl -noshell``: dhandler's ``~p`` without the ``t`` modifier),
written in latin-1: it follows dbg.erl clause by clause, with its separate
``io:format`` and ``io_lib:format`` calls (each starts counting columns
afresh), and :mod:`smp.core.pretty` prints each ``~p`` as ``io_lib_pretty`` does,
line breaks at 80 columns included.

Pids, ports and refs of other nodes print with the number the reading node
has for their node (``<N.X.Y>``); a real node prints the index of the node
name's atom in its atom table.  Pass ``nodes=NodeNumbers({node: N, ...})`` to
print a given node's numbers; without it, nodes are numbered 1, 2, ... in
the order this process first prints them.
"""

from __future__ import annotations

import json
from typing import Any, Optional

from smp.core.pretty import ELIDED, ClippedBinary, ClippedMap, NodeNumbers, fmt, int_text
from smp.core.terms import Atom, BitString, ImproperList, Map, Pid, Port, Ref

__all__ = [
    "format_dbg",
    "ffunc",
    "NodeNumbers",
    "term_to_json",
    "term_to_json_text",
    "json_record",
]

_TRACE = Atom("trace")
_TRACE_TS = Atom("trace_ts")
_SEQ_TRACE = Atom("seq_trace")
_DROP = Atom("drop")
_DBG = Atom("dbg")
_OK = Atom("ok")
_RECEIVE = Atom("receive")
_SEND = Atom("send")
_CALL = Atom("call")
_RETURN = Atom("return")
_RETURN_FROM = Atom("return_from")
_RETURN_TO = Atom("return_to")
_SPAWN = Atom("spawn")
_PRINT = Atom("print")

_NODES = NodeNumbers()


def _fargs(args, nodes) -> str:
    # dbg:fargs/2: each argument is its own io_lib:format call
    if type(args) is int:
        return str(args)
    if type(args) is list:
        if not args:
            return ""
        return "".join(fmt("~p,", [a], nodes) for a in args[:-1]) + fmt("~p", [args[-1]], nodes)
    if type(args) is ImproperList:
        return "".join(fmt("~p,", [a], nodes) for a in args.elements) + _fargs(args.tail, nodes)
    return fmt("~p", [args], nodes)


def ffunc(mfa: Any, nodes: Optional[NodeNumbers] = None) -> str:
    """dbg's ``ffunc/2``: ``m:f(a,b)``, ``m:f/2`` or the term itself."""
    nodes = nodes or _NODES
    if type(mfa) is tuple and len(mfa) == 3:
        m, f, a = mfa
        if type(a) is list or type(a) is ImproperList:
            return fmt("~p:~p(~s)", [m, f, _fargs(a, nodes)], nodes)
        return fmt("~p:~p/~p", [m, f, a], nodes)
    return fmt("~p", [mfa], nodes)


def _ftup(trace: tuple, index: int, size: int, nodes) -> str:
    # ftup(Trace, Index, Size): elements Index..Size (1-based), each "~p "
    # but the last; Index > Size crashes dhandler (element/2 of a missing one)
    if index > size:
        raise IndexError(index)
    return "".join(
        [fmt("~p ", [trace[i - 1]], nodes) for i in range(index, size)]
        + [fmt("~p", [trace[size - 1]], nodes)]
    )


def _dhandler1(trace: tuple, size: int, ts, nodes) -> str:
    frm = trace[1]
    op = trace[2]
    t = "" if ts is None else " (Timestamp: ~p)"
    tsa = [] if ts is None else [ts]
    if op is _RECEIVE:
        msg = trace[3]
        if type(msg) is tuple and len(msg) == 2 and msg[0] is _DBG and msg[1] is _OK:
            return ""
        return fmt("(~p) << ~p" + t + "~n", [frm, msg] + tsa, nodes)
    if op is _SEND:
        return fmt("(~p) ~p ! ~p" + t + "~n", [frm, trace[4], trace[3]] + tsa, nodes)
    if op is _CALL:
        mfa = ffunc(trace[3], nodes)
        if size == 5:
            return fmt("(~p) call ~s (~p)" + t + "~n", [frm, mfa, trace[4]] + tsa, nodes)
        return fmt("(~p) call ~s" + t + "~n", [frm, mfa] + tsa, nodes)
    if op is _RETURN:
        mfa = ffunc(trace[3], nodes)
        if size == 5:
            return fmt("(~p) old_ret ~s -> ~p" + t + "~n", [frm, mfa, trace[4]] + tsa, nodes)
        return fmt("(~p) old_ret ~s" + t + "~n", [frm, mfa] + tsa, nodes)
    if op is _RETURN_FROM:
        mfa = ffunc(trace[3], nodes)
        return fmt("(~p) returned from ~s -> ~p" + t + "~n", [frm, mfa, trace[4]] + tsa, nodes)
    if op is _RETURN_TO:
        return fmt("(~p) returning to ~s" + t + "~n", [frm, ffunc(trace[3], nodes)] + tsa, nodes)
    if op is _SPAWN and size == 5:
        return fmt(
            "(~p) spawn ~p as ~s" + t + "~n", [frm, trace[3], ffunc(trace[4], nodes)] + tsa, nodes
        )
    return fmt("(~p) ~p ~s" + t + "~n", [frm, op, _ftup(trace, 4, size, nodes)] + tsa, nodes)


def format_dbg(term: Any, nodes: Optional[NodeNumbers] = None) -> str:
    """Return what ``dbg:dhandler(Term, user)`` prints for ``term`` (a ``str``
    of characters 0..255, to be written in latin-1)."""
    if type(term) is not tuple or not term:
        return ""
    nodes = nodes or _NODES
    tag = term[0]
    n = len(term)
    try:
        if tag is _TRACE and n >= 3:
            return _dhandler1(term, n, None, nodes)
        if tag is _TRACE_TS and n >= 4:
            return _dhandler1(term[:-1], n - 1, term[-1], nodes)
    except IndexError:
        return ""  # dhandler crashes (badarg in element/2): nothing printed
    if tag is _DROP and n == 2:
        return fmt("*** Dropped ~p messages.~n", [term[1]], nodes)
    if tag is _SEQ_TRACE and n >= 3:
        if n == 4:
            head = fmt("SeqTrace ~p [~p]: ", [term[3], term[1]], nodes)
        elif n == 3:
            head = fmt("SeqTrace [~p]: ", [term[1]], nodes)
        else:
            return ""  # dhandler: case_clause (crashes); prints nothing
        info = term[2]
        if type(info) is tuple and len(info) == 5:
            kind, ser, fr, to, mes = info
            if kind is _SEND:
                return head + fmt("(~p) ~p ! ~p [Serial: ~p]~n", [fr, to, mes, ser], nodes)
            if kind is _RECEIVE:
                return head + fmt("(~p) << ~p [Serial: ~p, From: ~p]~n", [to, mes, ser, fr], nodes)
            if kind is _PRINT:
                return head + fmt("-> ~p [Serial: ~p, From: ~p]~n", [mes, ser, fr], nodes)
        return head + fmt("~p~n", [info], nodes)
    return ""


def _json_leaf(t: Any):
    """The JSON value of a term that holds no other, or None for one that
    does (a tuple, list, improper list, map or cut map)."""
    tp = type(t)
    if tp is Atom:
        return t.name
    if tp is Pid or tp is Port or tp is Ref:
        return repr(t)
    if tp is bytes:
        return {"binary": t.hex()}
    if tp is BitString:
        return {"bits": t.data.hex(), "size": t.size}
    if tp is ClippedBinary:
        return {"binary": t.data.hex(), "size": t.size, "elided": True}
    if t is ELIDED:
        return {"elided": True}
    if tp in (tuple, list, ImproperList, Map, ClippedMap):
        return None
    if t is None or tp in (int, float, str, bool):
        return t
    return repr(t)


def _json_parts(t: Any):
    """``(open, parts, close)``: a compound term's JSON text is ``open``, the
    JSON of its parts (terms, or lists of two terms written as ``[k, v]``)
    separated by ``", "``, and ``close``."""
    tp = type(t)
    if tp is tuple:
        return '{"tuple": [', list(t), "]}"
    if tp is list:
        return "[", t, "]"
    if tp is ImproperList:
        return '{"improper": [', list(t.elements), '], "tail": ', [t.tail], "}"
    items = t._items if tp is Map else t.pairs
    return (
        '{"map": [',
        [list(kv) for kv in items],
        ('], "elided": true}' if tp is ClippedMap else "]}"),
    )


def term_to_json_text(t: Any) -> str:
    """The JSON text of :func:`term_to_json` ``(t)`` as ``json.dumps`` writes
    it, for a term of any depth (no recursion, where ``json.dumps`` of a
    deeply nested value raises ``RecursionError``); integers of any size are
    written with all their digits."""
    out: list = []
    # entries: a term, or a str written as it is, or a _Pair: [k, v]
    todo: list = [t]
    dumps = json.dumps
    while todo:
        x = todo.pop()
        tx = type(x)
        if tx is str:
            out.append(x)
            continue
        if tx is _Pair:
            todo += ["]", x.v, ", ", x.k]
            out.append("[")
            continue
        if tx is int:
            out.append(int_text(x))
            continue
        leaf = _json_leaf(x)
        if leaf is not None or tx not in (tuple, list, ImproperList, Map, ClippedMap):
            out.append(dumps(leaf))
            continue
        parts = _json_parts(x)
        if tx is ImproperList:
            opening, elements, middle, tail, close = parts
            todo += [close, tail[0], middle]
        else:
            opening, elements, close = parts
            todo.append(close)
        pairs = tx is Map or tx is ClippedMap
        for i in range(len(elements) - 1, -1, -1):
            e = elements[i]
            todo.append(_Pair(e[0], e[1]) if pairs else e)
            if i:
                todo.append(", ")
        out.append(opening)
    return "".join(out)


class _Pair:
    __slots__ = ("k", "v")

    def __init__(self, k, v) -> None:
        self.k, self.v = k, v


def json_record(rec: dict) -> str:
    """``json.dumps(rec)`` with ``rec["term"]`` (a term) written as
    :func:`term_to_json_text` writes it: one line of ``smp-emu read
    --format json``, for a term of any depth."""
    return (
        "{"
        + ", ".join(
            json.dumps(k) + ": " + (term_to_json_text(v) if k == "term" else json.dumps(v))
            for k, v in rec.items()
        )
        + "}"
    )


def term_to_json(t: Any):
    """A JSON value for an Erlang term: atoms as strings, tuples as
    ``{"tuple": [...]}``, lists as lists, improper lists as ``{"improper":
    [...], "tail": T}``, binaries as ``{"binary": HEX}``, maps as ``{"map":
    [[K, V], ...]}``; what :func:`smp.core.pretty.clip_term` cut is marked
    ``"elided": true``.  Built without recursion (``json.dumps`` of a very deep
    result still recurses: :func:`term_to_json_text` writes the text)."""
    leaf = _json_leaf(t)
    if leaf is not None or type(t) not in (tuple, list, ImproperList, Map, ClippedMap):
        return leaf
    res: list = []
    todo: list = [(t, False)]
    while todo:
        x, built = todo.pop()
        tx = type(x)
        if built:
            if tx is ImproperList:
                tail = res.pop()
                n = len(x.elements)
                value = {"improper": res[len(res) - n :], "tail": tail}
            elif tx is tuple or tx is list:
                n = len(x)
                value = res[len(res) - n :]
                value = {"tuple": value} if tx is tuple else value
            else:
                items = x._items if tx is Map else x.pairs
                n = 2 * len(items)
                flat = res[len(res) - n :]
                value = {"map": [list(kv) for kv in zip(flat[0::2], flat[1::2], strict=True)]}
                if tx is ClippedMap:
                    value["elided"] = True
            del res[len(res) - n :]
            res.append(value)
            continue
        leaf = _json_leaf(x)
        if leaf is not None or tx not in (tuple, list, ImproperList, Map, ClippedMap):
            res.append(leaf)
            continue
        todo.append((x, True))
        if tx is ImproperList:
            todo.append((x.tail, False))
            todo.extend((e, False) for e in reversed(x.elements))
        elif tx is tuple or tx is list:
            todo.extend((e, False) for e in reversed(x))
        else:
            items = x._items if tx is Map else x.pairs
            for k, v in reversed(items):
                todo.append((v, False))
                todo.append((k, False))
    return res[0]
