"""The dispatcher's control commands, driven directly: no process, no socket,
no thread (``dispatcher.commands.DispatcherCommands`` and the queue events
it queues, ``dispatcher.events.QueueEvents``).

The test plays the server: a ``FakeHost`` records what the commands publish
and answers for the sockets, and the test takes the queue as the dispatch
thread would.
"""

from __future__ import annotations

import pytest

from dispatcher.commands import DispatcherCommands
from dispatcher.queue import SysMsgQueue
from dispatcher.table import PidTable
from smp.core import messages as M
from smp.core.errors import BadArg
from smp.core.placement import PID_BASE
from smp.core.state import TracerState
from smp.core.terms import Atom, Pid, Port
from smp.wire.frames import QueueEvent
from smp.wire.protocol import Dead, Registry, TracerPorts

A = Atom
NSCHED = 2


class FakeHost:
    """The server's side of the commands: what they publish, and the
    sockets' answers."""

    def __init__(self) -> None:
        self.published: list = []
        self.inboxes: tuple | None = None

    def pub(self, body) -> None:
        self.published.append(body)

    def hello(self) -> list:
        return [1, 1, 1]

    def pub_seqs(self) -> list:
        return [4, 5, 6]

    def set_inboxes(self, inbox_map: dict, ids: dict) -> None:
        self.inboxes = (inbox_map, ids)

    def refusals(self) -> dict:
        return {
            "bad_frames": 3,
            "last_bad_frame": "rejected",
            "bad_frames_at": {"ingest": 3},
            "auth_denied": 1,
            "handshake_failed": 0,
        }


@pytest.fixture
def host():
    return FakeHost()


@pytest.fixture
def cmds(host):
    table = PidTable()
    state = TracerState(liveness=table)
    q = SysMsgQueue(NSCHED, state, table)
    return DispatcherCommands(host, NSCHED, q, state, table)


def test_unknown_commands_and_bad_arguments_are_refused(cmds):
    with pytest.raises(BadArg, match="unknown dispatcher command"):
        cmds.command("no_such_command", ())
    with pytest.raises(BadArg, match="unknown dispatcher command"):
        cmds.command("whereis", [A("x")])  # args not a tuple
    with pytest.raises(BadArg, match="unknown dispatcher command"):
        cmds.command(b"hold", ())


def test_socket_side_commands_go_to_the_host(cmds, host):
    assert cmds.command("hello", ()) == [1, 1, 1]
    assert cmds.command("pub_seq", ()) == [4, 5, 6]
    assert cmds.command("set_inboxes", ({1: "a"}, {"ingest": {}})) is True
    assert host.inboxes == ({1: "a"}, {"ingest": {}})


def test_register_publishes_the_registry(cmds, host):
    p = Pid(PID_BASE)
    cmds.table.spawned(p)
    assert cmds.command("is_alive", (p,)) is True
    assert cmds.command("register", (A("srv"), p)) is True
    assert host.published == [Registry({A("srv"): p})]
    assert cmds.command("whereis", (A("srv"),)) == p
    assert cmds.command("unregister", (A("srv"),)) is True
    assert host.published[-1] == Registry({})
    assert cmds.command("whereis", (A("srv"),)) is None


def test_scheduler_lost_publishes_the_dead(cmds, host):
    p1, p2 = Pid(PID_BASE), Pid(PID_BASE + 1)  # schedulers 1 and 2
    cmds.table.spawned(p1)
    cmds.table.spawned(p2)
    assert cmds.command("scheduler_lost", (2,)) == [p2]
    assert host.published == [Dead([p2]), Registry({})]
    assert cmds.table.is_alive(p1) and not cmds.table.is_alive(p2)


def test_queued_messages_are_listed_and_counted(cmds):
    p = Pid(PID_BASE)
    assert cmds.command("error_logger", (p, A("report"))) is True
    ref = A("ref")
    assert cmds.command("trace_delivered", (p, A("all"), ref)) == ref
    assert cmds.command("queue_list", ()) == [
        (p, A("error_logger"), A("report")),
        (p, p, (A("trace_delivered"), A("all"), ref)),
    ]
    assert cmds.q.made[M.SYS_MSG_TYPE_ERRLGR] == 1
    status = cmds.command("status", ())
    assert status["queued"] == 2 and status["held"] is False
    assert status["bad_frames"] == 3 and status["auth_denied"] == 1
    stats = cmds.command("stats", ())
    assert stats["queued"] == 2 and stats["bad_frames_at"] == {"ingest": 3}
    assert "stderr_lines" in stats


def test_a_port_closes_at_its_place_in_the_queue(cmds, host):
    assert cmds.command("hold", ()) is True
    port = cmds.command("open_trace_port", ("memory", (), {}))
    assert port == Port(NSCHED + 1)
    assert host.published == [TracerPorts([port])]
    assert cmds.command("valid_port", (port,)) is True
    info = cmds.command("trace_port_call", (port, "info", ()))
    assert info == {"kind": "memory", "closed": False, "messages": 0}
    # held: the close waits in the queue, the port stays open
    assert cmds.command("trace_port_call", (port, "close", ())) is True
    assert cmds.table.ports[port].closed is False
    # the dispatch thread reaches it
    (event,) = cmds.q.take()
    assert type(event) is QueueEvent and event.kind == "close"
    cmds.events.close_ports(event.payload)
    assert cmds.table.ports[port].closed is True
    assert host.published[-1] == TracerPorts([])
    assert cmds.command("valid_port", (port,)) is False
    with pytest.raises(BadArg, match="no trace port"):
        cmds.command("trace_port_call", (Port(999), "info", ()))


def test_stop_while_held_closes_every_port_at_once(cmds, host):
    port = cmds.command("open_trace_port", ("memory", (), {}))
    cmds.command("hold", ())
    stats = cmds.command("stop", ())
    assert cmds.table.ports[port].closed is True
    assert host.published[-1] == TracerPorts([])
    assert stats["auth_denied"] == 1 and stats["queued"] == 0
    assert cmds.q.drain_by is None  # held: nothing was drained


@pytest.mark.parametrize(
    "cmd, args", [("step_ingest", (1, 61)), ("step_ingest", (1, "1")), ("step_end", (-1,))]
)
def test_a_step_wait_past_60_s_or_not_a_number_is_refused(cmds, cmd, args):
    with pytest.raises(BadArg, match="a wait of 0..60 s"):
        cmds.command(cmd, args)
