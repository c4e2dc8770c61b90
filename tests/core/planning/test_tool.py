"""The tool body over a slot (core.planning.tool): what the planners keep clear beyond the
carton at release."""

from __future__ import annotations

import numpy as np
import pytest
from palletizer.core.contracts import HeightMap, PackageSpec, PalletGeometry
from palletizer.core.planning import BeamParams, HeuristicParams
from palletizer.core.planning.beam import expand
from palletizer.core.planning.heuristic import score_candidates
from palletizer.core.planning.tool import GripperGeometry, tool_half_extents
from palletizer.core.stability import StackBox

# Level 32 seed 3's last carton: a 240 x 180 mm lid takes a 3 x 3 cup block, off the lid
# centre by one column pitch / 2 along the length and one row pitch / 2 across.
BOOK = PackageSpec('book_s-04', 'book_s', (0.24, 0.18, 0.10), 1.2)
VGP20 = GripperGeometry()


def test_the_body_reaches_past_a_small_lid_by_the_block_offset():
    hx, hy = tool_half_extents(0.24, 0.18, 0, VGP20)
    assert hx == pytest.approx(0.132 + 0.0747 / 2)
    assert hy == pytest.approx(0.092 + 0.048 / 2)
    assert tool_half_extents(0.24, 0.18, 1, VGP20) == (hy, hx)
    # A lid the 16 cups fit on: the body is centred on it.
    assert tool_half_extents(0.42, 0.30, 0, VGP20) == pytest.approx((0.132, 0.092))


def _deck_edge(cells: np.ndarray, tool: GripperGeometry | None) -> float:
    """The largest x [m] of a valid deck-level slot's rim for BOOK, length along X."""
    params = HeuristicParams(yaws=(0.0,), support_tol=0.006)
    c = score_candidates(BOOK, HeightMap(cells), params, tool=tool)
    on_deck = c.z_base == 0.0
    assert on_deck.any()
    return float(c.x[on_deck].max() + BOOK.dims_m[0] / 2)


def test_the_heuristic_keeps_the_body_off_a_taller_neighbour():
    cells = np.zeros((80, 120))
    cells[:, 60:] = 0.30  # a stack 0.30 m high from x 0.60 m of the map
    # The clearance ring alone keeps 40 mm; the body reaches 49.4 mm past the rim: 5 cells.
    assert _deck_edge(cells, None) == pytest.approx(0.56)
    assert _deck_edge(cells, VGP20) == pytest.approx(0.55)


def test_the_heuristic_lets_the_body_pass_over_a_neighbour_level_with_the_new_lid():
    cells = np.zeros((80, 120))
    cells[:, 60:] = 0.105  # 5 mm above the new lid: within support_tol (the map's error)
    assert _deck_edge(cells, VGP20) == _deck_edge(cells, None) == pytest.approx(0.56)


def test_beam_search_keeps_the_body_off_a_taller_neighbour():
    tall = StackBox(0.0, 0.0, 0.0, 0.40, 0.30, 0.30, 5.0, (0.0, 0.0, 0.15))

    def gaps(tool: GripperGeometry | None) -> tuple[set[float], dict[str, int]]:
        rej: dict[str, int] = {}
        params = BeamParams(candidates_per_node=10_000)
        moves = expand([tall], BOOK, params, PalletGeometry(), None, rej, tool=tool)
        beside = {
            round(m.box.x - m.box.ex / 2 - 0.20, 3)
            for m in moves
            if m.yaw == 0.0 and m.box.z == 0.0 and m.box.x > 0.2 and abs(m.box.y) < 0.15
        }
        return beside, rej  # length along X: the body reaches 49 mm past the rim

    without, rej0 = gaps(None)
    with_tool, rej1 = gaps(VGP20)
    assert 0.04 in without and 'tool' not in rej0
    assert 0.04 not in with_tool and rej1['tool'] > 0


def test_tcp_shifts_put_the_tcp_on_the_cup_block_either_way_round():
    from palletizer.core.motion.grasp import GripperGeometry, plan_grasp
    from palletizer.core.planning.tool import tcp_shifts

    g = GripperGeometry()
    ox, oy = plan_grasp(0.24, 0.18, None, g).offset
    yaw = np.array([0.0, np.pi / 2])
    (ax, ay), (bx, by) = tcp_shifts(0.24, 0.18, yaw, g)
    np.testing.assert_allclose([ax[0], ay[0]], [-ox, -oy])  # tool at yaw: centre - offset
    np.testing.assert_allclose([ax[1], ay[1]], [oy, -ox], atol=1e-12)  # turned a quarter
    np.testing.assert_allclose([bx, by], [-ax, -ay])  # the tool a half turn round
    # A centred block, or no gripper: the centre alone.
    ((cx, cy),) = tcp_shifts(0.40, 0.30, yaw, g)
    assert not cx.any() and not cy.any()
    assert len(tcp_shifts(0.24, 0.18, yaw, None)) == 1


def test_beam_search_filters_weak_support_with_or_without_the_tool():
    # A carton the body does not reach past (its lid is wider than the cup block either way
    # round) on a stack of one box: the same moves with and without the tool, and the windows
    # overhanging the box's lid rejected for support before the whole-stack check in both.
    low = StackBox(0.0, 0.0, 0.0, 0.40, 0.30, 0.20, 5.0, (0.0, 0.0, 0.10))
    spec = PackageSpec('m', 'std_m', (0.42, 0.30, 0.18), 4.2)
    params = BeamParams(candidates_per_node=10_000)
    rej0: dict[str, int] = {}
    rej1: dict[str, int] = {}
    without = expand([low], spec, params, PalletGeometry(), None, rej0)
    with_tool = expand([low], spec, params, PalletGeometry(), None, rej1, tool=VGP20)
    assert rej0.get('min_support', 0) > 0 and rej1.get('tool', 0) == 0
    assert rej0 == {k: v for k, v in rej1.items() if k != 'tool'}
    assert [(m.box, m.yaw) for m in without] == [(m.box, m.yaw) for m in with_tool]
