"""scripts/bench hardware: its JSON from the runs' referee lines, and its options."""

from __future__ import annotations

import pytest
from palletizer.cli.bench_graph import GraphRun
from palletizer.cli.bench_hardware import parse_options, summarise_hardware


def _line(seed, load, handed, within, errs, calls=0):
    cartons = [
        {'placed': True, 'check_err_mm': e, 'within_tolerance': i < within}
        for i, e in enumerate(errs)
    ]
    return {
        'level': 11,
        'seed': seed,
        'oracle': False,
        'load': load,
        'handed_over': handed,
        'placed': len(errs),
        'within_tolerance': within,
        'sim_only_calls': calls,
        'cartons': cartons,
    }


def test_an_episode_is_ok_only_when_the_palletizer_and_the_referee_both_say_so():
    run = GraphRun(
        level=11,
        mode='interpolated',
        seeds=(1, 2, 3),
        exit_code=1,
        wall_s=300.0,
        episodes=[
            {'seed': 1, 'success': True, 'oracle': False},
            {'seed': 2, 'success': True, 'oracle': False},  # the referee disagrees
            {'seed': 3, 'success': False, 'oracle': False},
        ],
        extra_lines=[
            _line(1, 4, 4, 4, [1.0, 2.0, 3.0, 4.0]),
            _line(2, 4, 4, 3, [1.0, 2.0, 3.0, 30.0]),
            _line(3, 4, 2, 2, [6.0, 1.0]),
        ],
        tail='a\nb',
    )
    lockstep = [{'success': True, 'n_objects': 4, 'n_placed': 4}] * 3
    out = summarise_hardware([run], lockstep, (1, 2, 3))
    assert (out['episodes'], out['episodes_ok']) == (3, 1)
    assert (out['cartons'], out['cartons_ok']) == (10, 9)
    assert out['placement_check_err_mm_p95'] == 30.0 and out['sim_only_calls'] == 0
    assert out['oracle'] is False
    assert out['lockstep'] == {'episodes': 3, 'episodes_ok': 3, 'cartons': 12, 'cartons_ok': 12}
    t = out['targets']
    assert not t['episodes_ok']['holds'] and not t['placement_check_err_mm_p95']['holds']
    assert t['sim_only_calls']['holds']
    assert out['levels']['11']['tail'] == ['a', 'b']  # a failed run shows its last lines


def test_a_sim_only_call_or_an_oracle_episode_shows_in_the_figures():
    run = GraphRun(
        level=21,
        mode='interpolated',
        seeds=(1,),
        exit_code=0,
        wall_s=100.0,
        episodes=[{'seed': 1, 'success': True, 'oracle': True}],
        extra_lines=[_line(1, 4, 4, 4, [1.0, 1.0, 1.0, 1.0], calls=3)],
    )
    out = summarise_hardware([run], [{'success': True, 'n_objects': 4, 'n_placed': 4}], (1,))
    assert out['sim_only_calls'] == 3 and not out['targets']['sim_only_calls']['holds']
    assert out['oracle'] is True


@pytest.mark.parametrize(
    'argv, match',
    [
        (['--seeds', '101'], 'seeds above are reserved'),
        (['--levels', '41'], 'not a level'),
        (['--planner', 'astar'], 'astar'),
        (['--real-time-factor', '0'], 'expected a number > 0'),
    ],
)
def test_bad_options_are_refused_by_name(argv, match, capsys):
    with pytest.raises(SystemExit) as exc:
        parse_options(argv)
    assert exc.value.code == 2 and match in capsys.readouterr().err


def test_the_defaults_are_the_reference_levels_on_seeds_1_to_10():
    got = parse_options([])
    assert got['seeds'] == tuple(range(1, 11)) and 11 in got['levels'] and 31 in got['levels']
