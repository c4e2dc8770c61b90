"""QoS profiles, decided once: sensors are best effort, latched state and events are reliable."""

from __future__ import annotations

from rclpy.qos import (
    DurabilityPolicy,
    HistoryPolicy,
    QoSProfile,
    ReliabilityPolicy,
    qos_profile_sensor_data,
)

__all__ = ['COMMANDS', 'EVENTS', 'LATCHED', 'MARKERS', 'SENSORS', 'STATIC_TF']

SENSORS = qos_profile_sensor_data
# Robot description, static TF, the latest height map: late joiners get the last value.
LATCHED = QoSProfile(
    depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
)
# Reading /tf_static: it has several latched writers (the cell bridge's cameras, the state
# publisher's fixed joints), each with its last message. A reader kept to depth 1 holds one
# message whatever its writer, so one that arrives while another waits is lost; tf2's static
# listener reads at depth 100 for this reason.
STATIC_TF = QoSProfile(
    depth=100, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
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
