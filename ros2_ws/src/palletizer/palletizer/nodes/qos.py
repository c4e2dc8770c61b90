"""QoS profiles, decided once: sensors are best effort, latched state and events are reliable."""

from __future__ import annotations

from rclpy.qos import (
    DurabilityPolicy,
    HistoryPolicy,
    QoSProfile,
    ReliabilityPolicy,
    qos_profile_sensor_data,
)

__all__ = ['COMMANDS', 'EVENTS', 'LATCHED', 'MARKERS', 'SENSORS']

SENSORS = qos_profile_sensor_data
# Robot description, static TF, the latest height map: late joiners get the last value.
LATCHED = QoSProfile(
    depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
)
COMMANDS = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
# Episode events are never lossy: keep all, reliable, and latched for a late telemetry node.
EVENTS = QoSProfile(
    history=HistoryPolicy.KEEP_ALL,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.TRANSIENT_LOCAL,
)
# Markers for RViz and Foxglove: latched, and deep enough that a reader keeps up with the bursts
# of a fast-forward episode (a pick and its place can be published within milliseconds).
MARKERS = QoSProfile(
    depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
)
