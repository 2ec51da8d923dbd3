"""Match specs on the pure core."""

from __future__ import annotations

import pytest

from smp.core.errors import BadArg
from smp.core.matchspec import MATCH_SET_EXCEPTION_TRACE, MATCH_SET_RETURN_TRACE, compile_match_spec
from smp.core.terms import A, Pid

SELF = Pid(90)


class Ctx:
    pid = SELF

    def __init__(self):
        self.shown = []
        self.flags = []

    def ms_caller(self):
        return (A.m, A.caller, 1)

    def ms_display(self, term):
        self.shown.append(term)

    def ms_process_dump(self):
        return b"=proc:<0.90.0>\n"

    def ms_seq_token(self):
        return []

    def ms_set_trace_flag(self, pid, flag, on):
        self.flags.append((pid, flag, on))
        return True


def run(ms, args, ctx=None):
    return compile_match_spec(ms).run(args, ctx or Ctx())


def test_heads_bind_and_repeat():
    ms = [([A["$1"], A["$1"]], [], [])]
    assert run(ms, [1, 1]) is not None
    assert run(ms, [1, 2]) is None
    assert run(ms, [1]) is None


def test_guards_are_expressions():
    ms = [
        (
            [A["$1"], A["$2"]],
            [
                (
                    A["andalso"],
                    (A[">"], (A["+"], A["$1"], A["$2"]), 3),
                    (A["=:="], (A.element, 2, A["$2"]), A.b),
                )
            ],
            [],
        )
    ]
    assert run(ms, [2, (A.a, A.b)]) is None  # 2 + tuple fails: the guard is false
    ms = [
        (
            [A["$1"], A["$2"]],
            [
                (A[">"], (A["+"], A["$1"], (A.tuple_size, A["$2"])), 3),
                (A["=:="], (A.element, 2, A["$2"]), A.b),
            ],
            [],
        )
    ]
    assert run(ms, [2, (A.a, A.b)]) is not None
    assert run(ms, [1, (A.a, A.b)]) is None


def test_body_actions():
    ms = [
        (
            A["_"],
            [],
            [
                (A.return_trace,),
                (A.exception_trace,),
                (A.silent, A.true),
                (A.message, ((A.caller, (A.caller,)),)),
            ],
        )
    ]
    r = run(ms, [])
    assert r.return_flags == MATCH_SET_RETURN_TRACE | MATCH_SET_EXCEPTION_TRACE
    assert r.silent is True
    assert r.pam_result == (A.caller, (A.m, A.caller, 1))


def test_process_functions():
    ctx = Ctx()
    ms = [
        (
            [A["$1"]],
            [],
            [
                (A.display, A["$1"]),
                (A.enable_trace, A.send),
                (A.message, [(A["self"],), (A.is_seq_trace,), (A.process_dump,), A["$$"], A["$_"]]),
            ],
        )
    ]
    r = run(ms, [7], ctx)
    assert r.pam_result == [SELF, A.false, b"=proc:<0.90.0>\n", [7], [7]]
    assert ctx.shown == [7]
    assert ctx.flags == [(SELF, A.send, True)]


def test_failing_body_makes_no_message():
    ms = [([A["$1"]], [], [(A.message, (A.hd, A["$1"]))])]
    assert run(ms, [[]]) is None
    assert run(ms, [[5]]).pam_result == 5


def test_message_false_and_true():
    assert run([(A["_"], [], [(A.message, A.false)])], []).pam_result is False
    assert run([(A["_"], [], [(A.message, A.true)])], []).pam_result is True


def test_text_and_shortcuts():
    assert compile_match_spec("x").source == [(A["_"], [], [(A.exception_trace,)])]
    assert compile_match_spec("c").source == [(A["_"], [], [(A.message, (A.caller,))])]
    assert compile_match_spec("[{['$1'],[{is_integer,'$1'}],[]}]").run([3]) is not None
    with pytest.raises(BadArg, match="match spec text"):
        compile_match_spec("[{'_',[],[")


@pytest.mark.parametrize(
    "ms,part",
    [
        ([(A["_"], [(A.apply, A.m, A.f)], [])], "apply/2 is not a match-spec function"),
        ([(A["_"], [], [(A.return_trace, 1)])], "return_trace takes 0 argument"),
        ([(A["_"], [(A.caller,)], [])], "caller may only be used in the body"),
        ([(A["_"], [], A.x)], "body must be a list"),
        ([(A.x, [], [])], "head must be a list"),
    ],
)
def test_refusals_name_the_part(ms, part):
    with pytest.raises(BadArg, match=part):
        compile_match_spec(ms)


@pytest.mark.parametrize(
    "ms,part",
    [
        ([(A["_"], [], [(A.message, True)])], r"clause 1, body 1: a Python bool"),
        ([(A["_"], [], [(A.message, "text")])], r"clause 1, body 1: a Python str"),
        ([(A["_"], [], [(A.message, float("inf"))])], r"body 1: inf is not an Erlang float"),
        ([(A["_"], [], [(A.message, float("nan"))])], r"body 1: nan is not an Erlang float"),
        ([(A["_"], [A.true, (A.is_atom, {1: 2})], [])], r"guard 2: a Python dict"),
        ([([object()], [], [])], r"clause 1, head: a Python object"),
    ],
)
def test_a_part_that_is_not_a_term_is_badarg_naming_it(ms, part):
    """The README's promise: anything else is a BadArg naming the clause and
    the part, checked before any part is formatted for a message."""
    with pytest.raises(BadArg, match=part):
        compile_match_spec(ms)


def test_deep_expressions_and_constants_are_badarg_not_recursion():
    from smp.core.matchspec import MAX_DEPTH

    deep = 0
    for _ in range(20_000):
        deep = (A["+"], deep, 1)
    with pytest.raises(BadArg, match=f"guard 1: nested deeper than {MAX_DEPTH}"):
        compile_match_spec([(A["_"], [deep], [])])
    const = A.leaf
    for _ in range(20_000):
        const = (const,)
    with pytest.raises(BadArg, match=f"body 1: nested deeper than {MAX_DEPTH}"):
        compile_match_spec([(A["_"], [], [(A.message, (A.const, const))])])
    ok = A.leaf
    for _ in range(MAX_DEPTH - 3):
        ok = (ok,)
    ms = compile_match_spec([(A["_"], [], [(A.message, (A.const, ok))])])
    assert ms.run([]).pam_result == ok


def test_a_huge_match_spec_is_badarg_at_once():
    import time

    from smp.core.matchspec import MAX_BYTES, MAX_TERMS

    t0 = time.monotonic()
    with pytest.raises(BadArg, match="bytes of binaries"):
        compile_match_spec([(A["_"], [], [(A.message, (A.const, b"x" * (MAX_BYTES + 1)))])])
    with pytest.raises(BadArg, match="terms"):
        compile_match_spec([(A["_"], [], [(A.message, (A.const, [0] * (MAX_TERMS + 1)))])])
    assert time.monotonic() - t0 < 5


# ---------------------------------------------------------------- layers
