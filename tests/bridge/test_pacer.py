"""The pacer holds simulated time to a real-time factor, whoever steps the world."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from palletizer.bridge.pacer import Pacer
from palletizer.core.errors import InvalidValue


class _Wall:
    """A wall clock that moves only when slept on, or when told."""

    def __init__(self) -> None:
        self.t = 100.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.slept.append(s)
        self.t += s


def _step(pacer: Pacer, data: SimpleNamespace, n: int, dt: float = 0.002) -> None:
    for _ in range(n):
        pacer(None, data)
        data.time += dt


def test_a_world_ahead_of_the_wall_clock_sleeps_off_its_lead_at_the_real_time_factor():
    wall = _Wall()
    pacer = Pacer(2.0, every=10, clock=wall, sleep=wall.sleep)
    data = SimpleNamespace(time=5.0)
    pacer.anchor(5.0)
    _step(pacer, data, 1000)  # 2 s of sim time
    # At 2x real time, 2 s of sim time takes 1 s of wall time, to within one check (10 steps).
    assert wall.t - 100.0 == pytest.approx(1.0, abs=0.02 / 2)
    assert pacer.slept_s == pytest.approx(sum(wall.slept))
    assert pacer.lag_resets == 0


def test_a_world_that_falls_behind_catches_up_without_sleeping_then_moves_its_anchor():
    wall = _Wall()
    pacer = Pacer(1.0, every=10, max_lag_s=0.5, clock=wall, sleep=wall.sleep)
    data = SimpleNamespace(time=0.0)
    pacer.anchor(0.0)
    wall.t += 0.3  # a render took 0.3 s: behind by less than max_lag_s
    _step(pacer, data, 100)  # 0.2 s of sim time: still behind, no sleep
    assert wall.slept == [] and pacer.lag_resets == 0
    wall.t += 2.0  # a long stall: more than max_lag_s behind
    _step(pacer, data, 10)
    assert pacer.lag_resets == 1
    _step(pacer, data, 100)  # from the new anchor the pace holds again: it sleeps
    assert sum(wall.slept) == pytest.approx(0.2, abs=0.021)


@pytest.mark.parametrize('rtf', [0.0, -1.0, float('nan'), float('inf')])
def test_a_real_time_factor_that_is_not_a_positive_number_is_refused_by_value(rtf):
    with pytest.raises(InvalidValue, match=r'real_time_factor = .*expected a finite number > 0'):
        Pacer(rtf)
