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

from typing import Any, Optional

from smp.core.pretty import NodeNumbers, fmt
from smp.core.terms import Atom, BitString, ImproperList, Map, Pid, Port, Ref

__all__ = ["format_dbg", "ffunc", "NodeNumbers", "term_to_json"]

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
    if index == size:
        return fmt("~p", [trace[index - 1]], nodes)
    return fmt("~p ", [trace[index - 1]], nodes) + _ftup(trace, index + 1, size, nodes)


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


def term_to_json(t: Any):
    """A JSON value for an Erlang term: atoms as strings, tuples as {"tuple": [...]}."""
    if type(t) is Atom:
        return t.name
    if type(t) in (Pid, Port, Ref):
        return repr(t)
    if type(t) is tuple:
        return {"tuple": [term_to_json(x) for x in t]}
    if type(t) is list:
        return [term_to_json(x) for x in t]
    if type(t) is ImproperList:
        return {"improper": [term_to_json(x) for x in t.elements], "tail": term_to_json(t.tail)}
    if type(t) is bytes:
        return {"binary": t.hex()}
    if type(t) is Map:
        return {"map": [[term_to_json(k), term_to_json(v)] for k, v in t.items()]}
    if type(t) is BitString:
        return {"bits": t.data.hex(), "size": t.size}
    if t is None or type(t) in (int, float, str, bool):
        return t
    return repr(t)
