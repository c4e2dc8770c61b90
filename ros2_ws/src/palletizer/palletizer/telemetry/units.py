"""SI to display units for event payloads: metres become mm and radians degrees, here only."""

from __future__ import annotations

import math
from collections.abc import Mapping
from enum import Enum
from typing import Any

import numpy as np

from palletizer.core.contracts import FailureCause
from palletizer.telemetry.vocab import EventKind, TelemetryError

__all__ = [
    'MM_DECIMALS',
    'DEG_DECIMALS',
    'REQUIRED_PAYLOAD_KEYS',
    'json_safe',
    'payload_to_display',
]

MM_DECIMALS = 1  # 0.1 mm, the resolution docs/telemetry.md §8.4 gives for cog_offset_mm
DEG_DECIMALS = 2  # 0.01 deg, well below the 5.7 deg placement tolerance (docs/measurement.md §7.1)

# A missing key makes the Platform UI show nothing, silently; so it is an error
# (docs/telemetry.md §8.3-8.4).
REQUIRED_PAYLOAD_KEYS: Mapping[EventKind, tuple[str, ...]] = {
    EventKind.perceive: ('seen', 'confidence'),
    EventKind.plan: ('layer', 'slot'),
    EventKind.pick: ('mass_kg', 'type'),
    EventKind.place: ('error_xy_mm', 'error_yaw_deg', 'overhang_mm'),
    EventKind.settle: ('layer', 'drift_mm'),
    EventKind.fail: ('cause',),
}

# SI suffix -> (display suffix, factor, decimals)
_CONVERSIONS = {
    '_m': ('_mm', 1000.0, MM_DECIMALS),
    '_rad': ('_deg', 180.0 / math.pi, DEG_DECIMALS),
}


def json_safe(value: Any, where: str) -> Any:
    """A JSON-safe copy: numpy values, tuples and enums become plain values; NaN and inf fail."""
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, np.ndarray):
        return json_safe(value.tolist(), where)
    if isinstance(value, np.generic):
        return json_safe(value.item(), where)
    if isinstance(value, float) and not math.isfinite(value):
        raise TelemetryError(f'{where} = {value!r}; expected a finite number (JSON has no NaN)')
    if isinstance(value, Mapping):
        return {str(k): json_safe(v, f'{where}.{k}') for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v, f'{where}[{i}]') for i, v in enumerate(value)]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TelemetryError(f'{where} = {value!r}; expected a JSON value (number, text, list, map)')


def _scale(value: Any, factor: float, decimals: int, where: str) -> Any:
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_scale(v, factor, decimals, f'{where}[{i}]') for i, v in enumerate(value)]
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, np.number)):
        raise TelemetryError(f'{where} = {value!r}; expected a number in SI units')
    out = float(value) * factor
    if not math.isfinite(out):
        raise TelemetryError(f'{where} = {value!r}; expected a finite number')
    return round(out, decimals)


def _convert(payload: Mapping[str, Any], where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    origin: dict[str, str] = {}
    for key, value in payload.items():
        key = str(key)
        new_key, new_value = key, None
        for si, (disp, factor, decimals) in _CONVERSIONS.items():
            if key.endswith(si):
                new_key = key[: -len(si)] + disp
                new_value = _scale(value, factor, decimals, f'{where}.{key}')
                break
        else:
            if isinstance(value, Mapping):
                new_value = _convert(value, f'{where}.{key}')
            else:
                new_value = json_safe(value, f'{where}.{key}')
        if new_key in out:
            raise TelemetryError(
                f'{where}: {key!r} and {origin[new_key]!r} both give {new_key!r}; '
                'pass the value once, in SI (metres, radians)'
            )
        out[new_key] = new_value
        origin[new_key] = key
    return out


def payload_to_display(kind: EventKind | str, payload: Mapping[str, Any]) -> dict[str, Any]:
    """The event payload as the Platform stores it: mm and degrees (docs/telemetry.md §8.3-8.4).

    Keys ending in `_m` [m] become `_mm` [mm] (0.1 mm), keys ending in `_rad` [rad] become
    `_deg` [deg] (0.01 deg), at any depth and element-wise for lists; keys already in `_mm` or
    `_deg` pass unchanged, as do unitless keys. Raises TelemetryError on an unknown kind, a
    missing required key, a non-finite number, a key given twice, or an unknown fail cause.
    """
    k = EventKind.parse(kind, 'event kind')
    if not isinstance(payload, Mapping):
        raise TelemetryError(f'{k.value} payload = {payload!r}; expected a mapping')
    out = _convert(payload, f'{k.value} payload')
    missing = [key for key in REQUIRED_PAYLOAD_KEYS[k] if key not in out]
    if missing:
        key = missing[0]
        hint = ''
        for si, (disp, _, _) in _CONVERSIONS.items():
            if key.endswith(disp):
                hint = f' (pass {key[: -len(disp)] + si} in SI)'
        raise TelemetryError(
            f'{k.value} payload: missing key {key!r}{hint}; required: '
            f'{", ".join(REQUIRED_PAYLOAD_KEYS[k])}'
        )
    if k is EventKind.fail:
        out['cause'] = FailureCause.parse(
            out['cause'], 'fail payload.cause', error=TelemetryError
        ).value
    return out
