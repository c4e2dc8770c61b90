"""Closed telemetry vocabularies (docs/telemetry.md §8.2) and the telemetry error types.

The vocabularies live in core.vocab (the config schema reads them too); this module is the
telemetry layer's name for them. A failure cause is parsed as any closed value:
`FailureCause.parse(value, what, error=TelemetryError)`.
"""

from __future__ import annotations

from palletizer.core.errors import TelemetryError
from palletizer.core.vocab import EventKind, SnapshotView, TelemetryMode

__all__ = [
    'EventKind',
    'SnapshotView',
    'TelemetryError',
    'TelemetryMode',
    'TelemetryWriteError',
]


class TelemetryWriteError(TelemetryError):
    """The disk refused a write (full, read-only, I/O error); the message names the path."""
