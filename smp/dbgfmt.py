"""Print trace messages as dbg's default handler (``dbg:dhandler/2``, OTP 25) does.

``format_dbg(term)`` returns the text ``dbg:dhandler`` writes for one trace
message, trailing newline included, or ``""`` for terms dhandler prints
nothing for (``end_of_trace``, ``{trace, _, 'receive', {dbg, ok}}``, and any
term that is not a ``trace``/``trace_ts``/``seq_trace``/``drop`` tuple of the
sizes dhandler matches).  The text follows OTP 25's dbg.erl clause by clause,
with a latin1 output device (dhandler's ``~p`` without the ``t`` modifier).

Terms are printed with :func:`smp.terms.format_term`, i.e. ``~p`` on one line.
Deviation: ``io:format("~p")`` breaks terms longer than the line (80 columns)
over several lines; ``format_dbg`` never breaks lines.
"""
from __future__ import annotations

from typing import Any

from .terms import Atom, format_term

__all__ = ["format_dbg", "ffunc"]

_TRACE = Atom("trace")
_TRACE_TS = Atom("trace_ts")
_SEQ_TRACE = Atom("seq_trace")
_DROP = Atom("drop")
_END = Atom("end_of_trace")
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

p = format_term


def _fargs(args) -> str:
    if type(args) is int:
        return str(args)
    if type(args) is list:
        return ",".join(p(a) for a in args)
    return p(args)


def ffunc(mfa: Any) -> str:
    """dbg's ``ffunc/2``: ``m:f(a,b)``, ``m:f/2`` or the term itself."""
    if type(mfa) is tuple and len(mfa) == 3:
        m, f, a = mfa
        if type(a) is list:
            return f"{p(m)}:{p(f)}({_fargs(a)})"
        return f"{p(m)}:{p(f)}/{p(a)}"
    return p(mfa)


def _ftup(trace: tuple, index: int, size: int) -> str:
    # ftup(Trace, Index, Size): elements Index..Size (1-based), space separated
    return " ".join(p(trace[i - 1]) for i in range(index, size + 1))


def _dhandler1(trace: tuple, size: int, ts_suffix: str) -> str:
    frm = p(trace[1])
    op = trace[2]
    if op is _RECEIVE:
        msg = trace[3]
        if type(msg) is tuple and len(msg) == 2 and msg[0] is _DBG and msg[1] is _OK:
            return ""
        return f"({frm}) << {p(msg)}{ts_suffix}\n"
    if op is _SEND:
        return f"({frm}) {p(trace[4])} ! {p(trace[3])}{ts_suffix}\n"
    if op is _CALL:
        if size == 5:
            return f"({frm}) call {ffunc(trace[3])} ({p(trace[4])}){ts_suffix}\n"
        return f"({frm}) call {ffunc(trace[3])}{ts_suffix}\n"
    if op is _RETURN:
        if size == 5:
            return f"({frm}) old_ret {ffunc(trace[3])} -> {p(trace[4])}{ts_suffix}\n"
        return f"({frm}) old_ret {ffunc(trace[3])}{ts_suffix}\n"
    if op is _RETURN_FROM:
        return f"({frm}) returned from {ffunc(trace[3])} -> {p(trace[4])}{ts_suffix}\n"
    if op is _RETURN_TO:
        return f"({frm}) returning to {ffunc(trace[3])}{ts_suffix}\n"
    if op is _SPAWN and size == 5:
        return f"({frm}) spawn {p(trace[3])} as {ffunc(trace[4])}{ts_suffix}\n"
    return f"({frm}) {p(op)} {_ftup(trace, 4, size)}{ts_suffix}\n"


def format_dbg(term: Any) -> str:
    """Return what ``dbg:dhandler(Term, user)`` prints for ``term``."""
    if type(term) is not tuple or not term:
        return ""
    tag = term[0]
    n = len(term)
    if tag is _TRACE and n >= 3:
        # dhandler1/3 reads elements 2..4 (5 for send); a 3-tuple would crash
        # dhandler (badarg in element/2) for ops needing more elements.
        try:
            return _dhandler1(term, n, "")
        except IndexError:
            return ""   # dhandler crashes (badarg in element/2): nothing printed
    if tag is _TRACE_TS and n >= 4:
        try:
            return _dhandler1(term[:-1], n - 1, f" (Timestamp: {p(term[-1])})")
        except IndexError:
            return ""
    if tag is _DROP and n == 2:
        return f"*** Dropped {p(term[1])} messages.\n"
    if tag is _SEQ_TRACE and n >= 3:
        if n == 4:
            head = f"SeqTrace {p(term[3])} [{p(term[1])}]: "
        elif n == 3:
            head = f"SeqTrace [{p(term[1])}]: "
        else:
            return ""  # dhandler: case_clause (crashes); prints nothing
        info = term[2]
        if type(info) is tuple and len(info) == 5:
            kind, ser, fr, to, mes = info
            if kind is _SEND:
                return f"{head}({p(fr)}) {p(to)} ! {p(mes)} [Serial: {p(ser)}]\n"
            if kind is _RECEIVE:
                return f"{head}({p(to)}) << {p(mes)} [Serial: {p(ser)}, From: {p(fr)}]\n"
            if kind is _PRINT:
                return f"{head}-> {p(mes)} [Serial: {p(ser)}, From: {p(fr)}]\n"
        return f"{head}{p(info)}\n"
    return ""
