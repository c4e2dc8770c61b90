"""The oracle flag follows what was constructed, in both wirings, for every combination of
height map, detector and gauge (ARCHITECTURE: referee vs oracle)."""

from __future__ import annotations

import itertools

import pytest
from palletizer.core.gauge import OracleGauge
from palletizer.core.oracle import oracle_flag, reads_truth
from palletizer.core.planning import build_planner
from palletizer.core.vocab import GaugeMode, PerceptionMode
from palletizer.nodes.episode_director import MODE_PARAMETERS
from palletizer.wiring.gauge import WristGauge
from palletizer.wiring.inprocess import run_inprocess
from palletizer.wiring.oracles import OracleDetector, OracleHeightMap
from palletizer.wiring.perception import CameraDetector, CameraHeightMap

COMBOS = list(
    itertools.product(('cameras', 'oracle'), ('cameras', 'oracle'), ('wrench', 'oracle'))
)


class _Started(Exception):
    """Raised from on_start: the components are built, the episode need not run."""


@pytest.mark.sim
@pytest.mark.parametrize('map_mode, detector_mode, gauge', COMBOS)
def test_inprocess_flag_is_computed_from_the_components(map_mode, detector_mode, gauge):
    seen = []

    def on_start(setup):
        seen.append(setup)
        raise _Started

    with pytest.raises(_Started):
        run_inprocess(
            11,
            1,
            build_planner('heuristic'),
            map_mode=map_mode,
            detector_mode=detector_mode,
            gauge=gauge,
            on_start=on_start,
        )
    (setup,) = seen
    # RunSetup names the kind of each object built, read from the object itself.
    assert (setup.heightmap, setup.detector, setup.gauge) == (map_mode, detector_mode, gauge)
    expected = 'oracle' in (map_mode, detector_mode, gauge)
    assert setup.oracle is expected


def test_oracle_flag_counts_every_component_and_refuses_a_stand_in():
    class _Cell:
        pass

    cams = (CameraHeightMap.__new__(CameraHeightMap), CameraDetector.__new__(CameraDetector))
    wrench = WristGauge.__new__(WristGauge)
    assert oracle_flag(*cams, wrench, build_planner('grid')) is False
    for stub in (OracleHeightMap(_Cell()), OracleDetector(_Cell()), OracleGauge([])):
        assert oracle_flag(*cams, wrench, stub) is True
    # A mode name passed where a component belongs (the old bug: the gauge never counted).
    with pytest.raises(TypeError, match='no oracle flag'):
        oracle_flag(*cams, 'oracle')
    with pytest.raises(TypeError, match='no oracle flag'):
        oracle_flag(*cams, 'wrench')
    # Modes as members, and flags already decided, count for what they are.
    assert oracle_flag(PerceptionMode.cameras, GaugeMode.wrench, False) is False
    assert oracle_flag(PerceptionMode.cameras, GaugeMode.oracle) is True
    assert oracle_flag(*cams, True) is True


def graph_flag(modes, planner):
    """The director's flag from the modes its nodes report (nodes/episode_director.py)."""
    kinds = [k for _, _, k in MODE_PARAMETERS]
    return oracle_flag(*(reads_truth(k, m) for k, m in zip(kinds, modes, strict=True)), planner)


@pytest.mark.parametrize('map_mode, detector_mode, gauge', COMBOS)
def test_graph_flag_is_computed_from_the_modes_the_nodes_report(map_mode, detector_mode, gauge):
    expected = 'oracle' in (map_mode, detector_mode, gauge)
    assert graph_flag((map_mode, detector_mode, gauge), False) is expected
    assert graph_flag((map_mode, detector_mode, gauge), True) is True


def test_graph_flag_is_set_when_a_mode_could_not_be_read():
    assert graph_flag(('?', 'cameras', 'wrench'), False) is True
    assert graph_flag(('cameras', 'cameras', '?'), False) is True
    # A gauge's mode is no perception mode, and the other way round: both count as truth.
    assert reads_truth(PerceptionMode, 'wrench') and reads_truth(GaugeMode, 'cameras')


def test_the_referee_reads_true_cogs_from_the_load_and_is_no_oracle():
    from palletizer.core.errors import UnknownKey
    from palletizer.core.loads import draw_load
    from palletizer.wiring.oracles import Referee

    draws = draw_load(33, 1)
    referee = Referee(None, draws)
    got = referee.cog_offsets([draws[0].package_id, draws[-1].package_id])
    assert got[draws[-1].package_id] == pytest.approx(draws[-1].cog_offset)
    assert any(abs(v) > 1e-4 for v in got[draws[0].package_id][:2]) or any(
        abs(v) > 1e-4 for v in draws[-1].cog_offset[:2]
    )
    assert referee.oracle is False
    with pytest.raises(UnknownKey, match=r"'nope' is not in the load; expected one of"):
        referee.cog_offsets(['nope'])
