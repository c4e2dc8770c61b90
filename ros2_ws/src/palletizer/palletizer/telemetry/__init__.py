"""Telemetry on disk: run directories of JSONL and PNG files, and rosbag2 MCAP bags."""

from palletizer.telemetry.bag import BAG_VERSION, TOPICS, BagWriter, find_msg_dir, load_typestore
from palletizer.telemetry.png import decode_png, encode_png
from palletizer.telemetry.recorder import (
    Begin,
    Recorder,
    RecorderConfig,
    parse_run_info,
    preflight,
)
from palletizer.telemetry.run import (
    FILES,
    STAMP_FORMAT,
    RunInfo,
    RunWriter,
    check_event_count,
    check_writable,
    run_stamp,
)
from palletizer.telemetry.units import REQUIRED_PAYLOAD_KEYS, json_safe, payload_to_display
from palletizer.telemetry.vocab import (
    EventKind,
    SnapshotView,
    TelemetryError,
    TelemetryMode,
    TelemetryWriteError,
)

__all__ = [
    'BAG_VERSION',
    'FILES',
    'REQUIRED_PAYLOAD_KEYS',
    'STAMP_FORMAT',
    'TOPICS',
    'BagWriter',
    'Begin',
    'EventKind',
    'RunInfo',
    'Recorder',
    'RecorderConfig',
    'RunWriter',
    'SnapshotView',
    'TelemetryError',
    'TelemetryMode',
    'TelemetryWriteError',
    'check_event_count',
    'check_writable',
    'decode_png',
    'encode_png',
    'find_msg_dir',
    'json_safe',
    'load_typestore',
    'parse_run_info',
    'payload_to_display',
    'preflight',
    'run_stamp',
]
