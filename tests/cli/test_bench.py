"""scripts/bench hands options to the benchmarks that take them and refuses them elsewhere."""

from __future__ import annotations

import pytest
from palletizer.cli import bench


def test_a_benchmark_without_options_refuses_them_in_one_line(capsys):
    with pytest.raises(SystemExit) as exc:
        bench.main(['motion', '--levels', '11'])
    assert exc.value.code == 2
    assert (
        'unrecognized arguments: --levels 11 (motion takes no options)' in capsys.readouterr().err
    )


def test_help_shows_the_benchmarks_own_options_or_says_it_has_none(capsys):
    assert bench.main(['motion', '--help']) == 0
    assert 'it takes no options' in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:
        bench.main(['graph', '--help'])
    assert exc.value.code == 0
    assert '--skip-interpolated' in capsys.readouterr().out


def test_bad_options_of_a_benchmark_stop_it_before_it_runs(capsys):
    with pytest.raises(SystemExit) as exc:
        bench.main(['graph', '--seeds', '101', '102', '103'])
    assert exc.value.code == 2
    assert 'above 100 are refused' in capsys.readouterr().err
