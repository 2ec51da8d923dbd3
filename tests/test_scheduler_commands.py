"""The scheduler's command table (``schedulers.commands.SchedulerCommands``)
driven directly in the test process: a nonsmp ``Node`` and a stand-in for
the loop that holds the sockets (``Wire``), no socket and no OS process.
Each command goes through ``command(name, args)``, as the scheduler's loop
calls it for a request from the controller."""

from __future__ import annotations

import pytest

from schedulers.commands import SchedulerCommands
from schedulers.engine import Node
from smp.core.errors import BadArg, Error
from smp.core.terms import A, Pid


class FakeWire:
    """The loop's side of the commands (``schedulers.commands.Wire``): the
    counts it reports and a record of the calls made on it."""

    def __init__(self):
        self.running = False
        self.stopping = False
        self.busy = (0, 0)
        self.bad_frames = 2
        self.unsendable = 3
        self.deliveries = 0
        self.backpressure_waits = 5
        self.peer_sent = [0, 0]
        self.peer_recv = [0, 0]
        self.pending = {"sock": ["frame", "frame"]}
        self.held = None
        self.calls: list = []

    def flush(self) -> None:
        self.calls.append("flush")

    def wait_published(self, seqs, timeout: float = 10.0) -> bool:
        self.calls.append(("wait_published", tuple(seqs)))
        return True

    def peer_lost(self, k: int) -> None:
        self.calls.append(("peer_lost", k))

    def wait_deliveries(self, n: int, timeout: float = 10.0) -> bool:
        self.calls.append(("wait_deliveries", n, timeout))
        return True


async def waiter(proc):
    await proc.receive()


async def echo_to(proc, to):
    await proc.send(to, await proc.receive())


@pytest.fixture
def wire():
    return FakeWire()


@pytest.fixture
def node():
    return Node(sched_id=1, nsched=1, smp=False)


@pytest.fixture
def cmds(node, wire):
    return SchedulerCommands(node, wire, local=True)


def run(node: Node) -> None:
    while node.run_some():
        pass


def test_spawn_makes_a_live_process_on_the_node(cmds, node):
    pid = cmds.command("spawn", (waiter, (), False))
    assert type(pid) is Pid and pid in node.procs
    run(node)
    assert cmds.command("alive", (pid,)) is True
    info = cmds.command("process_info", (pid,))
    assert info["status"] == "waiting" and info["message_queue_len"] == 0
    assert cmds.command("exit", (pid, A.kill)) is True
    run(node)
    assert cmds.command("alive", (pid,)) is False
    assert cmds.command("process_info", (pid,)) is None


def test_spawn_past_the_process_limit_is_system_limit_and_gives_the_place_back(cmds, node):
    node.set_process_limit(2)
    cmds.command("spawn", (waiter, (), False))
    with pytest.raises(Error):
        cmds.command("spawn_many", (waiter, [(), ()]))  # all of them or none
    assert len(node.procs) == 1
    pids = cmds.command("spawn_many", (waiter, [()]))
    assert len(pids) == 1 and len(node.procs) == 2
    with pytest.raises(Error):
        cmds.command("spawn", (waiter, (), False))
    run(node)


def test_a_collector_keeps_what_it_receives(cmds, node):
    sink = cmds.command("spawn", (waiter, (), True))
    p = cmds.command("spawn", (echo_to, (sink,), False))
    run(node)
    node.deliver_remote(p, "hello", None)
    run(node)
    assert cmds.command("messages", (sink,)) == ["hello"]
    assert cmds.command("messages", (sink, 1)) == []
    with pytest.raises(BadArg):
        cmds.command("messages", (p,))  # not a collector


def test_status_reports_the_node_and_the_wire(cmds, node, wire):
    s = cmds.command("status", ())
    assert s["idle"] and s["procs"] == 0 and s["runq"] == 0 and not s["timer"]
    assert (s["backlog"], s["backpressure_waits"], s["bad_frames"]) == (2, 5, 2)
    assert s["sys_made"] == 0  # nonsmp: no transport
    pid = cmds.command("spawn", (waiter, (), False))
    s = cmds.command("status", ())
    assert not s["idle"] and s["procs"] == 1 and s["busy"] == [repr(pid)]
    run(node)
    assert cmds.command("status", ())["idle"]


def test_stats_count_live_processes_and_the_wire_refusals(cmds, node):
    cmds.command("spawn", (waiter, (), False))
    cmds.command("spawn", (waiter, (), False))
    run(node)
    st = cmds.command("stats", ())
    assert st["processes"] == 2
    assert (st["bad_frames"], st["unsendable"]) == (2, 3)
    assert cmds.read_counters()["busy_s"] == 0.0


def test_register_whereis_and_unset(cmds, node):
    pid = cmds.command("spawn", (waiter, (), False))
    run(node)
    assert cmds.command("whereis", (A.srv,)) is None
    assert cmds.command("register", (A.srv, pid)) is True
    assert cmds.command("whereis", (A.srv,)) == pid
    with pytest.raises(Error):
        cmds.command("register", (A.srv, pid))  # the name is taken
    assert cmds.command("unset_reg", (A.srv, pid)) is True
    assert cmds.command("whereis", (A.srv,)) is None


def test_pause_resume_and_stop_are_asked_of_the_wire(cmds, node, wire):
    assert cmds.command("resume", ((1, 2, 3),)) is True
    assert wire.running and wire.calls == []  # nonsmp: no replica to wait for
    assert cmds.command("pause", ()) is True
    assert not wire.running and wire.calls == ["flush"]
    node.smp = True
    cmds.command("resume", ((1, 2, 3), 5.0))
    assert wire.running and wire.calls[-1] == ("wait_published", (1, 2, 3))
    assert cmds.command("stop", ()) is True and wire.stopping


def test_deliveries_are_waited_for_only_while_paused_and_not_stepped(cmds, wire):
    assert cmds.command("wait_deliveries", (7, 0.5)) is True
    assert wire.calls == [("wait_deliveries", 7, 0.5)]
    for bad in [(-1, 0.5), (True, 0.5), (7, 61), ("7",)]:
        with pytest.raises(BadArg):
            cmds.command("wait_deliveries", bad)
    wire.running = True
    with pytest.raises(BadArg, match="only while paused"):
        cmds.command("wait_deliveries", (7, 0.5))
    wire.running, wire.held = False, object()
    with pytest.raises(BadArg, match="only while paused"):
        cmds.command("wait_deliveries", (7, 0.5))
    assert len(wire.calls) == 1


def test_a_lost_scheduler_closes_its_peer_and_fires_links(cmds, node, wire):
    p = cmds.command("spawn", (waiter, (), False))
    run(node)
    gone = Pid(10_000)
    node.link_arrived(node.procs[p], gone)  # a link from a process of scheduler 2
    assert cmds.command("scheduler_lost", (2, [gone])) is True
    assert wire.calls == [("peer_lost", 2)]
    assert gone in node.dead_remote
    run(node)
    assert cmds.command("alive", (p,)) is False  # killed by the link, not trapping exits


def test_trace_ports_open_call_and_close_at_exit(cmds, node):
    port = cmds.command("open_trace_port", ("memory", (), {}))
    assert cmds.command("valid_port", (port,)) is not None
    tp = node.trace_ports[port]
    assert cmds.command("trace_port_call", (port, "info", ()))["kind"] == "memory"
    with pytest.raises(BadArg):
        cmds.command("trace_port_call", ("nope", "info", ()))
    assert not tp.closed
    cmds.close_trace_ports()
    assert tp.closed


@pytest.mark.parametrize("cmd, args", [("no_such", ()), ("status", []), (None, ())])
def test_an_unknown_command_or_bad_arguments_is_badarg(cmds, cmd, args):
    with pytest.raises(BadArg):
        cmds.command(cmd, args)


@pytest.mark.parametrize(
    "args",
    [
        ("no_such_step",),
        (None,),
        ("slice", 1),
        ("signal", 1),  # itself
        ("signal", 3),  # no such scheduler
        ("signal", "2"),
        ("rpc", 5),
        ("arrive", 0, 61),  # a wait past 60 s
        ("arrive", 3, 1.0),
        ("arrive", 0),
        ("publish", -1),
        ("begin", [1, 2]),
        ("start", "pids"),
    ],
)
def test_a_step_with_bad_arguments_is_badarg_before_the_loop_sees_it(wire, args):
    cmds = SchedulerCommands(Node(sched_id=1, nsched=2, smp=False), wire, local=True)
    wire.step = lambda what, a: wire.calls.append(("step", what, a))
    with pytest.raises(BadArg):
        cmds.command("step", args)
    assert not [c for c in wire.calls if c[0] == "step"]
    cmds.command("step", ("arrive", 2, 1.0))  # a good one reaches the loop
    assert wire.calls[-1] == ("step", "arrive", (2, 1.0))
