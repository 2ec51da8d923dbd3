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
bit string     :class:`BitString` (a size that is not a whole number of bytes)
map            :class:`Map` (any terms as keys, kept in Erlang's key order)
fun            :class:`Fun` (a local fun) and :class:`ExportFun` (``fun M:F/A``)
=============  ==========================================

:func:`smp.core.pretty.format_term` prints any of them in Erlang syntax, as
``io_lib:format("~p")`` does on one line (OTP 25, latin-1 rules: strings and
binaries of printable latin-1 characters are printed as ``"..."``), and is
the ``repr`` of the composite types; :mod:`smp.core.pretty` has the rest of
``~p`` (line breaking, the reading node's numbers for other nodes' ids).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from smp.core.interning import (
    _ATOMS,
    _PIDS,
    _SWEEP_MIN,
    _intern_lock,
    _next_sweep,
    _sweep,
    _sweep_grown,
)
from smp.core.quoting import quote_atom as quote_atom
from smp.core.termorder import term_keys

__all__ = [
    "Atom",
    "Pid",
    "Port",
    "Ref",
    "ImproperList",
    "NIL_ATOM",
    "Map",
    "Fun",
    "ExportFun",
    "BitString",
    "atom",
    "atom_of",
    "A",
    "charlist",
    "is_atom",
    "LOCAL_NODE",
    "term_order_key",
    "ATOMS",
    "PIDS",
    "sweep_interned",
    "Term",
]

#: Any Erlang term: an :class:`Atom`, ``int``, ``float``, ``bytes``, ``tuple``,
#: ``list``, :class:`Pid`, :class:`Map`, ... (the table above).  Terms are left
#: untyped on purpose: a term is a Python value of one of many unrelated types
#: (and a tuple or a list holds terms of any kinds), decoded from the wire or
#: written in a scenario, and the code tells them apart at run time by
#: ``type(term) is ...``; a union of the kinds would make every use of a term
#: a cast, so a term is ``Any`` under this name, which says what it is.
Term = Any


def sweep_interned() -> int:
    """Drop every interned atom and pid that nothing refers to; returns how
    many were dropped.  Sweeps happen by themselves as the tables grow; this
    is for a caller that has just dropped many terms (and for tests)."""
    with _intern_lock:
        dropped = _sweep(Pid._cache)  # pids first: they refer to their node atoms
        dropped += _sweep(Atom._table)
        _next_sweep[_PIDS] = max(_SWEEP_MIN, 2 * len(Pid._cache))
        _next_sweep[_ATOMS] = max(_SWEEP_MIN, 2 * len(Atom._table))
    return dropped


class Atom:
    """An Erlang atom.  Instances are interned, so ``is`` and ``==`` agree
    (one nothing refers to any more is dropped from the table: see above)."""

    __slots__ = ("name", "__weakref__")
    name: str
    _table: dict[str, "Atom"] = {}

    def __new__(cls, name: str) -> "Atom":
        try:
            return cls._table[name]
        except KeyError:
            if not isinstance(name, str):
                raise TypeError(f"atom name must be str, not {type(name).__name__}") from None
            if len(name) > 255:
                raise ValueError("atom name longer than 255 characters") from None
        table = cls._table
        with _intern_lock:
            self = table.get(name)
            if self is None:
                if len(table) >= _next_sweep[_ATOMS]:
                    _sweep_grown(table, _ATOMS)
                self = object.__new__(cls)
                object.__setattr__(self, "name", name)
                table[name] = self
            return self

    def __setattr__(self, key: str, value: object) -> None:
        raise AttributeError("Atom is immutable")

    def __reduce__(self) -> tuple[type[Atom], tuple[str]]:
        return (Atom, (self.name,))

    def __eq__(self, other: object) -> bool:
        return self is other

    # Interned, equal only to itself: the identity hash agrees with ``==``
    # (an equal atom made after this one was dropped from the table cannot
    # meet it: it is dropped only when nothing refers to it) and costs no
    # Python call in a dict or set lookup (a set's order was never stable
    # across runs: a str hash is salted per process).
    __hash__ = object.__hash__

    def __lt__(self, other: object) -> bool:
        return _order_key(self) < _order_key(other)

    def __repr__(self) -> str:
        return quote_atom(self.name)

    __str__ = __repr__


LOCAL_NODE = Atom("nonode@nohost")


class _Id:
    __slots__: tuple[str, ...] = ()

    def __setattr__(self, key: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __reduce__(self) -> tuple[type[_Id], tuple[object, ...]]:
        return (type(self), tuple(getattr(self, s) for s in self.__slots__))

    def __lt__(self, other: object) -> bool:
        return _order_key(self) < _order_key(other)


def _check_id(kind: str, node: object, *fields: tuple[str, object, int]) -> None:
    """Refuse an identifier's field that is not what the external format
    holds, in one line: each ``(name, value, bits)`` an int of ``bits`` bits
    at most, the node an :class:`Atom` (``Port(0, 5)`` gave a port whose
    node was ``5``, and printing it raised)."""
    for name, v, bits in fields:
        if type(v) is not int or not 0 <= v < 1 << bits:
            raise ValueError(f"{kind}: {name} must be an int in 0..2**{bits}-1, not {v!r}")
    if type(node) is not Atom:
        raise TypeError(
            f"{kind}: node must be an Atom (the local node is LOCAL_NODE), not {node!r}"
        )


class Pid(_Id):
    """An Erlang pid.  ``number`` is the process index shown in the middle.

    Pids are interned like atoms: the same pid is the same object, so
    comparisons are cheap and a batch of messages pickles each pid once (a
    pid nothing refers to any more is dropped from the table, as an atom)."""

    # _etf: the external format of this pid once encoded (smp.wire.etf_encoder
    # fills it)
    __slots__ = ("number", "serial", "node", "creation", "_etf")
    number: int
    serial: int
    node: Atom
    creation: int
    _etf: bytes | None
    _cache: dict[tuple[int, int, Atom, int], Pid] = {}

    def __new__(
        cls, number: int, serial: int = 0, node: Atom = LOCAL_NODE, creation: int = 0
    ) -> Pid:
        key = (number, serial, node, creation)
        self = cls._cache.get(key)
        if self is not None:
            return self
        cache = cls._cache
        with _intern_lock:
            self = cache.get(key)
            if self is None:
                _check_id(
                    "Pid",
                    node,
                    ("number", number, 32),
                    ("serial", serial, 32),
                    ("creation", creation, 32),
                )
                if len(cache) >= _next_sweep[_PIDS]:
                    _sweep_grown(cache, _PIDS)
                self = object.__new__(cls)
                object.__setattr__(self, "number", number)
                object.__setattr__(self, "serial", serial)
                object.__setattr__(self, "node", node)
                object.__setattr__(self, "creation", creation)
                object.__setattr__(self, "_etf", None)
                cache[key] = self
        return self

    def __reduce__(self) -> tuple[type[Pid], tuple[int | Atom, ...]]:
        if self.node is LOCAL_NODE and self.creation == 0:
            return (Pid, (self.number, self.serial))
        return (Pid, (self.number, self.serial, self.node, self.creation))

    def __eq__(self, other: object) -> bool:
        return self is other or (
            type(other) is Pid
            and self.number == other.number
            and self.serial == other.serial
            and self.node is other.node
            and self.creation == other.creation
        )

    # Interned, so equal live pids are one object (an entry is dropped only
    # when nothing refers to its pid): the identity hash agrees with ``==``
    # and a dict or set lookup makes no Python call (a process table is
    # looked up on every message)
    __hash__ = object.__hash__

    def __repr__(self) -> str:
        node = 0 if self.node is LOCAL_NODE else self.node.name
        return f"<{node}.{self.number}.{self.serial}>"

    __str__ = __repr__


#: The interned atoms by name and pids by ``(number, serial, node, creation)``,
#: for a decoder's lookup without a call (``Atom()`` and ``Pid()`` fill them;
#: read them, never write them: an entry nothing else refers to may go).
ATOMS: dict[str, Atom] = Atom._table
PIDS: dict[tuple[int, int, Atom, int], Pid] = Pid._cache


class Port(_Id):
    """An Erlang port identifier."""

    __slots__ = ("number", "node", "creation")
    number: int
    node: Atom
    creation: int

    def __init__(self, number: int, node: Atom = LOCAL_NODE, creation: int = 0) -> None:
        # (V4_PORT_EXT: a 64-bit number)
        _check_id("Port", node, ("number", number, 64), ("creation", creation, 32))
        object.__setattr__(self, "number", number)
        object.__setattr__(self, "node", node)
        object.__setattr__(self, "creation", creation)

    @classmethod
    def from_checked(cls, number: int, node: Atom, creation: int) -> Port:
        """A port of fields a decoder has checked already (``Port()`` checks
        them again, a third of a microsecond a port)."""
        self = object.__new__(cls)
        object.__setattr__(self, "number", number)
        object.__setattr__(self, "node", node)
        object.__setattr__(self, "creation", creation)
        return self

    def __eq__(self, other: object) -> bool:
        return (
            type(other) is Port
            and self.number == other.number
            and self.node is other.node
            and self.creation == other.creation
        )

    def __hash__(self) -> int:
        return hash(("port", self.number))

    def __repr__(self) -> str:
        node = 0 if self.node is LOCAL_NODE else self.node.name
        return f"#Port<{node}.{self.number}>"

    __str__ = __repr__


class Ref(_Id):
    """An Erlang reference; ``ids`` are the (up to 3) id words, low word first."""

    __slots__ = ("ids", "node", "creation")
    ids: tuple[int, ...]
    node: Atom
    creation: int

    def __init__(self, ids: Iterable[int], node: Atom = LOCAL_NODE, creation: int = 0) -> None:
        ids = tuple(ids)
        if not ids:
            raise ValueError("Ref: ids must be one word or more, not none")
        _check_id(
            "Ref",
            node,
            ("creation", creation, 32),
            *((f"ids[{i}]", w, 32) for i, w in enumerate(ids)),
        )
        object.__setattr__(self, "ids", ids)
        object.__setattr__(self, "node", node)
        object.__setattr__(self, "creation", creation)

    @classmethod
    def from_checked(cls, ids: tuple[int, ...], node: Atom, creation: int) -> Ref:
        """A reference of fields a decoder has checked already (see
        ``Port.from_checked``)."""
        self = object.__new__(cls)
        object.__setattr__(self, "ids", ids)
        object.__setattr__(self, "node", node)
        object.__setattr__(self, "creation", creation)
        return self

    def __eq__(self, other: object) -> bool:
        return (
            type(other) is Ref
            and self.ids == other.ids
            and self.node is other.node
            and self.creation == other.creation
        )

    def __hash__(self) -> int:
        return hash(("ref",) + self.ids)

    def __repr__(self) -> str:
        node = 0 if self.node is LOCAL_NODE else self.node.name
        return "#Ref<" + ".".join([str(node)] + [str(i) for i in reversed(self.ids)]) + ">"

    __str__ = __repr__


class BitString:
    """A bit string whose size in bits is not a multiple of 8 (``<<1,2:3>>``).

    ``data`` holds ``ceil(size / 8)`` bytes, the bits left-aligned: the unused
    low bits of the last byte are zero (the constructor clears them).  A
    whole number of bytes is a binary, ``bytes``, never a ``BitString``.
    ``BitString(b"\\x01\\x40", 11)`` is ``<<1,2:3>>``.
    """

    __slots__ = ("data", "size")
    data: bytes
    size: int

    def __init__(self, data: bytes | bytearray | memoryview | Iterable[int], size: int) -> None:
        data = bytes(data)
        if type(size) is not int or size < 0:
            raise ValueError(f"bit string size must be an int >= 0, not {size!r}")
        if size % 8 == 0:
            raise ValueError("a bit string of whole bytes is a binary: use bytes")
        if len(data) != (size + 7) // 8:
            raise ValueError(
                f"a bit string of {size} bits needs {(size + 7) // 8} bytes, not {len(data)}"
            )
        unused = 8 - size % 8
        last = data[-1] & (0xFF << unused) & 0xFF
        if last != data[-1]:
            data = data[:-1] + bytes((last,))
        object.__setattr__(self, "data", data)
        object.__setattr__(self, "size", size)

    def __setattr__(self, key: str, value: object) -> None:
        raise AttributeError("BitString is immutable")

    def __reduce__(self) -> tuple[type[BitString], tuple[bytes, int]]:
        return (BitString, (self.data, self.size))

    @property
    def tail_bits(self) -> int:
        """The number of bits used in the last byte (1..7)."""
        return self.size % 8

    def __eq__(self, other: object) -> bool:
        return type(other) is BitString and self.size == other.size and self.data == other.data

    def __hash__(self) -> int:
        return hash(("bits", self.size, self.data))

    def __lt__(self, other: object) -> bool:
        return _order_key(self) < _order_key(other)

    # __repr__: Erlang syntax, installed by smp.core.pretty (which needs
    # this module's types, so this module cannot import it)


class Fun:
    """A local fun as the external term format carries it (``NEW_FUN_EXT``).

    Prints as ``#Fun<Module.OldIndex.OldUniq>``.  ``uniq`` is the 16-byte MD5
    of the module, ``index``/``old_index`` the fun's number in it,
    ``old_uniq`` the old hash, ``pid`` the process that made it and ``free``
    the tuple of its free variables' values.
    """

    __slots__ = ("module", "arity", "uniq", "index", "old_index", "old_uniq", "pid", "free")
    module: Atom
    arity: int
    uniq: bytes
    index: int
    old_index: int
    old_uniq: int
    pid: Pid
    free: tuple[Term, ...]

    def __init__(
        self,
        module: Atom,
        arity: int,
        uniq: bytes,
        index: int,
        old_index: int,
        old_uniq: int,
        pid: "Pid",
        free: Iterable[Term] = (),
    ) -> None:
        uniq = bytes(uniq)
        if len(uniq) != 16:
            raise ValueError(f"fun uniq must be 16 bytes, not {len(uniq)}")
        if type(module) is not Atom:
            raise TypeError(f"fun module must be an Atom, not {module!r}")
        for name, v in (
            ("arity", arity),
            ("index", index),
            ("old_index", old_index),
            ("old_uniq", old_uniq),
        ):
            if type(v) is not int:
                raise TypeError(f"fun {name} must be an int, not {v!r}")
        setattr_ = object.__setattr__
        setattr_(self, "module", module)
        setattr_(self, "arity", arity)
        setattr_(self, "uniq", uniq)
        setattr_(self, "index", index)
        setattr_(self, "old_index", old_index)
        setattr_(self, "old_uniq", old_uniq)
        setattr_(self, "pid", pid)
        setattr_(self, "free", tuple(free))

    def __setattr__(self, key: str, value: object) -> None:
        raise AttributeError("Fun is immutable")

    def __reduce__(self) -> tuple[type[Fun], tuple[object, ...]]:
        return (Fun, tuple(getattr(self, s) for s in self.__slots__))

    def __eq__(self, other: object) -> bool:
        return type(other) is Fun and all(
            getattr(self, s) == getattr(other, s) for s in self.__slots__
        )

    def __hash__(self) -> int:
        return hash(("fun", self.module, self.index, self.uniq, self.old_uniq))

    def __lt__(self, other: object) -> bool:
        return _order_key(self) < _order_key(other)

    # __repr__: Erlang syntax, installed by smp.core.pretty (which needs
    # this module's types, so this module cannot import it)


class ExportFun:
    """An external fun, ``fun Module:Function/Arity`` (``EXPORT_EXT``)."""

    __slots__ = ("module", "function", "arity")
    module: Atom
    function: Atom
    arity: int

    def __init__(self, module: Atom, function: Atom, arity: int) -> None:
        if type(module) is not Atom or type(function) is not Atom:
            raise TypeError(f"fun {module!r}:{function!r}: module and function must be Atoms")
        if type(arity) is not int or not 0 <= arity <= 255:
            raise ValueError(f"fun arity must be an int in 0..255, not {arity!r}")
        object.__setattr__(self, "module", module)
        object.__setattr__(self, "function", function)
        object.__setattr__(self, "arity", arity)

    def __setattr__(self, key: str, value: object) -> None:
        raise AttributeError("ExportFun is immutable")

    def __reduce__(self) -> tuple[type[ExportFun], tuple[Atom, Atom, int]]:
        return (ExportFun, (self.module, self.function, self.arity))

    def __eq__(self, other: object) -> bool:
        return (
            type(other) is ExportFun
            and self.module is other.module
            and self.function is other.function
            and self.arity == other.arity
        )

    def __hash__(self) -> int:
        return hash(("export", self.module, self.function, self.arity))

    def __lt__(self, other: object) -> bool:
        return _order_key(self) < _order_key(other)

    # __repr__: Erlang syntax, installed by smp.core.pretty (which needs
    # this module's types, so this module cannot import it)


class Map:
    """An Erlang map.  Immutable; any terms are keys (``1`` and ``1.0`` are two
    keys, lists are keys), and the pairs are kept in the order an OTP 25
    map of up to 32 keys keeps them: keys in Erlang's exact term order
    (integers before floats).  Iteration gives the keys in that order.

    ``Map({A.a: 1, A.b: 2})`` or ``Map([(key, value), ...])`` (a later pair
    replaces an earlier one with the same key, as ``maps:from_list/1``).
    """

    __slots__ = ("_items", "_index")
    _items: tuple[tuple[Term, Term], ...]
    _index: dict[object, int]

    def __init__(self, items: dict[Term, Term] | Map | Iterable[tuple[Term, Term]] = ()) -> None:
        if isinstance(items, (dict, Map)):
            items = items.items()
        index: dict[object, tuple[Term, Term]] = {}
        for k, v in items:
            index[_ekey(k)] = (k, v)
        pairs = list(index.values())
        if len(pairs) > 1:
            pairs.sort(key=lambda kv: _order_key(kv[0], True))
        object.__setattr__(self, "_items", tuple(pairs))
        object.__setattr__(self, "_index", {_ekey(k): i for i, (k, _) in enumerate(pairs)})

    def __setattr__(self, key: str, value: object) -> None:
        raise AttributeError("Map is immutable")

    def __reduce__(self) -> tuple[type[Map], tuple[list[tuple[Term, Term]]]]:
        return (Map, (list(self._items),))

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[Term]:
        return (k for k, _ in self._items)

    def __contains__(self, key: Term) -> bool:
        try:
            return _ekey(key) in self._index
        except TypeError:
            return False

    def __getitem__(self, key: Term) -> Term:
        return self._items[self._index[_ekey(key)]][1]

    def get(self, key: Term, default: Term = None) -> Term:
        try:
            return self[key]
        except (KeyError, TypeError):
            return default

    def items(self) -> list[tuple[Term, Term]]:
        return list(self._items)

    def keys(self) -> list[Term]:
        return [k for k, _ in self._items]

    def values(self) -> list[Term]:
        return [v for _, v in self._items]

    def __eq__(self, other: object) -> bool:
        if type(other) is not Map or len(other) != len(self):
            return False
        idx = other._index
        for k, v in self._items:
            i = idx.get(_ekey(k))
            if i is None or not (other._items[i][1] == v):
                return False
        return True

    def __hash__(self) -> int:
        return hash(("map",) + tuple(self._index))

    def __lt__(self, other: object) -> bool:
        return _order_key(self) < _order_key(other)

    # __repr__: Erlang syntax, installed by smp.core.pretty (which needs
    # this module's types, so this module cannot import it)


class ImproperList:
    """A list whose tail is not ``[]``: ``[1, 2 | tail]``."""

    __slots__ = ("elements", "tail")
    elements: list[Term]
    tail: Term

    def __init__(self, elements: Iterable[Term], tail: Term) -> None:
        if isinstance(tail, list):
            raise ValueError("tail of an improper list must not be a list")
        if not elements:
            raise ValueError("an improper list needs at least one element")
        self.elements = list(elements)
        self.tail = tail

    def __reduce__(self) -> tuple[type[ImproperList], tuple[list[Term], Term]]:
        return (ImproperList, (self.elements, self.tail))

    def __eq__(self, other: object) -> bool:
        return (
            type(other) is ImproperList
            and self.elements == other.elements
            and self.tail == other.tail
        )

    # unhashable, as a Python list (its elements can change): mypy has no
    # other spelling for "no __hash__" than overriding object's method with None
    # (typeshed declares list's the same way)
    __hash__ = None  # type: ignore[assignment]

    # __repr__: Erlang syntax, installed by smp.core.pretty (which needs
    # this module's types, so this module cannot import it)


NIL_ATOM = Atom("nil")


def atom(name: str) -> Atom:
    """Return the atom called ``name``."""
    return Atom(name)


def atom_of(x: Term) -> Term:
    """``x``, with a Python ``str`` read as the atom of that name: how the
    Python API and scenarios let atoms be written (``"send"`` for ``send``).
    The one place that rule is written."""
    return Atom(x) if isinstance(x, str) else x


class _AtomFactory:
    """``A.ok`` is ``Atom("ok")``; ``A["receive"]`` for names that are keywords."""

    def __getattr__(self, name: str) -> Atom:
        if name.startswith("__"):
            raise AttributeError(name)
        return Atom(name)

    def __getitem__(self, name: str) -> Atom:
        return Atom(name)


A = _AtomFactory()


def is_atom(term: Term) -> bool:
    return type(term) is Atom


def charlist(text: str) -> list[int]:
    """Return the Erlang string (list of character codes) for ``text``."""
    return [ord(c) for c in text]


#: Erlang's term order and the key of ``=:=`` (smp.core.termorder), over
#: this module's types
_order_key, _ekey = term_keys(Atom, Pid, Port, Ref, BitString, Fun, ExportFun, Map, ImproperList)


def term_order_key(term: Term) -> tuple[object, ...]:
    """A sort key for Erlang's term order: ``sorted(terms, key=term_order_key)``."""
    return _order_key(term)
