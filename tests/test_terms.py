"""Erlang terms keep their kind: atoms, pids, ports, refs, tuples vs lists."""

from __future__ import annotations

import pickle

import pytest

from smp.core.pretty import format_term
from smp.core.terms import A, Atom, ImproperList, Pid, Port, Ref, charlist


def test_atoms_are_interned_and_not_strings():
    assert Atom("ok") is A.ok is A["ok"]
    assert A.ok != "ok"
    assert pickle.loads(pickle.dumps(A.ok)) is A.ok
    with pytest.raises(AttributeError):
        A.ok.name = "x"
    with pytest.raises(ValueError):
        Atom("a" * 256)


@pytest.mark.parametrize(
    "term, text",
    [
        (A.ok, "ok"),
        (A["receive"], "'receive'"),
        (A.EXIT, "'EXIT'"),
        (A["hello world"], "'hello world'"),
        (Pid(80), "<0.80.0>"),
        (Port(5), "#Port<0.5>"),
        (Ref((3, 2, 1)), "#Ref<0.1.2.3>"),
        ((A.a, [1, 2]), "{a,[1,2]}"),
        (charlist("hi"), '"hi"'),
        ([], "[]"),
        (ImproperList([1], A.t), "[1|t]"),
        (b"ab", '<<"ab">>'),
        (b"\x00\x01", "<<0,1>>"),
        (1.5, "1.5"),
        (-3, "-3"),
    ],
)
def test_format_term(term, text):
    assert format_term(term) == text


def test_python_str_is_not_a_term():
    with pytest.raises(TypeError, match="not an Erlang term"):
        format_term("ok")


def test_ids_compare_by_value_and_order():
    assert Pid(80) == Pid(80) and Pid(80) != Pid(81) and Pid(80) != Port(80)
    assert hash(Pid(80, 1)) == hash(Pid(80, 1))
    # atom < ref < port < pid (Python's own tuple/list/int compare is not Erlang's)
    assert sorted([Pid(1), Port(1), Ref((1,)), A.a]) == [A.a, Ref((1,)), Port(1), Pid(1)]
    assert Pid(2) > Pid(1, 0)


def test_pid_order_serial_first():
    # the VM compares the pid data word serial<<15|number, so <0.1.1> > <0.2.0>
    assert Pid(1, 1) > Pid(2, 0)
    assert pickle.loads(pickle.dumps(Pid(80, 2))) == Pid(80, 2)


@pytest.mark.parametrize(
    "make, words",
    [
        (lambda: Port(0, 5), "Port: node must be an Atom (the local node is LOCAL_NODE), not 5"),
        (lambda: Pid("a"), "Pid: number must be an int in 0..2**32-1, not 'a'"),
        (lambda: Pid(1, -2), "Pid: serial must be an int in 0..2**32-1, not -2"),
        (lambda: Pid(1, 0, "node@host"), "Pid: node must be an Atom"),
        (lambda: Port(1 << 64), "Port: number must be an int in 0..2**64-1"),
        (lambda: Ref([1, "x"]), "Ref: ids[1] must be an int in 0..2**32-1, not 'x'"),
        (lambda: Ref([]), "Ref: ids must be one word or more, not none"),
        (lambda: Ref([1], creation=True), "Ref: creation must be an int in 0..2**32-1, not True"),
    ],
)
def test_an_id_with_a_field_the_external_format_cannot_hold_is_refused_in_one_line(make, words):
    """``Port(0, 5)`` (meant as #Port<0.5>) made a port whose node was 5, and
    printing it raised; a pid or reference took any field too."""
    with pytest.raises((TypeError, ValueError)) as e:
        make()
    assert str(e.value).startswith(words) and "\n" not in str(e.value)
    # what the formats hold is still taken: a V4 port's 64-bit number, the local node
    assert repr(Port(1 << 40)) == f"#Port<0.{1 << 40}>" and repr(Port(5)) == "#Port<0.5>"
    assert repr(Pid(0, 5)) == "<0.0.5>" and repr(Ref([1, 2, 3])) == "#Ref<0.3.2.1>"
