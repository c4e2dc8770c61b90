"""The Jazzy-safe way to run one node: init, spin, stop quietly on Ctrl-C, always clean up."""

from __future__ import annotations

from collections.abc import Callable

import rclpy
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
from rclpy.node import Node

__all__ = ['run_node']


def run_node(make: Callable[[], Node], args=None, threads: int | None = None) -> None:
    """rclpy.init, build the node, spin (multi-threaded when `threads` is given), then
    destroy_node and try_shutdown whatever happened. `with rclpy.init()` is rolling-only."""
    rclpy.init(args=args)
    node = None
    try:
        node = make()
        if threads is None:
            rclpy.spin(node)
        else:
            executor = MultiThreadedExecutor(num_threads=threads)
            executor.add_node(node)
            executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()
