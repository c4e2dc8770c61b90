"""The wrist gauge's oracle mode: the carton in hand as the cell's ground truth gives it.

Only in that mode (it marks the run oracle): a real cell has no ground truth
(docs/real-cell.md).
"""

from __future__ import annotations

import threading

from palletizer_msgs.srv import GroundTruth
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.node import Node

from palletizer.core.contracts import Observation, PackageSpec
from palletizer.core.errors import UnknownKey
from palletizer.core.gauge import OracleGauge

__all__ = ['GroundTruthGauge']


class GroundTruthGauge:
    """A client of the cell's ground truth service on `node`, answering as the oracle gauge."""

    def __init__(self, node: Node, service: str) -> None:
        # The call waits inside a service callback of the node: its answer arrives on another
        # thread of the multi-threaded executor, in its own group.
        self.client = node.create_client(
            GroundTruth, service, callback_group=MutuallyExclusiveCallbackGroup()
        )

    def spec(self, observation: Observation) -> PackageSpec | str:
        """The observed carton's catalogue truth, or an error text."""
        if not self.client.wait_for_service(timeout_sec=10.0):
            return 'no ground truth service'
        done = threading.Event()
        fut = self.client.call_async(GroundTruth.Request())
        fut.add_done_callback(lambda _f: done.set())
        done.wait(timeout=30.0)
        if not fut.done() or fut.result() is None:
            return 'no ground truth answer'
        gauge = OracleGauge(
            PackageSpec(
                c.package_id, c.type_name, tuple(c.dims_m), c.mass_kg, tuple(c.cog_offset_m)
            )
            for c in fut.result().cartons
        )
        try:
            return gauge.weigh(observation)
        except UnknownKey as exc:
            return str(exc)
