"""The Jazzy-safe way to run one node: init, spin, stop quietly on Ctrl-C, always clean up."""

from __future__ import annotations

import atexit
import contextlib
import faulthandler
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import NoReturn, TypeVar

import rclpy
from rclpy.action.server import ServerGoalHandle
from rclpy.executors import (
    Executor,
    ExternalShutdownException,
    MultiThreadedExecutor,
    SingleThreadedExecutor,
)
from rclpy.node import Node

__all__ = [
    'destroy_within',
    'exit_now',
    'init',
    'quiet_at_stop',
    'run_node',
    'spin_until_shutdown',
    'start',
]

DRAIN_S = 0.5  # [s] how long a stopping node waits for the callbacks still running
# [s] how long destroy_node may take before the process ends without it. A normal destroy takes
# milliseconds; 2 s leaves the rest of `ros2 launch`'s 5 s SIGINT grace.
DESTROY_S = 2.0
# [s] from a stop to the end of a node that keeps no data of its own (run_node's nodes), whatever
# hangs: inside `ros2 launch`'s 5 s SIGINT grace. In a CI run the planner, stopped by Ctrl-C,
# printed nothing and ended only at launch's SIGKILL 15 s later: not even destroy_within's
# watchdog ran, as when the main thread holds the GIL in a middleware call that hangs. The
# deadline is faulthandler's C thread, which needs no GIL: it prints every thread's stack (what
# hung) and ends the process with code 1.
STOP_DEADLINE_S = 4.0

T = TypeVar('T')
R = TypeVar('R')

_STOP = threading.Event()  # a SIGINT arrived (rclpy's handler chains to ours)
_DEADLINE_S: list[float] = []  # init(stop_deadline_s=...): the stop deadline, once given
_ARMED = threading.Event()


def _arm_stop_deadline() -> None:
    """Start the stop deadline (STOP_DEADLINE_S), where init was given one; once."""
    if _DEADLINE_S and not _ARMED.is_set():
        _ARMED.set()
        faulthandler.dump_traceback_later(_DEADLINE_S[0], exit=True)


def _stop_requested(_signum: int, _frame: object) -> None:
    """Python's half of SIGINT: remember it; rclpy's handler, once installed, has shut the
    context down. Before rclpy.init there is no context to shut down: init() does it then."""
    _STOP.set()
    _arm_stop_deadline()


def init(args: list[str] | None = None, stop_deadline_s: float | None = None) -> None:
    """rclpy.init, with Ctrl-C a stop like SIGTERM instead of a KeyboardInterrupt.

    rclpy's signal handler shuts the context down, which wakes every executor, and then calls the
    handler that was installed before it. Python's default one raises KeyboardInterrupt in the
    main thread wherever it happens to be: in the middle of destroy_node, closing a bag, or
    joining the worker, and again for the second SIGINT that `ros2 launch` sends after the
    terminal's own. That left tracebacks and nodes killed by the signal (exit code -2). A handler
    that does nothing, installed first, leaves the stop to rclpy: spin raises
    ExternalShutdownException, and the node cleans up and exits 0. With `stop_deadline_s` [s]
    the process ends that long after a stop whatever hangs (STOP_DEADLINE_S says why).
    """
    if stop_deadline_s is not None:
        _DEADLINE_S[:] = [stop_deadline_s]
    signal.signal(signal.SIGINT, _stop_requested)
    # Python's finalization puts SIG_DFL back for a handler it installed, and `ros2 launch`
    # sends its SIGINT after the terminal's: arriving during the exit, it killed the node (-2).
    atexit.register(signal.signal, signal.SIGINT, signal.SIG_IGN)
    rclpy.init(args=args)
    if _STOP.is_set():
        # A Ctrl-C in the first moments (`ros2 launch` stopped right after it started) came
        # before rclpy had a context to shut down: the node ran on and ignored it.
        rclpy.try_shutdown()


def start(make: Callable[[], T]) -> T:
    """Build a node or an executor. One cut short by a stop (rclpy refuses to create entities
    on the shut-down context) raises ExternalShutdownException, the way rclpy reports a stop.
    Nothing is built once the stop is known: a half-built rclpy Executor complains when it is
    collected."""
    if _STOP.is_set() or not rclpy.ok():
        raise ExternalShutdownException('stopped while starting')
    try:
        return make()
    except Exception as exc:
        if not _STOP.is_set() and rclpy.ok():
            raise
        raise ExternalShutdownException(f'stopped while starting ({exc})') from exc


def quiet_at_stop(
    node: Node, execute: Callable[[ServerGoalHandle], R], stopped: Callable[[], R]
) -> Callable[[ServerGoalHandle], R]:
    """An action server's execute callback that a stop ends quietly.

    A stop (Ctrl-C) in the middle of a goal shuts the context down under it: the next publish
    or log call raises, and rclpy prints the traceback of the execute callback. Raised once the
    context is down, the error is the stop itself: the goal is aborted and ends with the node,
    with the result `stopped()`. While the context is ok an error is a real one and propagates.
    """

    def wrapped(handle: ServerGoalHandle) -> R:
        try:
            return execute(handle)
        except Exception:
            if node.context.ok():
                raise
            with contextlib.suppress(Exception):  # the handle may refuse the dead context too
                handle.abort()
            return stopped()

    return wrapped


def exit_now(code: int = 0) -> NoReturn:
    """End the process once the node is cleaned up, without the interpreter's finalization.

    That finalization (collecting every object of rclpy, numpy, numba, MuJoCo) took seconds of
    CPU: on a Ctrl-C all nodes of the graph do it at once, and on two loaded cores they missed
    the 5 s grace of `ros2 launch` in the middle of it ("Garbage-collecting"). Everything that
    matters is closed by then (bags, run files, renderers, the rclpy context); output is flushed.
    """
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass  # a closed or broken pipe: nothing more can be said
    os._exit(code)


def destroy_within(node: Node, timeout_s: float = DESTROY_S, code: int | None = None) -> None:
    """node.destroy_node(), or, when it has not returned after timeout_s [s], end the process.

    Under `ros2 launch` with robot:=ur, about 1 stop in 15 hung in the middleware: the main
    thread idle in destroy_node, in rcl's service fini of the type description service (py-spy),
    until launch's SIGTERM, and once past it to SIGKILL. Everything the node owns is closed
    before it (bags, run files, renderers); what is left is telling DDS peers that the node has
    gone, which they learn from the lease anyway. The process ends with the code it would have
    had: `code` when given, else 1 while an error propagates and 0 otherwise.
    """
    done = threading.Event()
    # Asked once the destroy has begun, a node answers get_name with rclpy's InvalidHandle: the
    # watchdog died of that with a traceback, and the process hung on to launch's SIGKILL.
    name = node.get_name()
    exc = sys.exc_info()[1]  # what propagates through the caller's `finally`, if anything
    failing = exc is not None and not isinstance(
        exc, KeyboardInterrupt | ExternalShutdownException
    )

    def watchdog() -> None:
        if not done.wait(timeout_s):
            with contextlib.suppress(Exception):  # nothing may keep the process from ending
                print(
                    f'[{name}] destroy_node hung for {timeout_s:g} s in the middleware; '
                    'the process ends without it',
                    file=sys.stderr,
                    flush=True,
                )
            exit_now(code if code is not None else 1 if failing else 0)

    threading.Thread(target=watchdog, name='destroy_watchdog', daemon=True).start()
    node.destroy_node()
    done.set()


def spin_until_shutdown(executor: Executor, poll_s: float | None = None) -> None:
    """Spin `executor` until its context shuts down: `executor.spin()`, or, with `poll_s`,
    `spin_once(poll_s)` while the context is ok.

    rcl raises a RuntimeError ("failed to initialize wait set: the given context is not valid")
    when a signal shuts the context down while the executor builds its wait set. That race made a
    node stopped by SIGTERM exit 1 now and then. Such an error once the context is down is the
    stop itself and is raised as ExternalShutdownException, the way rclpy reports a stop;
    while the context is ok it is a real error and propagates unchanged.
    """
    try:
        if not executor.context.ok():
            raise ExternalShutdownException('stopped before spinning')
        if poll_s is None:
            executor.spin()
        else:
            while executor.context.ok():
                executor.spin_once(timeout_sec=poll_s)
    except RuntimeError as exc:
        if executor.context.ok():
            raise
        raise ExternalShutdownException(f'context shut down while spinning ({exc})') from exc
    finally:
        _drain(executor)


def _drain(executor: Executor, timeout_s: float = DRAIN_S) -> None:
    """Let the callbacks a MultiThreadedExecutor still runs end, up to timeout_s [s].

    When spinning stops, the handlers already handed to its thread pool go on running: a node
    cleaning up (telemetry closing its bag) would race them. One that raised after the stop (a
    publish on the shut-down context) is a consequence of the stop; its exception is fetched
    here, or rclpy would print "The following exception was never retrieved" at exit.
    """
    tasks = list(getattr(executor, '_futures', ()))  # MultiThreadedExecutor's pending handlers
    deadline = time.monotonic() + timeout_s
    while any(not t.done() for t in tasks) and time.monotonic() < deadline:
        time.sleep(0.01)
    if executor.context.ok():
        return  # spin ended by an error of its own: leave the handlers' errors to rclpy
    for t in tasks:
        if t.done():
            t.exception()


def run_node(
    make: Callable[[], Node], args: list[str] | None = None, threads: int | None = None
) -> NoReturn:
    """rclpy.init, build the node, spin (multi-threaded when `threads` is given), then
    destroy_node and try_shutdown whatever happened. `with rclpy.init()` is rolling-only. A
    stop ends the process within STOP_DEADLINE_S whatever hangs."""
    init(args, stop_deadline_s=STOP_DEADLINE_S)  # these nodes keep no data of their own
    node = None
    try:
        node = start(make)
        executor: Executor = start(
            SingleThreadedExecutor if threads is None else lambda: MultiThreadedExecutor(threads)
        )
        executor.add_node(node)
        spin_until_shutdown(executor)
    except (KeyboardInterrupt, ExternalShutdownException):
        _arm_stop_deadline()  # a SIGTERM's stop: rclpy's handler, not ours, saw it
    finally:
        if node is not None:
            destroy_within(node)
        rclpy.try_shutdown()
    exit_now(0)  # reached on a stop only: an error propagates from the finally above
