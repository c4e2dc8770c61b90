"""The director's executor, cell and referee ports read typed result codes: the park and ready
cause from MoveArm's field, an invalid pick or place aborts instead of being replanned, a
refused settle aborts, and an unknown carton names the ones there are."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from palletizer.core.contracts import (
    FailureCause,
    HeightMap,
    Observation,
    PackageSpec,
    PlacementPlan,
)
from palletizer.core.errors import PalletizerError, UnknownKey
from palletizer.core.ports import EpisodeAborted
from palletizer.nodes import director_motion
from palletizer.nodes.director_motion import RosExecutor
from palletizer.nodes.director_ports import RosCell, RosReferee
from palletizer_msgs.action import Pick, Place
from palletizer_msgs.msg import CartonTruth
from palletizer_msgs.srv import GroundTruth, MoveArm, Settle


class _Node:
    def create_client(self, *_args, **_kwargs) -> object:
        return object()


class _Calls:
    """Answers each service call and action goal with the next queued message."""

    t = SimpleNamespace(quick_s=1.0, motion=1.0, reset_s=1.0, scaled=lambda s: 1.0 + s)

    def __init__(self, *answers: object) -> None:
        self.answers = list(answers)
        self.asked: list[str] = []

    def service(self, _client, _request, what, _timeout, **_kw):
        self.asked.append(what)
        return self.answers.pop(0)

    def action(self, _client, _goal, what, _timeout, **_kw):
        self.asked.append(what)
        return self.answers.pop(0)


@pytest.fixture
def executor(monkeypatch):
    # The action clients need a live node; the port's reading of the answers does not.
    monkeypatch.setattr(director_motion, 'OrderedActionClient', lambda *_a, **_k: object())

    def make(*answers: object) -> RosExecutor:
        port = RosExecutor(_Node(), _Calls(*answers))  # type: ignore[arg-type]
        return port

    return make


def _obs() -> Observation:
    return Observation('box_1', (-0.2, -0.8, 0.7), 0.0, (0.4, 0.3, 0.2), 1.0)


def _place_args() -> tuple[PlacementPlan, PackageSpec, HeightMap]:
    plan = PlacementPlan((0.3, -0.2, 0.25), 0.0, 1, 'slot-1', 0.0, 0.0, {})
    return plan, PackageSpec('box_1', 'A', (0.4, 0.3, 0.2), 5.0), HeightMap.flat()


def test_the_park_cause_arrives_in_its_own_field(executor):
    res = MoveArm.Response(
        error_code=MoveArm.Response.COLLISION,
        error_msg='swept tool hits the stack (failing waypoint 3)',
        cause='collision',
    )
    out = executor(res).park()
    assert not out.ok and out.cause is FailureCause.collision
    assert out.reason == 'swept tool hits the stack (failing waypoint 3)'


def test_a_ready_refusal_keeps_its_cause_instead_of_a_fixed_one(executor):
    res = MoveArm.Response(
        error_code=MoveArm.Response.CONTROLLER_FAILED,
        error_msg='a pick or place is running',
        cause='timeout',
    )
    out = executor(res).ready()
    assert not out.ok and out.cause is FailureCause.timeout
    assert executor(MoveArm.Response(motion_s=1.5)).ready().ok


def test_a_malformed_pick_aborts_the_episode_and_is_not_replanned(executor):
    res = Pick.Result(
        error_code=Pick.Result.INVALID_REQUEST,
        error_msg='invalid Pick request: Observation.dims_guess = [0.4, 0.3]; expected 3 '
        'finite numbers',
    )
    port = executor(res)
    with pytest.raises(EpisodeAborted, match='refused the pick goal: invalid Pick request'):
        port.pick(_obs())
    assert port.calls.asked == ['pick']


def test_an_invalid_place_aborts_but_an_unreachable_one_keeps_the_carton_for_another_slot(
    executor,
):
    invalid = Place.Result(error_code=Place.Result.INVALID_REQUEST, error_msg='bad plan')
    with pytest.raises(EpisodeAborted, match='refused the place goal: bad plan'):
        executor(invalid).place(*_place_args())
    far = Place.Result(
        error_code=Place.Result.IK_UNREACHABLE, error_msg='no IK', cause='ik_unreachable'
    )
    out = executor(far).place(*_place_args())
    assert out.cause is FailureCause.ik_unreachable and out.holding  # replannable


def test_a_refused_settle_aborts_naming_the_duration():
    res = Settle.Response(
        error_code=Settle.Response.INVALID_REQUEST,
        error_msg='duration = -1.0 s; expected 0 to 600 s of sim time',
    )
    cell = RosCell(_Node(), _Calls(res), gauge=None)  # type: ignore[arg-type]
    with pytest.raises(EpisodeAborted, match=r'cell settle of -1 s refused: duration = -1.0 s'):
        cell.settle(-1.0)


def test_a_carton_missing_from_the_ground_truth_names_those_there_are():
    truth = GroundTruth.Response(cartons=[CartonTruth(package_id='box_2')])
    referee = RosReferee(_Node(), _Calls(truth))  # type: ignore[arg-type]
    with pytest.raises(
        UnknownKey, match=r"package_id 'box_1' is not in the ground truth; it has box_2"
    ):
        referee.poses(['box_1'])
    assert isinstance(UnknownKey('x'), (PalletizerError, KeyError)) and str(UnknownKey('x')) == 'x'


def test_the_referee_gives_each_cartons_true_cog_offset_and_names_a_missing_one():
    truth = GroundTruth.Response(
        cartons=[CartonTruth(package_id='box_2', cog_offset_m=[0.03, -0.01, 0.002])]
    )
    referee = RosReferee(_Node(), _Calls(truth, truth))  # type: ignore[arg-type]
    assert referee.cog_offsets(['box_2']) == {'box_2': pytest.approx((0.03, -0.01, 0.002))}
    with pytest.raises(UnknownKey, match=r"'box_1' is not in the ground truth; it has box_2"):
        referee.cog_offsets(['box_1'])


class _FeedbackCalls(_Calls):
    """Sends the queued feedback (phase, progress) during each goal; each goal takes 4 s."""

    def __init__(self, clock: list[float], feedback: list[tuple[str, float]], *answers) -> None:
        super().__init__(*answers)
        self.clock, self.feedback = clock, feedback

    def action(self, _client, _goal, what, _timeout, feedback=None, **_kw):
        for phase, progress in self.feedback:
            feedback(SimpleNamespace(feedback=SimpleNamespace(phase=phase, progress=progress)))
        self.clock[0] += 4.0
        return super().action(_client, _goal, what, _timeout)


def test_a_goals_feedback_phases_are_placed_in_the_sim_time_it_took(monkeypatch):
    from palletizer.core.vocab import CyclePhase as P

    monkeypatch.setattr(director_motion, 'OrderedActionClient', lambda *_a, **_k: object())
    clock = [10.0]
    fb = [('cross', 0.0), ('descend', 0.25), ('descend', 0.3), ('release', 0.5), ('retract', 0.5)]
    calls = _FeedbackCalls(clock, fb, Place.Result(error_code=Place.Result.OK))
    port = RosExecutor(_Node(), calls, clock=lambda: clock[0])  # type: ignore[arg-type]
    out = port.place(*_place_args())
    assert out.ok
    assert out.phases == (
        (P.cross, 10.0),
        (P.place, 11.0),
        (P.release, 12.0),
        (P.retract, 12.0),
    )
