"""The bin, its support rule on hand-made cases, utilisation and how an episode ends."""

from __future__ import annotations

import numpy as np
import pytest
from palletizer.core.bpp import Container, Pose, run_episode, stable
from palletizer.core.bpp.container import Rejection
from palletizer.core.bpp.episode import Outcome
from palletizer.core.errors import InvalidValue


def _heights(cells: dict[tuple[int, int], int]) -> np.ndarray:
    h = np.zeros((10, 10), dtype=np.int64)
    for (x, y), v in cells.items():
        h[x, y] = v
    return h


def test_on_the_floor_is_always_stable():
    assert stable(np.zeros((10, 10), dtype=np.int64), 0, 0, 5, 5, 0)


def test_more_than_half_supported_is_stable_even_off_centre():
    # 3 x 3 footprint, its first two rows (6 of 9 cells) at height 2: 67 % > 50 %.
    h = _heights({(x, y): 2 for x in range(2) for y in range(3)})
    assert stable(h, 0, 0, 3, 3, 2)


def test_exactly_half_supported_on_one_side_is_unstable():
    # 2 x 2 footprint, one row of 2 supported: 50 % is not more than half, and the centre
    # (0.5, 0.5) is off the supported segment (0, 0)-(0, 1).
    h = _heights({(0, 0): 3, (0, 1): 3})
    assert not stable(h, 0, 0, 2, 2, 3)


def test_centre_inside_the_hull_of_a_few_supports_is_stable():
    # 5 x 5 footprint resting on its four corner cells only (4 of 25): the centre (2, 2) lies
    # inside their hull.
    h = _heights({(0, 0): 1, (4, 0): 1, (0, 4): 1, (4, 4): 1})
    assert stable(h, 0, 0, 5, 5, 1)


def test_centre_outside_the_hull_of_a_few_supports_is_unstable():
    # The same footprint on three cells of one corner region: (0,0), (1,0), (0,1).
    h = _heights({(0, 0): 1, (1, 0): 1, (0, 1): 1})
    assert not stable(h, 0, 0, 5, 5, 1)


def test_centre_on_a_segment_of_two_supports_is_stable():
    # 3 x 1 footprint on its two end cells: the centre (1, 0) lies on the segment.
    h = _heights({(0, 0): 2, (2, 0): 2})
    assert stable(h, 0, 0, 3, 1, 2)


def test_a_lower_cell_does_not_support():
    # Supports are the cells at the base height only: two corners at 2, the rest at 1.
    h = _heights({(x, y): 1 for x in range(4) for y in range(4)})
    h[0, 0] = h[3, 0] = 2
    assert not stable(h, 0, 0, 4, 4, 2)
    h[0, 3] = h[3, 3] = 2
    assert stable(h, 0, 0, 4, 4, 2)


def test_check_refuses_out_of_bin_too_tall_and_unstable():
    box = Container()
    assert box.check((5, 5, 5), Pose(6, 0, 0)).reason == Rejection.out_of_bin
    assert box.check((5, 3, 5), Pose(6, 0, 1)).ok  # turned: 3 along x fits
    box.place((5, 5, 5), Pose(0, 0, 0))
    box.place((5, 5, 5), Pose(0, 0, 0))
    assert box.check((1, 1, 1), Pose(0, 0, 0)).reason == Rejection.too_tall
    box2 = Container()
    box2.place((2, 2, 3), Pose(0, 0, 0))
    assert box2.check((4, 4, 1), Pose(0, 0, 0)).reason == Rejection.unstable
    assert box2.check((3, 3, 1), Pose(0, 0, 0)).ok


def test_place_raises_the_heights_and_counts_the_volume():
    box = Container()
    z = box.place((3, 2, 4), Pose(1, 1, 1))
    assert z == 0
    assert box.heights[1:3, 1:4].min() == 4 and box.heights.sum() == 4 * 6
    assert box.utilisation == pytest.approx(24 / 1000)
    with pytest.raises(InvalidValue, match='refused'):
        box.place((5, 5, 5), Pose(8, 8, 0))


class _Greedy:
    """Places at the first allowed pose."""

    name = 'greedy'

    def reset(self) -> None:
        pass

    def choose(self, container, item):
        allowed = container.feasible(item)
        return allowed[0][0] if allowed else None


def test_the_episode_ends_at_the_first_item_that_cannot_be_placed():
    # Four 5 x 5 x 5 fill the floor, four more fill the bin; the ninth ends it though a 1 x 1 x 1
    # would not fit either, and the items after it are never tried.
    items = [(5, 5, 5)] * 9 + [(1, 1, 1)]
    ep = run_episode(_Greedy(), items)
    assert ep.outcome == Outcome.no_place
    assert ep.placed == 8
    assert ep.utilisation == pytest.approx(1.0)
    assert len(ep.decision_ms) == 9


def test_an_episode_that_places_every_item_is_exhausted():
    ep = run_episode(_Greedy(), [(1, 1, 1)] * 3)
    assert (ep.outcome, ep.placed) == (Outcome.exhausted, 3)
    assert ep.utilisation == pytest.approx(3 / 1000)


class _Liar(_Greedy):
    def choose(self, container, item):
        return Pose(9, 9, 0)


def test_a_refused_pose_ends_the_episode():
    ep = run_episode(_Liar(), [(2, 2, 2), (1, 1, 1)])
    assert (ep.outcome, ep.placed, ep.utilisation) == (Outcome.refused, 0, 0.0)
