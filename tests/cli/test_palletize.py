"""The palletize command's options match the launch arguments and fail early on bad input."""

from __future__ import annotations

import pytest
from palletizer.cli.palletize import build_options, main
from palletizer.core.errors import GraphError


def test_options_map_onto_the_launch_arguments():
    o = build_options(
        [
            '--level',
            '23',
            '--seed',
            '4',
            '-n',
            '2',
            '--planner',
            'beam',
            '--speed',
            '1',
            '--no-telemetry',
        ]
    )
    assert (o.level, o.seed, o.episodes, o.planner, o.speed, o.telemetry, o.source) == (
        23,
        4,
        2,
        'beam',
        1.0,
        'off',
        'conveyor',
    )
    assert build_options(['--source', 'truck']).level == 31
    assert build_options(['level:=32', 'log_level:=warn']).log_level == 'warn'


@pytest.mark.parametrize(
    'argv, match',
    [
        (['--level', '41'], 'expected one of the levels'),
        (
            ['--source', 'truck', '--level', '11'],
            'expected one of the truck levels: 31, 32, 33, 34',
        ),
        (['-n', '-1'], 'episodes.*expected an integer >= 1'),
        (['--speed', '-2'], 'expected a number >= 0'),
    ],
)
def test_bad_arguments_fail_before_anything_starts(argv, match):
    with pytest.raises(GraphError, match=match):
        build_options(argv)


def test_main_reports_bad_arguments_with_exit_code_2(capsys):
    assert main(['--level', '99']) == 2
    assert "level:='99'" in capsys.readouterr().err
