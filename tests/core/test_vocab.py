"""The closed vocabularies and their one parse function."""

from __future__ import annotations

import pytest
from palletizer.core.contracts import FailureCause
from palletizer.core.errors import ConfigError, GraphError, PalletizerError
from palletizer.core.vocab import Closed, PlannerKind, SourceKind


@pytest.mark.parametrize('kind', [PlannerKind, SourceKind, FailureCause])
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
