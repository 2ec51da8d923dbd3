"""Erlang terms as Python values.

Erlang terms keep their kind through every layer of the emulator: an atom is
never a ``str``, a tuple is never a ``list``.  The mapping is:

=============  ==========================================
Erlang         Python
=============  ==========================================
atom           :class:`Atom` (interned; ``Atom("ok") is Atom("ok")``)
pid            :class:`Pid`   (prints ``<0.80.0>``)
port           :class:`Port`  (prints ``#Port<0.5>``)
reference      :class:`Ref`   (prints ``#Ref<0.1.2.3>``)
tuple          ``tuple``
proper list    ``list``
improper list  :class:`ImproperList`
integer        ``int`` (small and big alike)
float          ``float``
binary         ``bytes``
=============  ==========================================

``format_term`` prints any of them in Erlang syntax, as ``io_lib:format("~p")``
would on one line (strings of printable characters are printed as ``"..."``).
"""
from __future__ import annotations

import re
from typing import Any

__all__ = [
    "Atom", "Pid", "Port", "Ref", "ImproperList", "NIL_ATOM",
    "atom", "A", "charlist", "format_term", "is_atom", "LOCAL_NODE",
]


class Atom:
    """An Erlang atom.  Instances are interned, so ``is`` and ``==`` agree."""

    __slots__ = ("name", "__weakref__")
    _table: dict[str, "Atom"] = {}

    def __new__(cls, name: str) -> "Atom":
        try:
            return cls._table[name]
        except KeyError:
            if not isinstance(name, str):
                raise TypeError(f"atom name must be str, not {type(name).__name__}")
            if len(name) > 255:
                raise ValueError("atom name longer than 255 characters")
            self = object.__new__(cls)
            object.__setattr__(self, "name", name)
            cls._table[name] = self
            return self

    def __setattr__(self, key, value):
        raise AttributeError("Atom is immutable")

    def __reduce__(self):
        return (Atom, (self.name,))

    def __eq__(self, other):
        return self is other

    def __hash__(self):
        return hash(("atom", self.name))

    def __lt__(self, other):
        return _order_key(self) < _order_key(other)

    def __repr__(self) -> str:
        return quote_atom(self.name)

    __str__ = __repr__


LOCAL_NODE = Atom("nonode@nohost")


class _Id:
    __slots__ = ()

    def __setattr__(self, key, value):
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __reduce__(self):
        return (type(self), tuple(getattr(self, s) for s in self.__slots__))

    def __lt__(self, other):
        return _order_key(self) < _order_key(other)


class Pid(_Id):
    """An Erlang pid.  ``number`` is the process index shown in the middle.

    Pids are interned like atoms: the same pid is the same object, so
    comparisons are cheap and a batch of messages pickles each pid once."""

    __slots__ = ("number", "serial", "node", "creation", "_hash")
    _cache: dict = {}

    def __new__(cls, number: int, serial: int = 0, node: Atom = LOCAL_NODE, creation: int = 0):
        key = (number, serial, node, creation)
        self = cls._cache.get(key)
        if self is None:
            self = object.__new__(cls)
            object.__setattr__(self, "number", number)
            object.__setattr__(self, "serial", serial)
            object.__setattr__(self, "node", node)
            object.__setattr__(self, "creation", creation)
            object.__setattr__(self, "_hash", hash(("pid", number, serial)))
            cls._cache[key] = self
        return self

    def __reduce__(self):
        if self.node is LOCAL_NODE and self.creation == 0:
            return (Pid, (self.number, self.serial))
        return (Pid, (self.number, self.serial, self.node, self.creation))

    def __eq__(self, other):
        return self is other or (
            type(other) is Pid and self.number == other.number and self.serial == other.serial
            and self.node is other.node and self.creation == other.creation)

    def __hash__(self):
        return self._hash

    def __repr__(self) -> str:
        node = 0 if self.node is LOCAL_NODE else self.node.name
        return f"<{node}.{self.number}.{self.serial}>"

    __str__ = __repr__


class Port(_Id):
    """An Erlang port identifier."""

    __slots__ = ("number", "node", "creation")

    def __init__(self, number: int, node: Atom = LOCAL_NODE, creation: int = 0):
        object.__setattr__(self, "number", number)
        object.__setattr__(self, "node", node)
        object.__setattr__(self, "creation", creation)

    def __eq__(self, other):
        return (type(other) is Port and self.number == other.number
                and self.node is other.node and self.creation == other.creation)

    def __hash__(self):
        return hash(("port", self.number))

    def __repr__(self) -> str:
        node = 0 if self.node is LOCAL_NODE else self.node.name
        return f"#Port<{node}.{self.number}>"

    __str__ = __repr__


class Ref(_Id):
    """An Erlang reference; ``ids`` are the (up to 3) id words, low word first."""

    __slots__ = ("ids", "node", "creation")

    def __init__(self, ids: tuple[int, ...], node: Atom = LOCAL_NODE, creation: int = 0):
        object.__setattr__(self, "ids", tuple(ids))
        object.__setattr__(self, "node", node)
        object.__setattr__(self, "creation", creation)

    def __eq__(self, other):
        return (type(other) is Ref and self.ids == other.ids
                and self.node is other.node and self.creation == other.creation)

    def __hash__(self):
        return hash(("ref",) + self.ids)

    def __repr__(self) -> str:
        node = 0 if self.node is LOCAL_NODE else self.node.name
        return "#Ref<" + ".".join([str(node)] + [str(i) for i in reversed(self.ids)]) + ">"

    __str__ = __repr__


class ImproperList:
    """A list whose tail is not ``[]``: ``[1, 2 | tail]``."""

    __slots__ = ("elements", "tail")

    def __init__(self, elements, tail):
        if isinstance(tail, list):
            raise ValueError("tail of an improper list must not be a list")
        if not elements:
            raise ValueError("an improper list needs at least one element")
        self.elements = list(elements)
        self.tail = tail

    def __eq__(self, other):
        return (type(other) is ImproperList and self.elements == other.elements
                and self.tail == other.tail)

    __hash__ = None

    def __repr__(self) -> str:
        return format_term(self)


NIL_ATOM = Atom("nil")


def atom(name: str) -> Atom:
    """Return the atom called ``name``."""
    return Atom(name)


class _AtomFactory:
    """``A.ok`` is ``Atom("ok")``; ``A["receive"]`` for names that are keywords."""

    def __getattr__(self, name: str) -> Atom:
        if name.startswith("__"):
            raise AttributeError(name)
        return Atom(name)

    def __getitem__(self, name: str) -> Atom:
        return Atom(name)


A = _AtomFactory()


def is_atom(term: Any) -> bool:
    return type(term) is Atom


def charlist(text: str) -> list[int]:
    """Return the Erlang string (list of character codes) for ``text``."""
    return [ord(c) for c in text]


_RESERVED = frozenset(
    "after and andalso band begin bnot bor bsl bsr bxor case catch cond div end fun "
    "if let not of or orelse receive rem try when xor maybe else".split()
)
_UNQUOTED = re.compile(r"[a-z][a-zA-Z0-9_@]*\Z")


def quote_atom(name: str) -> str:
    """Print an atom name as Erlang does, quoting where Erlang quotes."""
    if _UNQUOTED.match(name) and name not in _RESERVED:
        return name
    out = []
    for ch in name:
        if ch == "'":
            out.append("\\'")
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 32 or ord(ch) == 127:
            out.append(f"\\{ord(ch):o}")
        else:
            out.append(ch)
    return "'" + "".join(out) + "'"


def _is_printable_list(lst: list) -> bool:
    if not lst:
        return False
    for c in lst:
        if type(c) is not int or not (32 <= c <= 126 or c in (8, 9, 10, 11, 12, 13, 27)):
            return False
    return True


_ESC = {8: "\\b", 9: "\\t", 10: "\\n", 11: "\\v", 12: "\\f", 13: "\\r", 27: "\\e",
        34: '\\"', 92: "\\\\"}


def _format_string(codes) -> str:
    return '"' + "".join(_ESC.get(c, chr(c)) for c in codes) + '"'


def _format_float(f: float) -> str:
    r = repr(f)
    if "inf" in r or "nan" in r:
        return r
    if "e" in r:
        mant, exp = r.split("e")
        if "." not in mant:
            mant += ".0"
        return f"{mant}e{int(exp)}"
    return r


def format_term(term: Any) -> str:
    """Return ``term`` in Erlang syntax, on one line, as ``~p`` prints it."""
    t = type(term)
    if t is Atom or t is Pid or t is Port or t is Ref:
        return repr(term)
    if t is int or t is bool:
        return str(int(term))
    if t is float:
        return _format_float(term)
    if t is tuple:
        return "{" + ",".join(format_term(e) for e in term) + "}"
    if t is list:
        if _is_printable_list(term):
            return _format_string(term)
        return "[" + ",".join(format_term(e) for e in term) + "]"
    if t is ImproperList:
        return ("[" + ",".join(format_term(e) for e in term.elements)
                + "|" + format_term(term.tail) + "]")
    if t is bytes or t is bytearray:
        if term and all(32 <= b <= 126 or b in (9, 10, 13) for b in term):
            return "<<" + _format_string(term) + ">>"
        return "<<" + ",".join(str(b) for b in term) + ">>"
    if t is str:
        raise TypeError(f"a Python str is not an Erlang term: {term!r} (use Atom, charlist or bytes)")
    raise TypeError(f"not an Erlang term: {term!r}")


_KIND_ORDER = {int: 0, float: 0, Atom: 1, Ref: 2, Port: 3, Pid: 4, tuple: 5, list: 7,
               ImproperList: 7, bytes: 8}


def _order_key(term: Any):
    """Erlang term order (number < atom < ref < port < pid < tuple < list < binary)."""
    t = type(term)
    k = _KIND_ORDER.get(t)
    if k is None:
        raise TypeError(f"not an Erlang term: {term!r}")
    if t is Atom:
        return (k, term.name)
    if t is Pid:
        # the VM compares the serial's bits above the number's
        return (k, term.node.name, (term.serial << 15) | term.number)
    if t is Port:
        return (k, term.node.name, term.number)
    if t is Ref:
        return (k, term.node.name, tuple(reversed(term.ids)))
    if t is tuple:
        return (k, len(term), tuple(_order_key(e) for e in term))
    if t is list:
        return (k, tuple(_order_key(e) for e in term))
    return (k, term)
