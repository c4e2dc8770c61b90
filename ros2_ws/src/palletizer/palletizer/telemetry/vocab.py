"""Closed telemetry vocabularies (docs/telemetry.md §8.2) and the telemetry error type."""

from __future__ import annotations

from enum import Enum

from palletizer.core.contracts import FailureCause
from palletizer.core.errors import PalletizerError, close_match

__all__ = [
    'EventKind',
    'SnapshotView',
    'TelemetryError',
    'TelemetryMode',
    'TelemetryWriteError',
    'parse_failure',
]


class TelemetryError(PalletizerError):
    """A telemetry row, file or call is invalid; the message names the value and what is allowed."""


class TelemetryWriteError(TelemetryError):
    """The disk refused a write (full, read-only, I/O error); the message names the path."""


class _Closed(str, Enum):
    """A closed vocabulary whose parse() names every allowed value on a miss."""

    @classmethod
    def parse(cls, value: object, what: str):  # noqa: ANN206 - returns the subclass
        if isinstance(value, cls):
            return value
        try:
            return cls(value)
        except ValueError:
            names = [m.value for m in cls]
            raise TelemetryError(
                f'{what} = {value!r}; expected one of {", ".join(names)}'
                f'{close_match(str(value), names)}'
            ) from None


class EventKind(_Closed):
    """events.kind: the Platform's CHECK constraint accepts exactly these."""

    perceive = 'perceive'
    plan = 'plan'
    pick = 'pick'
    place = 'place'
    settle = 'settle'
    fail = 'fail'


class SnapshotView(_Closed):
    """snapshots.view (the predecessor lost photos to `front`, which the CHECK rejects)."""

    top = 'top'
    side = 'side'
    iso = 'iso'
    camera = 'camera'


class TelemetryMode(_Closed):
    """disk: files only; postgres, supabase: files plus that replica; off: write nothing."""

    disk = 'disk'
    postgres = 'postgres'
    supabase = 'supabase'
    off = 'off'


def parse_failure(value: object, what: str = 'failure') -> FailureCause:
    """The FailureCause named `value`; TelemetryError listing the causes otherwise."""
    if isinstance(value, FailureCause):
        return value
    names = [c.value for c in FailureCause]
    if value not in names:
        raise TelemetryError(
            f'{what} = {value!r}; expected one of {", ".join(names)}'
            f'{close_match(str(value), names)}'
        )
    return FailureCause(value)
