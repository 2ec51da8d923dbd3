"""CURVE authentication for schedulers on other hosts.

On ``tcp://`` endpoints that are not loopback, every socket is encrypted and
authenticated with ZeroMQ's CURVE (on by default there; it can be asked for
on loopback too).  The controller's host holds the *server* key pair, which
the controller, the dispatcher and the local schedulers use; each remote
scheduler has a key pair of its own, and only schedulers whose public key is
in the allow-list directory may connect.  Scheduler inboxes are CURVE
servers with the scheduler's own key; their public keys travel in the
welcome, so peers can connect to each other.

``smp-emu keygen DIR [--name NAME]`` makes key pairs (``NAME.key``: public,
``NAME.key_secret``: secret, owner-only).  A peer with no key or an unknown
key is refused at the ZeroMQ handshake and counted; it never delivers a
frame.  ipc endpoints live in a directory only the owner can open.
"""
from __future__ import annotations

import ipaddress
import os
import threading
from pathlib import Path

import zmq
import zmq.auth
from zmq.auth.thread import ThreadAuthenticator

from .errors import SmpError

__all__ = ["Authenticator", "keygen", "load_keys", "load_allowed", "is_loopback", "server_security"]


class Authenticator:
    """A ZAP handler for one context: allows the public keys in ``allowed``
    and counts every refusal.  Runs a thread in the process that binds."""

    def __init__(self, ctx: zmq.Context, allowed=()):
        self.allowed: set[bytes] = set(allowed)
        self.denied = 0
        self._lock = threading.Lock()
        self._auth = ThreadAuthenticator(ctx)
        self._auth.start()
        self._auth.configure_curve_callback(domain="*", credentials_provider=self)

    def allow(self, keys) -> None:
        with self._lock:
            self.allowed.update(k if isinstance(k, bytes) else k.encode() for k in keys)

    def callback(self, domain, key: bytes) -> bool:
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
    d.mkdir(parents=True, exist_ok=True)
    for suffix in (".key", ".key_secret"):
        if (d / f"{name}{suffix}").exists():
            raise SmpError(f"{d / (name + suffix)} exists: not overwriting a key")
    public_file, secret_file = zmq.auth.create_certificates(str(d), name)
    os.chmod(secret_file, 0o600)
    return public_file, secret_file


def load_keys(path: str) -> tuple[bytes, bytes]:
    """(public, secret) from a ``.key_secret`` file."""
    public, secret = zmq.auth.load_certificate(path)
    if secret is None:
        raise SmpError(f"{path} has no secret key (use the .key_secret file)")
    return public, secret


def load_allowed(directory: str) -> set[bytes]:
    """Public keys of every ``*.key`` file in ``directory``."""
    d = Path(directory)
    if not d.is_dir():
        raise SmpError(f"allow-list {directory} is not a directory")
    return {zmq.auth.load_certificate(str(f))[0] for f in sorted(d.glob("*.key"))}


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


def server_security(keys_dir: str) -> dict:
    """The controller host's security: ``keys_dir`` holds ``server.key_secret``
    and ``authorized/`` with the public keys of the schedulers allowed in."""
    public, secret = load_keys(os.path.join(keys_dir, "server.key_secret"))
    allowed = load_allowed(os.path.join(keys_dir, "authorized"))
    allowed.add(public)
    return {"public": public, "secret": secret, "server_public": public, "allowed": allowed}
