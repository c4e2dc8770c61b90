"""Per-layer photos: taken before the first carton of a new layer and at the end, arm parked."""

from __future__ import annotations

from palletizer.core.contracts import FailureCause
from palletizer.core.ports import MotionOutcome

from tests.core.test_episode import World, _run


class PhotoWorld(World):
    """The ideal world plus a park (executor) and a photo hook (sink) that log their order."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.log: list[tuple[str, int]] = []

    def park(self):
        self.log.append(('park', len(self.placements)))
        return MotionOutcome(True)

    def layer_photo(self, after_seq):
        self.log.append(('photo', after_seq))


def test_a_photo_per_finished_layer_and_a_final_one_each_after_a_park():
    w = PhotoWorld(n=10)
    result = _run(w)
    assert result.success
    layers = [p.layer for p in w.placements]
    assert max(layers) >= 2
    firsts = [i for i in range(1, len(layers)) if layers[i] > max(layers[:i])]
    expected = [w.placements[i - 1].seq for i in firsts] + [w.placements[-1].seq]
    assert [a for kind, a in w.log if kind == 'photo'] == expected
    # Every photo comes right after a park, taken while the placed count is the layer's.
    assert [k for k, _ in w.log] == ['park', 'photo'] * len(expected)
    assert [n for k, n in w.log if k == 'park'] == [*firsts, len(layers)]
    # after_seq is in the CoG trace (the pallet states).
    assert set(expected) <= {s.after_seq for s in w.states}


def test_photos_do_not_change_the_episode_and_sinks_without_the_hook_still_work():
    plain, photo = World(n=10), PhotoWorld(n=10)
    a, b = _run(plain), _run(photo)
    assert a.to_dict() == b.to_dict()
    assert plain.events == photo.events


def test_one_layer_episode_takes_only_the_final_photo():
    w = PhotoWorld(n=3)
    _run(w)
    assert {p.layer for p in w.placements} == {1}
    assert w.log == [('park', 3), ('photo', w.placements[-1].seq)]


def test_an_episode_that_fails_before_any_attempt_takes_no_photo():
    w = PhotoWorld(n=4, jam_at=0)
    _run(w)
    assert w.log == []


def test_after_a_carton_lost_in_flight_the_arm_stays_where_it_stopped():
    """A real cell stops for the operator: the final photo is taken without the park."""
    w = PhotoWorld(n=4)
    place = w.place

    def slip_third(plan, spec, hm):
        if len(w.placements) < 2:
            return place(plan, spec, hm)
        w.poses[spec.package_id] = (1.5, 0.0, 0.1, 0.0)  # dropped off the pallet
        return MotionOutcome(False, FailureCause.grasp_slip, 'vacuum lost during the move')

    w.place = slip_third
    result = _run(w)
    assert result.failure is FailureCause.grasp_slip
    assert ('park', 2) not in w.log and w.log[-1][0] == 'photo'
    assert [k for k, _ in w.log].count('park') == [k for k, _ in w.log].count('photo') - 1
    # Any other failure still ends parked (here, no slot: wrong_placement).
    w2 = PhotoWorld(n=4)
    w2.place = lambda plan, spec, hm: MotionOutcome(
        False, FailureCause.ik_unreachable, 'no IK', holding=True
    )
    assert _run(w2).failure is FailureCause.wrong_placement
    assert not w2.log or w2.log[-2][0] == 'park'
