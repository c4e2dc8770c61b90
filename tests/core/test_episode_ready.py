"""The empty arm's ready move runs inside the settle: the referee still measures settle_s later."""

from __future__ import annotations

from palletizer.core.ports import MotionOutcome

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
