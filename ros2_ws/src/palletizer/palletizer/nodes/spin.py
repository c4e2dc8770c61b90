"""The Jazzy-safe way to run one node: init, spin, stop quietly on Ctrl-C, always clean up."""

from __future__ import annotations

from collections.abc import Callable

import rclpy
from rclpy.executors import (
    Executor,
    ExternalShutdownException,
    MultiThreadedExecutor,
    SingleThreadedExecutor,
)
from rclpy.node import Node

__all__ = ['run_node', 'spin_until_shutdown']


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
        if poll_s is None:
            executor.spin()
        else:
            while executor.context.ok():
                executor.spin_once(timeout_sec=poll_s)
    except RuntimeError as exc:
        if executor.context.ok():
            raise
        raise ExternalShutdownException(f'context shut down while spinning ({exc})') from exc


def run_node(make: Callable[[], Node], args=None, threads: int | None = None) -> None:
    """rclpy.init, build the node, spin (multi-threaded when `threads` is given), then
    destroy_node and try_shutdown whatever happened. `with rclpy.init()` is rolling-only."""
    rclpy.init(args=args)
    node = None
    try:
        node = make()
        executor = SingleThreadedExecutor() if threads is None else MultiThreadedExecutor(threads)
        executor.add_node(node)
        spin_until_shutdown(executor)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()
