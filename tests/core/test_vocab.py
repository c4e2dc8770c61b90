"""The closed vocabularies and their one parse function."""

from __future__ import annotations

import pytest
from palletizer.core.contracts import FailureCause
from palletizer.core.errors import ConfigError, GraphError, PalletizerError
from palletizer.core.vocab import (
    Closed,
    GaugeMode,
    MotionMode,
    PerceptionMode,
    PlannerKind,
    SourceKind,
)


@pytest.mark.parametrize(
    'kind', [PlannerKind, SourceKind, FailureCause, PerceptionMode, GaugeMode, MotionMode]
)
def test_every_member_parses_from_its_name_and_passes_through(kind: type[Closed]):
    assert kind.names() == tuple(m.value for m in kind)
    for member in kind:
        assert kind.parse(member.value) is member
        assert kind.parse(member) is member


def test_a_miss_names_the_value_the_allowed_ones_and_the_closest():
    with pytest.raises(ConfigError) as err:
        SourceKind.parse('belt')
    assert str(err.value) == "source = 'belt'; expected one of table, conveyor, truck"
    with pytest.raises(ConfigError, match=r"^planner = 'grd'; .*\(did you mean 'grid'\?\)$"):
        PlannerKind.parse('grd')
    # failure causes keep the project's root error, and a caller may say what the value was
    with pytest.raises(PalletizerError, match=r"^fail payload\.cause = 'slip'; expected one of"):
        FailureCause.parse('slip', 'fail payload.cause')


def test_the_error_type_can_be_chosen_by_the_caller():
    with pytest.raises(GraphError, match="^launch argument planner = 'x'; expected one of"):
        PlannerKind.parse('x', 'launch argument planner', error=GraphError)
    with pytest.raises(ConfigError):
        PlannerKind.parse(None)


def test_each_motion_mode_has_its_speed_and_back():
    assert [m.speed for m in MotionMode] == [None, 0.0, 1.0]
    assert MotionMode.physical() == {'fast_forward': 0.0, 'interpolated': 1.0}
    for m in MotionMode:
        assert MotionMode.of_speed(m.speed) is m
    with pytest.raises(ConfigError, match=r'^speed 0\.5; expected one of None, 0\.0, 1\.0$'):
        MotionMode.of_speed(0.5)


def test_only_the_grid_plans_without_the_reach_table():
    assert [k for k in PlannerKind if not k.uses_reach_table] == [PlannerKind.grid]
