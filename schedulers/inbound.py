"""What a checked inbound frame does to a scheduler's ``Node``, with no
socket: ``apply_signal`` for a signal from a peer scheduler (a message, a
spawn, a link, an unlink or an exit to a process or a port, a port command
or its reply, a trace flag set from elsewhere), ``apply_publication`` for the dispatcher's publication
to the tracer-state replica (a snapshot, the dead and the tracers, the
tracer ports, the registry).  The loop (``schedulers.worker``) takes the
frame off its socket and decodes it (``smp.wire.protocol``); each record is
then one call here."""

from __future__ import annotations

from smp.core.terms import Atom, Port
from smp.wire.protocol import (
    Dead,
    Exit,
    Link,
    Msg,
    PortCmd,
    PortReply,
    Registry,
    Snap,
    Spawn,
    TraceFlag,
    TracerPorts,
    Tracers,
    Unlink,
)

from .engine import Node, pid_owner

__all__ = ["apply_signal", "apply_publication"]


def apply_signal(node: Node, sig) -> None:
    """One checked signal record from a peer scheduler (``smp.wire.protocol``)
    on this scheduler's ``node``."""
    t = type(sig)
    if t is Msg:
        node.deliver_remote(sig.to, sig.msg, sig.token)
    elif t is Spawn:
        try:
            node.spawn_local(sig.pid, sig.fun, sig.args, None, sig.link_to, sig.inherit)
        except BaseException:
            node.unclaim_process()  # the spawning scheduler took its place
            raise
    elif t is Link:
        _link(node, sig)
    elif t is Unlink:
        if type(sig.to) is Port:
            node.port_unlink_arrived(sig.to, sig.from_)
        elif (p := node.procs.get(sig.to)) is not None:
            node.unlink_arrived(p, sig.from_)
    elif t is PortCmd:
        node.remote_port_command(sig.port, sig.caller, sig.data, sig.reply)
    elif t is PortReply:
        node.port_reply_arrived(sig.caller, sig.value)
    elif t is TraceFlag:
        node.set_trace_flag(sig.pid, sig.flags, sig.on)
    elif t is Exit:
        _exit(node, sig)


def _link(node: Node, sig: Link) -> None:
    if type(sig.to) is Port:
        node.port_link_arrived(sig.to, sig.from_)
        return
    p = node.procs.get(sig.to)
    if p is None:
        node.transport.peer(
            pid_owner(sig.from_, node.nsched),
            Exit(sig.from_, sig.to, Atom("noproc"), True, None).encode(),
        )
    else:
        node.link_arrived(p, sig.from_, sig.inherit)


def _exit(node: Node, sig: Exit) -> None:
    if type(sig.to) is Port:
        node.port_exit_arrived(sig.to, sig.from_, sig.reason, sig.link)
        return
    p = node.procs.get(sig.to)
    if p is None:
        return
    if type(sig.from_) is Port and sig.link and sig.from_ not in p.links:
        # io.c sweep_one_link: a closing port signals a process only if the
        # process still has its side of the link (it unlinked meanwhile)
        return
    node.exit_signal_arrived(p, sig.from_, sig.reason, sig.link, sig.token)


def apply_publication(node: Node, body) -> None:
    """The body of one publication of the dispatcher (``protocol.Publication``,
    one of ``protocol.STATE_BODIES``) on this scheduler's replica in ``node``."""
    t = type(body)
    if t is Snap:
        node.apply_snapshot(body.snapshot)
    elif t is Dead:
        node.dead_remote.update(body.pids)
    elif t is Tracers:
        node.remote_tracers.update(body.pids)
    elif t is TracerPorts:
        node.remote_tracer_ports = set(body.ports)
    elif t is Registry:
        node.registry = dict(body.names)
