"""Closed vocabularies reject unknown values with the allowed list and a close match."""

from __future__ import annotations

import pytest
from palletizer.core.contracts import FailureCause
from palletizer.core.errors import PalletizerError
from palletizer.telemetry import (
    EventKind,
    SnapshotView,
    TelemetryError,
    TelemetryMode,
)


def parse_failure(value: object, what: str = 'failure') -> FailureCause:
    return FailureCause.parse(value, what, error=TelemetryError)


def test_event_kinds_are_exactly_the_platform_check_values():
    assert [k.value for k in EventKind] == ['perceive', 'plan', 'pick', 'place', 'settle', 'fail']
    assert EventKind.parse('settle', 'kind') is EventKind.settle


def test_unknown_event_kind_names_the_allowed_kinds_and_a_close_match():
    with pytest.raises(
        TelemetryError,
        match=r"kind = 'placed'; expected one of perceive, plan, "
        r"pick, place, settle, fail \(did you mean 'place'\?\)",
    ):
        EventKind.parse('placed', 'kind')


def test_snapshot_view_front_is_rejected_as_the_platform_check_would():
    with pytest.raises(
        TelemetryError, match=r"view = 'front'; expected one of top, side, iso, camera"
    ):
        SnapshotView.parse('front', 'view')
    assert SnapshotView.parse('iso', 'view') is SnapshotView.iso


def test_failure_vocabulary_is_failure_cause_and_errors_are_palletizer_errors():
    assert parse_failure('grasp_slip') is FailureCause.grasp_slip
    with pytest.raises(PalletizerError, match=r"cause = 'slip'; expected one of no_detection"):
        parse_failure('slip', 'cause')
    # the historic Platform value is not something this sim may write
    with pytest.raises(TelemetryError, match='place_inaccurate'):
        parse_failure('place_inaccurate')


def test_telemetry_mode_parses_disk_postgres_supabase_off_only():
    assert TelemetryMode.parse('off', 'mode') is TelemetryMode.off
    assert [m.value for m in TelemetryMode] == ['disk', 'postgres', 'supabase', 'off']
    with pytest.raises(TelemetryError, match=r"mode = 'remote'; expected one of disk, postgres"):
        TelemetryMode.parse('remote', 'mode')
    with pytest.raises(TelemetryError, match=r"mode = 'disc'.*did you mean 'disk'"):
        TelemetryMode.parse('disc', 'mode')
