"""Event payloads leave the telemetry boundary in mm and degrees, converted exactly once."""

from __future__ import annotations

import math

import numpy as np
import pytest
from palletizer.telemetry import TelemetryError, payload_to_display


def test_metres_become_millimetres_and_radians_degrees():
    out = payload_to_display(
        'place',
        {'error_xy_m': 0.01234, 'error_yaw_rad': math.pi / 36, 'overhang_m': np.float64(0.0)},
    )
    assert out == {'error_xy_mm': 12.3, 'error_yaw_deg': 5.0, 'overhang_mm': 0.0}
    assert isinstance(out['overhang_mm'], float)


def test_lists_and_nested_maps_convert_elementwise_and_unitless_keys_pass():
    rng = np.random.default_rng(3)
    cog = rng.uniform(-0.05, 0.05, size=3)
    out = payload_to_display(
        'pick',
        {'mass_kg': 7.25, 'type': 'B', 'cog_offset_m': cog, 'extra': {'load_drift_m': 0.002}},
    )
    np.testing.assert_allclose(out['cog_offset_mm'], cog * 1000.0, atol=0.05)
    assert out['mass_kg'] == 7.25 and out['type'] == 'B'
    assert out['extra'] == {'load_drift_mm': 2.0}
    assert 'cog_offset_m' not in out


def test_values_already_in_display_units_pass_unchanged():
    out = payload_to_display('settle', {'layer': 2, 'drift_mm': 0.7})
    assert out == {'layer': 2, 'drift_mm': 0.7}


def test_the_same_quantity_in_both_units_is_an_error():
    with pytest.raises(TelemetryError, match=r"'drift_m' and 'drift_mm' both give 'drift_mm'"):
        payload_to_display('settle', {'layer': 1, 'drift_mm': 0.7, 'drift_m': 0.0007})


def test_missing_required_key_is_an_error_with_the_si_hint():
    with pytest.raises(
        TelemetryError,
        match=r"place payload: missing key 'overhang_mm' \(pass overhang_m in SI\); required",
    ):
        payload_to_display('place', {'error_xy_m': 0.001, 'error_yaw_rad': 0.0})
    with pytest.raises(TelemetryError, match=r"perceive payload: missing key 'confidence'"):
        payload_to_display('perceive', {'seen': 0})


def test_fail_cause_must_be_a_failure_cause():
    assert payload_to_display('fail', {'cause': 'timeout', 'reject': None})['cause'] == 'timeout'
    with pytest.raises(TelemetryError, match=r"fail payload.cause = 'dropped'; expected one of"):
        payload_to_display('fail', {'cause': 'dropped'})


def test_non_finite_and_non_numeric_si_values_are_errors():
    with pytest.raises(TelemetryError, match=r'settle payload.drift_m = nan; expected a finite'):
        payload_to_display('settle', {'layer': 1, 'drift_m': float('nan')})
    with pytest.raises(TelemetryError, match=r"drift_m = 'big'; expected a number in SI"):
        payload_to_display('settle', {'layer': 1, 'drift_m': 'big'})
    with pytest.raises(TelemetryError, match=r'confidence = inf; expected a finite number'):
        payload_to_display('perceive', {'seen': 1, 'confidence': float('inf')})


def test_a_settle_with_its_carton_cycle_passes_as_it_is():
    cycle = {
        'cycle_start_s': 1.5,
        'cycle_s': 3.25,
        'phases': [['wait', 0.12], ['descend', 0.742], ['weigh', 1.5], ['retract', 0.888]],
    }
    out = payload_to_display('settle', {'layer': 1, 'drift_mm': 0.0, **cycle})
    assert out == {'layer': 1, 'drift_mm': 0.0, **cycle}
