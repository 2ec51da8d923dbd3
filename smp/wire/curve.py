"""CURVE authentication, and knowing who sent a frame.

On ``tcp://`` endpoints, loopback included, every socket is encrypted and
authenticated with ZeroMQ's CURVE unless the emulator runs with
``insecure=True`` (``--insecure``).  The controller's host holds the
*server* key pair (from ``keys=DIR``, or made for the run when every
scheduler is local), which
the controller, the dispatcher and the local schedulers use; each remote
scheduler has a key pair of its own, and only schedulers whose public key is
in the allow-list directory may connect.  Scheduler inboxes are CURVE
servers with the scheduler's own key; their public keys travel in the
welcome, so peers can connect to each other.

``smp-emu keygen DIR [--name NAME]`` makes key pairs (``NAME.key``: public,
``NAME.key_secret``: secret, owner-only).  A peer with no key or an unknown
key is refused at the ZeroMQ handshake and counted; it never delivers a
frame.  ipc endpoints live in a directory only the owner can open.

Every receiving socket is a ROUTER, so it sees each frame's routing id; the
controller hands every sender a secret routing id per receiver
(``new_routing_id``), and a receiver takes a frame only from an id it was
given, with (CURVE) the key that sender authenticated with
(``recv_from``).  A field inside a frame never says who sent it.
"""

from __future__ import annotations

import ipaddress
import os
import stat
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypedDict

import zmq
import zmq.auth
from zmq.auth.thread import ThreadAuthenticator

from smp.core.errors import SmpError

__all__ = [
    "Authenticator",
    "curve_client",
    "curve_server",
    "InsecureWarning",
    "describe_peer",
    "ephemeral_security",
    "is_loopback",
    "keygen",
    "load_allowed",
    "load_keys",
    "load_public",
    "new_routing_id",
    "owner_only_dir",
    "recv_from",
    "server_security",
]


class InsecureWarning(UserWarning):
    """tcp without CURVE: anyone who can reach the ports can drive the emulator."""


class Authenticator:
    """A ZAP handler for one context: allows the public keys in ``allowed``
    and counts every refusal.  Runs a thread in the process that binds."""

    def __init__(self, ctx: zmq.Context[zmq.Socket[Any]], allowed: Iterable[bytes] = ()) -> None:
        self.allowed: set[bytes] = set(allowed)
        self.denied = 0
        self._lock = threading.Lock()
        self._auth = ThreadAuthenticator(ctx)
        self._auth.start()
        self._auth.configure_curve_callback(domain="*", credentials_provider=self)

    def allow(self, keys: Iterable[bytes | str]) -> None:
        with self._lock:
            self.allowed.update(k if isinstance(k, bytes) else k.encode() for k in keys)

    def callback(self, domain: str, key: bytes) -> bool:
        with self._lock:
            ok = key in self.allowed
            if not ok:
                self.denied += 1
            return ok

    def stop(self) -> None:
        self._auth.stop()


def keygen(directory: str, name: str = "server") -> tuple[str, str]:
    """Write ``NAME.key`` and ``NAME.key_secret`` in ``directory``."""
    d = Path(directory)
    try:
        d.mkdir(parents=True, exist_ok=True)
        for suffix in (".key", ".key_secret"):
            if (d / f"{name}{suffix}").exists():
                raise SmpError(f"{d / (name + suffix)} exists: not overwriting a key")
        public_file, secret_file = zmq.auth.create_certificates(str(d), name)
        os.chmod(secret_file, 0o600)
    except OSError as e:
        raise SmpError(f"cannot write keys in {directory}: {_why(e, directory)}") from None
    return public_file, secret_file


def _why(e: OSError, said: str | None = None) -> str:
    """An OS error in a few words, with the file it is about (unless that is
    ``said`` already)."""
    what = e.strerror or str(e)
    if e.filename and e.strerror and str(e.filename) != str(said):
        return f"{e.filename}: {what}"
    return what


def load_public(path: str) -> bytes:
    """The public key of a ``.key`` (or ``.key_secret``) file."""
    return _certificate(path)[0]


def _certificate(path: str) -> tuple[bytes, bytes | None]:
    """(public, secret or None) of a key file; a missing or unreadable one is
    an ``SmpError`` saying so in one line."""
    if not os.path.isfile(path):
        raise SmpError(f"no key file {path} (smp-emu keygen makes key pairs)")
    try:
        return zmq.auth.load_certificate(path)
    except OSError as e:
        raise SmpError(f"cannot read the key {path}: {_why(e, path)}") from None
    except ValueError:
        raise SmpError(f"{path} holds no public key: not a key file of smp-emu keygen") from None


def load_keys(path: str) -> tuple[bytes, bytes]:
    """(public, secret) from a ``.key_secret`` file."""
    public, secret = _certificate(path)
    if secret is None:
        raise SmpError(f"{path} has no secret key (use the .key_secret file)")
    return public, secret


def load_allowed(directory: str) -> set[bytes]:
    """Public keys of every ``*.key`` file in ``directory``."""
    d = Path(directory)
    if not d.is_dir():
        raise SmpError(f"allow-list {directory} is not a directory")
    return {load_public(str(f)) for f in sorted(d.glob("*.key"))}


def is_loopback(endpoint: str) -> bool:
    """True for ipc endpoints and tcp endpoints on a loopback address."""
    if not endpoint.startswith("tcp://"):
        return True
    host = endpoint[6:].rsplit(":", 1)[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Security(TypedDict):
    """A process's CURVE keys and, where it binds, the keys it lets in."""

    public: bytes
    secret: bytes
    server_public: bytes
    allowed: set[bytes]


def server_security(keys_dir: str) -> Security:
    """The controller host's security: ``keys_dir`` holds ``server.key_secret``
    and ``authorized/`` with the public keys of the schedulers allowed in."""
    public, secret = load_keys(os.path.join(keys_dir, "server.key_secret"))
    allowed = load_allowed(os.path.join(keys_dir, "authorized"))
    allowed.add(public)
    return {"public": public, "secret": secret, "server_public": public, "allowed": allowed}


def ephemeral_security() -> Security:
    """CURVE for tcp endpoints with every scheduler on this host: a server key
    pair made for this run alone (no key files), allowed by itself only."""
    public, secret = zmq.curve_keypair()
    return {"public": public, "secret": secret, "server_public": public, "allowed": {public}}


def new_routing_id() -> bytes:
    """A secret ZeroMQ routing id for one sender on one socket: a receiver
    accepts a frame only from the routing ids it was given for its peers
    (ZeroMQ keeps ids that start with a zero byte for the ones it makes)."""
    return b"\x01" + os.urandom(15)


def recv_from(
    sock: zmq.Socket[bytes], secure: bool, flags: int = 0
) -> tuple[bytes, list[bytes], str | None]:
    """One message from a ROUTER socket: the sender's routing id, the other
    parts, and (``secure``) the CURVE user id the authenticator gave the
    sender's connection: its public key, which it cannot choose."""
    if not secure:
        parts = sock.recv_multipart(flags)
        return parts[0], parts[1:], None
    frames = sock.recv_multipart(flags, copy=False)
    user: str | None = None
    if len(frames) > 1:
        try:
            # pyzmq types a property got by name as int | str: a metadata
            # property (User-Id) is a str, which its stub cannot tell
            user = frames[1].get("User-Id")  # type: ignore[assignment]
        except zmq.ZMQError:
            user = None
    return frames[0].bytes, [f.bytes for f in frames[1:]], user


def describe_peer(routing_id: bytes, user: str | None = None) -> str:
    """How a log line names the sender of a frame."""
    return f"routing id {routing_id.hex() or '-'}" + (f", key {user}" if user else "")


def owner_only_dir(path: str | None) -> bool:
    """True when ``path`` is a directory of this user that nobody else may open."""
    if not path:
        return False
    try:
        st = os.stat(path)
    except OSError:
        return False

    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077


def curve_client(
    sock: zmq.Socket[Any], security: Security | None, server_key: bytes | None = None
) -> None:
    """Make ``sock`` a CURVE client of the controller's server key (or of
    ``server_key``: a peer's own) when security is on (``security`` None: off)."""
    if not security:
        return
    sock.curve_secretkey = security["secret"]
    sock.curve_publickey = security["public"]
    sock.curve_serverkey = server_key or security["server_public"]


def curve_server(sock: zmq.Socket[Any], security: Security | None) -> None:
    """Make ``sock`` a CURVE server with this process's own key when security
    is on.  Who may connect is the ``Authenticator``'s business."""
    if not security:
        return
    sock.curve_secretkey = security["secret"]
    sock.curve_publickey = security["public"]
    sock.curve_server = True
