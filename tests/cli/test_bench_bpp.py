"""`scripts/bench bpp`: a small run writes its result, compares planners and the published
figures, and ends on one JSON line."""

from __future__ import annotations

import json

import pytest
from palletizer.cli import bench
from palletizer.cli.bench_bpp import PLANNERS, PUBLISHED, bench_bpp
from palletizer.core.bpp import sequences as seqs
from palletizer.core.errors import InvalidValue


def test_a_small_bench_bpp_run_ends_on_one_json_line(tmp_path, capsys, monkeypatch):
    table = seqs.write(seqs.freeze(range(1, 3)), tmp_path / 'seq.json')
    out = tmp_path / 'bpp.json'
    code = bench.main(
        [
            'bpp', '--sequences', '2', '--table', str(table), '--out', str(out),
            '--planners', 'heuristic', 'dbl', 'first_fit',
        ]
    )  # fmt: skip
    assert code == 0
    captured = capsys.readouterr()
    last = json.loads(captured.out.strip().splitlines()[-1])
    assert last['benchmark'] == 'bpp' and last['sequences'] == 2
    assert set(last['planners']) == {'heuristic', 'dbl', 'first_fit'}
    for row in last['planners'].values():
        assert 0.0 < row['utilisation_mean'] <= 1.0
        assert row['items_mean'] >= 1
        assert 0.0 <= row['decision_ms_median'] <= row['decision_ms_p95']
        assert sum(row['outcomes'].values()) == 2
    assert last['published'].keys() == PUBLISHED.keys()
    assert last['target']['planner'] == 'heuristic'
    assert json.loads(out.read_text())['planners'] == last['planners']
    assert '[bpp] heuristic:' in captured.err


def test_a_table_too_short_says_how_to_freeze_more(tmp_path):
    table = seqs.write(seqs.freeze(range(1, 3), length=5), tmp_path / 'seq.json')
    with pytest.raises(InvalidValue, match='--freeze --seeds 1-5'):
        bench_bpp(sequences=5, planners=['dbl'], table=str(table), out=None)


def test_every_planner_name_is_known():
    assert {'heuristic', 'beam', 'first_fit', 'dbl', 'heightmap_min'} <= set(PLANNERS)
    with pytest.raises(InvalidValue, match="planner 'pct'"):
        bench_bpp(sequences=1, planners=['pct'], out=None)
