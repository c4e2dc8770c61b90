"""Injected faults of the hardware profile: their notation, and the goal each falls on."""

from __future__ import annotations

import pytest
from palletizer.bridge.faults import Fault, FaultPlan, parse_faults
from palletizer.core.errors import PalletizerError


def test_faults_parse_from_kind_goal_and_share_with_a_half_by_default():
    got = parse_faults(['protective_stop@3:0.25', ' program_stop@6', '', 'vacuum_loss@2:1'])
    assert got == [
        Fault('protective_stop', 3, 0.25),
        Fault('program_stop', 6, 0.5),
        Fault('vacuum_loss', 2, 1.0),
    ]


@pytest.mark.parametrize(
    ('spec', 'says'),
    [
        ('estop@3', 'kind one of protective_stop, program_stop, vacuum_loss'),
        ('protective_stop', 'expected kind@goal[:share]'),
        ('program_stop@x', 'expected kind@goal[:share]'),
        ('program_stop@0', 'a goal number from 1'),
        ('vacuum_loss@2:1.5', 'a share from 0 to 1'),
    ],
)
def test_a_bad_fault_is_named_with_what_is_allowed(spec, says):
    with pytest.raises(PalletizerError, match='fault') as err:
        parse_faults([spec])
    assert spec in str(err.value) and says in str(err.value)


def test_each_fault_falls_once_on_its_goal_when_its_share_is_reached():
    plan = FaultPlan(parse_faults(['protective_stop@2:0.5', 'vacuum_loss@2:0.3']))
    plan.begin_goal(holding=True)  # goal 1, held goal 1
    assert plan.due(1.0) is None
    plan.begin_goal(holding=False)  # goal 2: the stop; no carton held
    assert plan.due(0.4) is None
    assert plan.due(0.5) == Fault('protective_stop', 2, 0.5)
    assert plan.due(0.9) is None  # once
    plan.begin_goal(holding=True)  # goal 3, held goal 2: the vacuum loss
    assert plan.due(0.3) == Fault('vacuum_loss', 2, 0.3)
    plan.begin_goal(holding=True)
    assert plan.due(1.0) is None and plan.faults == []


def test_a_fault_whose_goal_ended_before_its_share_does_not_fall_on_a_later_goal():
    plan = FaultPlan(parse_faults(['program_stop@1:0.9']))
    plan.begin_goal(holding=False)
    assert plan.due(0.5) is None  # the goal ended (a short one) before 90 %
    plan.begin_goal(holding=False)
    assert plan.due(1.0) is None
