"""Encoding and decoding of the frames that cross the emulator's sockets.

Every frame that arrives on a socket is data.  ``loads`` decodes with an
allow-list unpickler: besides the builtin scalars and containers that
pickle makes without naming a class, it builds only the term types (through
checking constructors: a pid whose number is not a small non-negative
integer is refused) and, where the decoder is asked for them, a few more
classes (state snapshots, exceptions in replies).  Anything else, a class or
a function that would run code included, makes the frame a
``ProtocolError``.

Functions (process bodies, ``define``'d functions) travel as importable
references ``module:qualname``: ``dumps`` writes an ``async def`` function
that way, and a decoder resolves a reference only where its channel allows
it (``funs="import"`` for the controller's commands, ``funs="loaded"`` for
peers: a module already loaded, never an import), and only to an
``async def`` function (a reference to anything else is a
``ProtocolError``; one to a function that is not there becomes an
``Unresolved`` body, whose process crashes with ``undef``, as spawning a
missing function does).  A closure cannot travel by reference: ``dumps``
raises ``Unencodable`` for it (and for any value the decoders refuse), and
``dumps_frame(..., code_ok=True)`` ships it with dill instead, which only
``loads_frame(..., code_ok=True)`` decodes: the schedulers do that for
frames from an authenticated controller alone.
"""

from __future__ import annotations

import collections
import importlib
import inspect
import io
import pathlib
import pickle
import sys
import types
from collections.abc import Callable, Coroutine
from typing import IO, Any, NoReturn, cast

from smp.core.errors import BadArg, Error, ProtocolError, SmpError
from smp.core.state import Snapshot
from smp.core.terms import (
    ATOMS,
    LOCAL_NODE,
    PIDS,
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

__all__ = [
    "DATA",
    "MAX_FRAME",
    "MAX_RUN",
    "STATE",
    "TERMS",
    "WIRE_VERSION",
    "Unencodable",
    "Unresolved",
    "dumps",
    "dumps_frame",
    "fun_ref",
    "load_record",
    "loads",
    "loads_frame",
    "loads_terms",
    "run_bodies",
]

#: Version of the batch frames schedulers send the dispatcher:
#: ``("b", WIRE_VERSION, scheduler_id, items)``.
WIRE_VERSION = 3

MAX_FRAME = 256 * 1024 * 1024  # larger frames are refused before decoding
MAX_RUN = 1_000_000  # messages in one run

_PICKLE = pickle.HIGHEST_PROTOCOL
_LIMIT = 1 << 32

#: What a decoder returns: terms and the emulator's own data (commands,
#: replies, snapshots, exceptions), as the sender built them.  Which it is
#: depends on the frame, which its reader checks at run time, as it checks a
#: term: ``Any`` under this name, as :data:`smp.core.terms.Term`.
Decoded = Any


class Unencodable(BadArg):
    """A value that cannot travel as data (a closure, an object of a class no
    decoder builds)."""


# ---------------------------------------------------------------- checking constructors


def _u32(x: object, what: str) -> int:
    if type(x) is not int or not 0 <= x < _LIMIT:
        raise ProtocolError(f"{what} must be an integer in 0..2**32-1, not {x!r}")
    return x


def _node(node: object) -> Atom:
    if type(node) is not Atom:
        raise ProtocolError(f"node must be an atom, not {node!r}")
    return node


def _atom(name: object = None, *rest: object) -> Atom:
    a = ATOMS.get(name) if type(name) is str and not rest else None
    if a is not None:  # an atom that exists already: the commonest case
        return a
    if type(name) is not str or rest:
        raise ProtocolError(f"atom name must be one str, not {name!r}")
    return Atom(name)


def _pid(
    number: object = None, serial: object = 0, node: object = LOCAL_NODE, creation: object = 0
) -> Pid:
    # the checks _u32 and _node make, written out for the commonest case, and
    # the interned pid found without a call
    if (
        type(number) is int
        and type(serial) is int
        and type(creation) is int
        and type(node) is Atom
        and 0 <= number < _LIMIT
        and 0 <= serial < _LIMIT
        and 0 <= creation < _LIMIT
    ):
        p = PIDS.get((number, serial, node, creation))
        return p if p is not None else Pid(number, serial, node, creation)
    return Pid(
        _u32(number, "pid number"),
        _u32(serial, "pid serial"),
        _node(node),
        _u32(creation, "pid creation"),
    )


def _port(number: object = None, node: object = LOCAL_NODE, creation: object = 0) -> Port:
    return Port(_u32(number, "port number"), _node(node), _u32(creation, "port creation"))


def _ref(ids: object = None, node: object = LOCAL_NODE, creation: object = 0) -> Ref:
    if type(ids) is not tuple or not 1 <= len(ids) <= 5:
        raise ProtocolError(f"ref ids must be a tuple of 1 to 5 integers, not {ids!r}")
    for i in ids:
        _u32(i, "ref id")
    return Ref(ids, _node(node), _u32(creation, "ref creation"))


def _improper(elements: object = None, tail: object = None) -> ImproperList:
    if type(elements) is not list or not elements or type(tail) is list:
        raise ProtocolError("improper list must be a non-empty list and a tail that is not a list")
    return ImproperList(elements, tail)


def _bits(data: object = None, size: object = None) -> BitString:
    if type(data) is not bytes or type(size) is not int:
        raise ProtocolError("bit string must be built from bytes and a bit count")
    try:
        return BitString(data, size)
    except ValueError as e:
        raise ProtocolError(f"bit string: {e}") from None


def _map(pairs: object = None) -> Map:
    if type(pairs) is not list or not all(type(kv) is tuple and len(kv) == 2 for kv in pairs):
        raise ProtocolError("map must be built from a list of (key, value) pairs")
    return Map(pairs)


def _funterm(
    module: Term = None,
    arity: Term = None,
    uniq: Term = None,
    index: Term = None,
    old_index: Term = None,
    old_uniq: Term = None,
    pid: Term = None,
    free: Term = (),
) -> Fun:
    if type(uniq) is not bytes or type(pid) is not Pid or type(free) is not tuple:
        raise ProtocolError("fun must carry 16 bytes of uniq, a pid and a tuple of free values")
    try:
        return Fun(module, arity, uniq, index, old_index, old_uniq, pid, free)
    except (TypeError, ValueError) as e:
        raise ProtocolError(f"fun: {e}") from None


def _export(module: Term = None, function: Term = None, arity: Term = None) -> ExportFun:
    try:
        return ExportFun(module, function, arity)
    except (TypeError, ValueError) as e:
        raise ProtocolError(f"external fun: {e}") from None


def _counter(mapping: object = None) -> collections.Counter[object]:
    if mapping is not None and type(mapping) is not dict:
        raise ProtocolError("Counter must be built from a dict")
    return collections.Counter(mapping or {})


def _path(*parts: object) -> pathlib.PurePosixPath:
    if not all(type(p) is str for p in parts):
        raise ProtocolError("path parts must be str")
    return pathlib.PurePosixPath(*cast("tuple[str, ...]", parts))  # checked just above


def _fun(module: str, qualname: str) -> NoReturn:
    """The marker of a function reference; decoders resolve it instead."""
    raise ProtocolError(f"function reference {module}:{qualname} where none may be")


class _Fixed:
    """A constructor as a decoder hands it to the unpickler: an object that
    cannot be changed (a frame may apply ``BUILD`` to whatever a name
    resolved to, to set attributes on it), and makes a value when called."""

    __slots__ = ()


def _fixed(f: Callable[..., object]) -> _Fixed:
    cls: type[_Fixed] = type(
        f"_{f.__name__}", (_Fixed,), {"__slots__": (), "__call__": staticmethod(f)}
    )
    return cls()


#: Term classes: what message bodies and batches may contain.
TERMS: dict[tuple[str, str], _Fixed] = {
    ("smp.core.terms", "Atom"): _fixed(_atom),
    ("smp.core.terms", "Pid"): _fixed(_pid),
    ("smp.core.terms", "Port"): _fixed(_port),
    ("smp.core.terms", "Ref"): _fixed(_ref),
    ("smp.core.terms", "ImproperList"): _fixed(_improper),
    ("smp.core.terms", "BitString"): _fixed(_bits),
    ("smp.core.terms", "Map"): _fixed(_map),
    ("smp.core.terms", "Fun"): _fixed(_funterm),
    ("smp.core.terms", "ExportFun"): _fixed(_export),
}
#: Terms and the emulator's own data: replies, commands, state publications.
DATA: dict[tuple[str, str], object] = {
    **TERMS,
    ("builtins", "set"): set,
    ("builtins", "frozenset"): frozenset,
    ("builtins", "Ellipsis"): ...,
    ("collections", "Counter"): _fixed(_counter),
    ("pathlib", "PosixPath"): _fixed(_path),
    ("pathlib", "PurePosixPath"): _fixed(_path),
}
#: Data and the dispatcher's state snapshots (its publications and replies).
STATE: dict[tuple[str, str], object] = {
    **DATA,
    ("smp.core.state", "Snapshot"): _fixed(Snapshot),
}
_EXCEPTION_MODULES: dict[str, types.ModuleType] = {
    "builtins": __import__("builtins"),
    "smp.core.errors": sys.modules[SmpError.__module__],
}
_EXCEPTIONS: dict[tuple[str, str], _Fixed] = {}


def _exception(module: str, name: str) -> _Fixed | None:
    """The constructor of an exception class a reply may carry."""
    f = _EXCEPTIONS.get((module, name))
    if f is None:
        cls = _exception_class(module, name)
        if cls is None:
            return None
        f = _EXCEPTIONS[(module, name)] = _fixed(cls)
    return f


def _exception_class(module: str, name: str) -> type[Exception] | None:
    """An exception class of the builtins or of ``smp.core.errors`` (replies carry
    them); never a ``BaseException`` that is not an ``Exception``."""
    mod = _EXCEPTION_MODULES.get(module)
    cls = getattr(mod, name, None) if mod is not None and not name.startswith("_") else None
    if isinstance(cls, type) and issubclass(cls, Exception):
        return cls
    return None


_IDENT = str.isidentifier


class Unresolved:
    """A function reference that names no ``async def`` function here.  As a
    process body it makes a process that crashes with ``undef``, as spawning
    a function that does not exist does in the VM."""

    __name__: str

    def __init__(self, module: str, qualname: str, why: str) -> None:
        self.__module__, self.__qualname__, self.why = module, qualname, why
        self.__name__ = qualname.rsplit(".", 1)[-1]

    def __call__(self, proc: object, *args: Term) -> Coroutine[Any, Any, NoReturn]:
        return self._undef(args)

    async def _undef(self, args: tuple[Term, ...]) -> NoReturn:

        raise Error(
            (
                Atom("undef"),
                [
                    (
                        Atom(self.__module__),
                        Atom(self.__name__),
                        list(args),
                        [(Atom("reason"), self.why.encode())],
                    )
                ],
            )
        )

    def __repr__(self) -> str:
        return f"<unresolved {self.__module__}:{self.__qualname__}: {self.why}>"


def _resolve(module: object, qualname: object, may_import: bool) -> types.FunctionType | Unresolved:
    if (
        type(module) is not str
        or type(qualname) is not str
        or not all(_IDENT(p) for p in module.split("."))
        or not all(_IDENT(p) and not p.startswith("__") for p in qualname.split("."))
    ):
        raise ProtocolError(f"malformed function reference {module!r}:{qualname!r}")
    mod = sys.modules.get(module)
    if mod is None:
        if not may_import:
            return Unresolved(module, qualname, "module not loaded here")
        try:
            mod = importlib.import_module(module)
        except Exception as e:
            return Unresolved(module, qualname, f"cannot import it: {type(e).__name__}: {e}")
    obj: object = mod
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
    if obj is None:
        return Unresolved(module, qualname, "no such function here")
    if type(obj) is not types.FunctionType or not inspect.iscoroutinefunction(obj):
        raise ProtocolError(
            f"function reference {module}:{qualname} names what is not an async def function"
        )
    return obj


def _resolve_loaded(
    module: object = None, qualname: object = None
) -> types.FunctionType | Unresolved:
    return _resolve(module, qualname, False)


def _resolve_import(
    module: object = None, qualname: object = None
) -> types.FunctionType | Unresolved:
    return _resolve(module, qualname, True)


_FUNS: dict[str | None, _Fixed | None] = {
    None: None,
    "loaded": _fixed(_resolve_loaded),
    "import": _fixed(_resolve_import),
}


class _Unpickler(pickle.Unpickler):
    def __init__(
        self,
        file: IO[bytes],
        classes: dict[tuple[str, str], object],
        funs: _Fixed | None,
        exceptions: bool,
    ) -> None:
        super().__init__(file)
        self._classes = classes
        self._funs = funs
        self._exceptions = exceptions

    def find_class(self, module: str, name: str) -> object:
        f = self._classes.get((module, name))
        if f is not None:
            return f
        if module == "smp.wire.codec" and name == "_fun" and self._funs is not None:
            return self._funs
        if self._exceptions:
            f = _exception(module, name)
            if f is not None:
                return f
        raise ProtocolError(f"frame refers to {module}.{name}, which no frame may contain")

    def persistent_load(self, pid: object) -> NoReturn:
        raise ProtocolError("frame has a persistent id")


class _TermUnpickler(pickle.Unpickler):
    """The hot path: message bodies and batches (terms only)."""

    def find_class(self, module: str, name: str) -> object:
        f = TERMS.get((module, name))
        if f is not None:
            return f
        raise ProtocolError(f"frame refers to {module}.{name}, which no frame may contain")

    def persistent_load(self, pid: object) -> NoReturn:
        raise ProtocolError("frame has a persistent id")


def _size(raw: object) -> None:
    if type(raw) is not bytes:
        raise ProtocolError(f"frame is {type(raw).__name__}, not bytes")
    if len(raw) > MAX_FRAME:
        raise ProtocolError(f"frame of {len(raw)} bytes is larger than {MAX_FRAME}")


def loads_terms(raw: bytes) -> Term:
    """Decode a frame that holds terms only (batches, message bodies)."""
    _size(raw)
    try:
        return _TermUnpickler(io.BytesIO(raw)).load()
    except ProtocolError:
        raise
    except Exception as e:
        raise ProtocolError(f"undecodable frame: {type(e).__name__}: {e}") from None


def load_record(f: IO[bytes]) -> Decoded:
    """One pickle read from the file ``f`` (a dispatcher journal: a file is
    data from outside too), decoded as the dispatcher's frames are; raises
    ``EOFError`` at the end of the file."""
    return _Unpickler(f, STATE, None, False).load()


def loads(
    raw: bytes, *, funs: str | None = None, exceptions: bool = True, state: bool = False
) -> Decoded:
    """Decode a data frame: terms, a few builtin and library classes,
    exceptions (``exceptions=False``: none), state snapshots (``state``: the
    dispatcher's frames), and function references where ``funs`` allows
    them.  Raises ``ProtocolError`` for anything else."""
    _size(raw)
    try:
        return _Unpickler(io.BytesIO(raw), STATE if state else DATA, _FUNS[funs], exceptions).load()
    except ProtocolError:
        raise
    except Exception as e:
        raise ProtocolError(f"undecodable frame: {type(e).__name__}: {e}") from None


def run_bodies(blob: object, n: int, ts_kind: int) -> list[Term]:
    """The checked bodies of a run of ``n`` system messages: terms only, ``n``
    of them, each a tuple when the queue completes it with a timestamp.  The
    dispatcher checks a run with this before it counts, the receiving
    scheduler again before it delivers, so both refuse the same runs."""
    if type(blob) is not bytes:
        raise ProtocolError("run bodies are not bytes")
    bodies = loads_terms(blob)
    if type(bodies) is not list or len(bodies) != n:
        raise ProtocolError(f"run does not hold the {n} bodies it says")
    if ts_kind:
        for b in bodies:
            if type(b) is not tuple or not b:
                raise ProtocolError("a run body to complete with a timestamp is not a tuple")
    return bodies


# ---------------------------------------------------------------- encoding


def fun_ref(f: object) -> tuple[str, str] | None:
    """``(module, qualname)`` when ``f`` is an ``async def`` function a decoder
    can find again by that name; None otherwise (a closure, a lambda)."""
    if type(f) is not types.FunctionType or not inspect.iscoroutinefunction(f):
        return None
    module: object = getattr(f, "__module__", None)
    qualname: str = getattr(f, "__qualname__", "")
    if type(module) is not str:
        return None
    mod = sys.modules.get(module)
    if mod is None or "<" in qualname:
        return None
    obj: object = mod
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
    return (module, qualname) if obj is f else None


_PLAIN = frozenset(
    {
        Atom,
        Pid,
        Port,
        Ref,
        ImproperList,
        BitString,
        Map,
        Fun,
        ExportFun,
        Snapshot,
        collections.Counter,
        bytearray,
        pathlib.PosixPath,
        pathlib.PurePosixPath,
        type(...),
    }
)


class _Pickler(pickle.Pickler):
    # a reduce value (a constructor and its arguments), or NotImplemented for
    # pickle's own way with obj: Any, as typeshed's NotImplemented is (mypy
    # takes returning it from a function of any other return type for Any)
    def reducer_override(self, obj: object) -> Any:
        t = type(obj)
        if t in _PLAIN:
            return NotImplemented
        # type(obj), not t: mypy narrows obj by a test on its own type only
        if type(obj) is type and (
            obj in _PLAIN
            or (issubclass(obj, Exception) and _exception_class(obj.__module__, obj.__name__))
        ):
            return NotImplemented  # the class of a value above, by reference
        if obj is _fun:
            # the reference constructor itself, by reference
            return NotImplemented
        if t is types.FunctionType:
            ref = fun_ref(obj)
            if ref is None:
                raise Unencodable(
                    f"{getattr(obj, '__qualname__', obj)!r} cannot travel by "
                    "reference: only a module-level async def function can"
                )
            return (_fun, ref)
        if isinstance(obj, BaseException):
            if isinstance(obj, Exception) and _exception_class(t.__module__, t.__name__) is t:
                return NotImplemented
            return (SmpError, (f"{t.__qualname__}: {obj}",))
        raise Unencodable(
            f"a {t.__module__}.{t.__qualname__} cannot travel between the emulator's processes"
        )


def dumps(obj: object) -> bytes:
    """Encode data for ``loads``: functions as references, exceptions of
    other modules as ``SmpError`` naming them; ``Unencodable`` for what no
    decoder would build."""
    f = io.BytesIO()
    try:
        _Pickler(f, _PICKLE).dump(obj)
    except (pickle.PicklingError, RecursionError, TypeError) as e:
        raise Unencodable(f"cannot encode a frame: {type(e).__name__}: {e}") from None
    return f.getvalue()


def dumps_frame(obj: object, code_ok: bool = False) -> bytes:
    """A frame with a leading codec byte: ``P`` data (``dumps``), or, only
    when ``code_ok`` (the controller's channel to a scheduler, authenticated),
    ``D`` dill for a value that carries code (a closure to spawn)."""
    try:
        return b"P" + dumps(obj)
    except Unencodable:
        if not code_ok:
            raise
    import dill  # heavy, and only for closures on an authenticated channel

    code: bytes = dill.dumps(obj)
    return b"D" + code


def loads_frame(
    raw: bytes, *, code_ok: bool = False, funs: str | None = None, state: bool = False
) -> Decoded:
    """The inverse of ``dumps_frame``.  A ``D`` frame (code) is decoded only
    when ``code_ok``: the channel is authenticated as the controller."""
    if type(raw) is not bytes:
        raise ProtocolError(f"frame is {type(raw).__name__}, not bytes")
    if raw[:1] == b"P":
        return loads(raw[1:], funs=funs, state=state)
    if raw[:1] == b"D":
        if not code_ok:
            raise ProtocolError(
                "frame carries code, which only the authenticated controller "
                "may send to a scheduler"
            )
        _size(raw)
        import dill

        try:
            return dill.loads(raw[1:])
        except Exception as e:
            raise ProtocolError(f"undecodable frame: {type(e).__name__}: {e}") from None
    raise ProtocolError(f"frame with unknown codec byte {raw[:1]!r}")
