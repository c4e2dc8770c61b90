"""The empty arm's ready move runs inside the settle: the referee still measures settle_s later;
with detect_early it goes over the next carton, seen before it leaves the pallet."""

from __future__ import annotations

import dataclasses

import pytest
from palletizer.core.episode import EpisodeSettings
from palletizer.core.ports import MotionOutcome
from palletizer.core.vocab import CyclePhase

from tests.core.test_episode import World, _run


class ReadyWorld(World):
    """The ideal world whose executor has a ready move taking `ready_s` of simulated time."""

    def __init__(self, ready_s, *a, **kw):
        super().__init__(*a, **kw)
        self.ready_s = ready_s
        self.log: list[tuple[str, float]] = []

    def place(self, *a, **kw):
        out = super().place(*a, **kw)
        self.log.append(('placed', self.t))
        return out

    def ready(self):
        self.t += self.ready_s
        self.log.append(('ready', self.t))
        return MotionOutcome(True)

    def settle(self, seconds):
        self.log.append(('settle', seconds))
        super().settle(seconds)


def _settles(w):
    return [s for k, s in w.log if k == 'settle']


def test_a_short_ready_move_is_topped_up_to_the_settle_time():
    w = ReadyWorld(0.5)
    assert _run(w).success
    kinds = [k for k, _ in w.log]
    assert kinds == ['placed', 'ready', 'settle'] * 4
    assert _settles(w) == [0.75] * 4  # 1.25 s in all after each place


def test_a_ready_move_longer_than_the_settle_leaves_nothing_to_wait():
    w = ReadyWorld(2.0)
    assert _run(w).success
    assert _settles(w) == []
    placed = [t for k, t in w.log if k == 'placed']
    ready = [t for k, t in w.log if k == 'ready']
    assert all(r - p == 2.0 for p, r in zip(placed, ready, strict=True))


def test_without_a_ready_move_the_cell_settles_the_whole_time():
    w = World()
    seen = []
    original = w.settle
    w.settle = lambda s: (seen.append(s), original(s))
    assert _run(w).success
    assert seen == [1.25] * 4


class EarlyWorld(ReadyWorld):
    """A ready world whose ready move may go over a carton already seen, whose places report
    their retract's start, and whose gauge zeroes with the move's start; `blind`: the
    detections (in call order, from 0) that see nothing."""

    def __init__(self, *a, blind=(), **kw):
        super().__init__(1.5, *a, **kw)
        self.blind, self.detections = set(blind), 0
        self.zeros: list[float | None] = []

    def present(self):
        shown = super().present()
        self.log.append(('present', shown.package_id))
        return shown

    def detect(self, package_id):
        self.detections += 1
        seen = None if self.detections - 1 in self.blind else super().detect(package_id)
        self.log.append(('detect', package_id if seen is not None else None))
        return seen

    def place(self, *a, **kw):
        t0 = self.t
        out = super().place(*a, **kw)
        self.t += 1.0  # the retract
        return dataclasses.replace(out, phases=((CyclePhase.retract, t0),))

    def ready(self, above=None):
        self.log.append(('over', None if above is None else above.package_id))
        return super().ready()

    def zero(self, moved_since=None):
        self.zeros.append(moved_since)


def _early(w):
    return _run(w, settings=dataclasses.replace(EpisodeSettings(), detect_early=True))


def test_looking_early_sees_the_next_carton_before_the_ready_move_and_waits_over_it():
    w = EarlyWorld()
    r = _early(w)
    assert r.success and r.n_placed == 4
    steps = [(k, v) for k, v in w.log if k in ('present', 'detect', 'over')]
    ids = [f'std_m-{i:02d}' for i in range(4)]
    # The first carton is looked for as always; each place is followed by the next carton's
    # presentation and detection, then the ready move over it; nothing comes after the last.
    expected = [('present', ids[0]), ('detect', ids[0])]
    for nxt in ids[1:]:
        expected += [('present', nxt), ('detect', nxt), ('over', nxt)]
    expected += [('present', None), ('over', None)]
    assert steps == expected
    kinds = [k for _, k, _, _ in w.events]
    assert kinds == ['perceive', 'pick', 'plan', 'place', 'settle'] * 4
    assert [p['tries'] for _, k, _, p in w.events if k == 'perceive'] == [1] * 4


def test_the_gauge_zeroes_on_the_readings_since_the_retract_began():
    w = EarlyWorld()
    assert _early(w).success
    placed = [t for k, t in w.log if k == 'placed']
    # place() returns 1 s of retract after the carton is down; the zero takes it from 50 ms
    # after the retract began.
    assert w.zeros == pytest.approx([t + 0.05 for t in placed])


def test_a_carton_not_seen_early_is_looked_for_again_from_the_ready_pose():
    w = EarlyWorld(blind={1})  # the second detection, the first early one, sees nothing
    r = _early(w)
    assert r.success and r.n_placed == 4
    steps = [(k, v) for k, v in w.log if k in ('present', 'detect', 'over')]
    assert steps[2:6] == [
        ('present', 'std_m-01'),
        ('detect', None),
        ('over', None),
        ('detect', 'std_m-01'),
    ]
    assert [k for k, _ in w.log].count('present') == 5  # each carton once, and the end
