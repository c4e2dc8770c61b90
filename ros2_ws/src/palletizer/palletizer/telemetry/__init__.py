"""Telemetry on disk: run directories of JSONL and PNG files, and rosbag2 MCAP bags."""

from palletizer.telemetry.bag import BAG_VERSION, TOPICS, BagWriter, find_msg_dir, load_typestore
from palletizer.telemetry.png import decode_png, encode_png
from palletizer.telemetry.run import (
    FILES,
    STAMP_FORMAT,
    RunInfo,
    RunWriter,
    check_event_count,
    run_stamp,
)
from palletizer.telemetry.units import REQUIRED_PAYLOAD_KEYS, json_safe, payload_to_display
from palletizer.telemetry.vocab import (
    EventKind,
    SnapshotView,
    TelemetryError,
    TelemetryMode,
    parse_failure,
)

__all__ = [
    'BAG_VERSION',
    'FILES',
    'REQUIRED_PAYLOAD_KEYS',
    'STAMP_FORMAT',
    'TOPICS',
    'BagWriter',
    'EventKind',
    'RunInfo',
    'RunWriter',
    'SnapshotView',
    'TelemetryError',
    'TelemetryMode',
    'check_event_count',
    'decode_png',
    'encode_png',
    'find_msg_dir',
    'json_safe',
    'load_typestore',
    'parse_failure',
    'payload_to_display',
    'run_stamp',
]
