"""A node's spin ends as a stop when a signal shuts its context down mid-spin, even when rcl
reports that as an error while building the wait set; the same error with the context up is
raised as it is."""

from __future__ import annotations

import sys

import pytest
from palletizer.nodes.spin import quiet_at_stop, spin_until_shutdown
from rclpy.executors import ExternalShutdownException

from tests.graph.isolation import run_isolated

WAIT_SET = 'failed to initialize wait set: the given context is not valid'


class _Context:
    def __init__(self) -> None:
        self.up = True

    def ok(self) -> bool:
        return self.up


class _Executor:
    """Spins `turns` times, then fails the way rcl does: with the context shut down by a signal
    (`signalled`) or with it still up."""

    def __init__(self, turns: int, signalled: bool) -> None:
        self.context = _Context()
        self.turns = turns
        self.signalled = signalled
        self.spun = 0

    def spin_once(self, timeout_sec: float | None = None) -> None:
        self.spun += 1
        if self.spun > self.turns:
            if self.signalled:
                self.context.up = False
            raise RuntimeError(WAIT_SET)

    def spin(self) -> None:
        while self.context.ok():
            self.spin_once()


@pytest.mark.parametrize('poll_s', [None, 0.2])
def test_the_wait_set_race_on_a_signal_is_a_stop(poll_s):
    ex = _Executor(turns=3, signalled=True)
    with pytest.raises(ExternalShutdownException, match='context shut down') as err:
        spin_until_shutdown(ex, poll_s=poll_s)  # type: ignore[arg-type]
    assert isinstance(err.value.__cause__, RuntimeError) and ex.spun == 4


@pytest.mark.parametrize('poll_s', [None, 0.2])
def test_the_same_error_with_the_context_up_propagates(poll_s):
    ex = _Executor(turns=2, signalled=False)
    with pytest.raises(RuntimeError, match='wait set'):
        spin_until_shutdown(ex, poll_s=poll_s)  # type: ignore[arg-type]


def test_a_polled_spin_returns_once_the_context_is_down():
    ex = _Executor(turns=10**9, signalled=False)

    def spin_once(timeout_sec: float | None = None) -> None:
        ex.spun += 1
        if ex.spun == 5:
            ex.context.up = False

    ex.spin_once = spin_once  # type: ignore[method-assign]
    spin_until_shutdown(ex, poll_s=0.2)  # type: ignore[arg-type]
    assert ex.spun == 5


# A node whose Ctrl-C comes in its first moments: before rclpy.init installed rclpy's handler
# (only ours ran: the node used to spin on, deaf to it), or while the node is being built (rclpy
# then refuses to create entities on the shut-down context: an RCLError traceback and exit 1).
_EARLY_STOP = """
import os, signal, sys
import rclpy
from std_msgs.msg import String
from palletizer.nodes import spin

when = sys.argv[1]
real_init = rclpy.init

def init_after_ctrl_c(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGINT)
    real_init(*args, **kwargs)

def make():
    node = rclpy.create_node('early_stop')
    if when == 'building':
        os.kill(os.getpid(), signal.SIGINT)
    node.create_publisher(String, 'chatter', 10)
    return node

if when == 'before_init':
    rclpy.init = init_after_ctrl_c
spin.run_node(make)
"""


@pytest.mark.parametrize('when', ['before_init', 'building'])
def test_a_ctrl_c_while_the_node_starts_is_a_clean_stop(when):
    proc = run_isolated([sys.executable, '-c', _EARLY_STOP, when], timeout=20)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert 'Traceback' not in proc.stderr, proc.stderr[-2000:]


class _Node:
    def __init__(self) -> None:
        self.context = _Context()


class _Handle:
    def __init__(self) -> None:
        self.aborted = False

    def abort(self) -> None:
        self.aborted = True


def _publish_after(node: _Node, stop: bool):
    """An execute callback whose publish fails: on the shut-down context when `stop` (the stop
    came in the middle of the goal), or with the context up (a real error)."""

    def execute(_handle) -> str:
        if stop:
            node.context.up = False
        raise RuntimeError("Failed to publish: publisher's context is invalid")

    return execute


def test_a_goal_cut_short_by_a_stop_ends_quietly_as_aborted():
    node, handle = _Node(), _Handle()
    run = quiet_at_stop(node, _publish_after(node, stop=True), lambda: 'stopped')  # type: ignore[arg-type]
    assert run(handle) == 'stopped' and handle.aborted


def test_an_execute_error_with_the_context_up_propagates():
    node, handle = _Node(), _Handle()
    run = quiet_at_stop(node, _publish_after(node, stop=False), lambda: 'stopped')  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match='Failed to publish'):
        run(handle)
    assert not handle.aborted


def test_a_goal_that_ends_normally_keeps_its_result():
    node = _Node()
    run = quiet_at_stop(node, lambda _h: 'placed', lambda: 'stopped')  # type: ignore[arg-type]
    assert run(_Handle()) == 'placed'


_HANGING = """
import sys, threading
from palletizer.nodes.spin import destroy_within

class Node:
    def __init__(self, hang):
        self.hang = hang
        self.destroying = False
    def get_name(self):
        if self.destroying:  # as rclpy's InvalidHandle once destruction was requested
            raise RuntimeError('cannot use Destroyable because destruction was requested')
        return 'probe'
    def destroy_node(self):
        self.destroying = True
        if self.hang:
            threading.Event().wait()  # as the middleware's fini was seen to: forever

mode = sys.argv[1]
if mode == 'returns':
    destroy_within(Node(False), timeout_s=0.2)
    print('after destroy')
    sys.exit(3)
if mode == 'stop':
    destroy_within(Node(True), timeout_s=0.2)
if mode == 'code':
    destroy_within(Node(True), timeout_s=0.2, code=130)
if mode == 'error':
    try:
        raise RuntimeError('the node failed')
    finally:
        destroy_within(Node(True), timeout_s=0.2)
"""


@pytest.mark.parametrize(
    ('mode', 'code'), [('returns', 3), ('stop', 0), ('code', 130), ('error', 1)]
)
def test_a_destroy_that_hangs_ends_the_process_with_the_code_it_would_have_had(mode, code):
    """destroy_node hung in the middleware (1 stop in ~15 with robot:=ur): the process ends
    after the bound, with 0 on a stop, the caller's code, or 1 while an error propagates; a
    destroy that returns lets the process go on. The node, half destroyed, no longer answers
    get_name (rclpy's InvalidHandle): the watchdog must not need it, or it dies with a
    traceback and the process hangs on to launch's SIGKILL (two CI failures at dbb2913)."""
    import subprocess

    proc = subprocess.run(
        [sys.executable, '-c', _HANGING, mode], capture_output=True, text=True, timeout=30
    )
    assert proc.returncode == code, proc.stdout + proc.stderr
    hung = 'destroy_node hung for 0.2 s in the middleware' in proc.stderr
    assert hung == (mode != 'returns'), proc.stderr
    assert ('after destroy' in proc.stdout) == (mode == 'returns')


_STOPPED_AND_HUNG = """
import os, signal, sys, threading
from palletizer.nodes import spin

spin.init(stop_deadline_s=float(sys.argv[1]) if sys.argv[1] != 'none' else None)
os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C
for _ in range(100):  # the handler runs in the main thread, between bytecodes
    if spin._STOP.is_set():
        break
print('stopped', flush=True)
if sys.argv[2] == 'hang':
    threading.Event().wait(20)  # a cleanup that never ends (the middleware's, in CI)
    print('still here', flush=True)
spin.exit_now(0)
"""


@pytest.mark.parametrize(
    ('deadline', 'then', 'code', 'timed_out'),
    [('0.5', 'hang', 1, True), ('0.5', 'exit', 0, False), ('none', 'hang', 0, False)],
)
def test_a_stopped_node_with_a_deadline_ends_within_it_whatever_hangs(
    deadline, then, code, timed_out
):
    """A node of run_node's stopped by Ctrl-C ends within the stop deadline even when its
    cleanup hangs, printing every thread's stack (what hung) and exiting 1; a cleanup that ends
    in time exits 0; without a deadline (the nodes that keep data) nothing cuts it short."""
    import subprocess

    proc = subprocess.run(
        [sys.executable, '-c', _STOPPED_AND_HUNG, deadline, then],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert 'stopped' in proc.stdout, proc.stdout + proc.stderr
    assert proc.returncode == code, proc.stdout + proc.stderr
    assert ('Timeout' in proc.stderr) == timed_out, proc.stderr
    assert ('still here' in proc.stdout) == (deadline == 'none'), proc.stdout
