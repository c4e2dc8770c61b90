"""scripts/bench generalise: seed ranges, the reserved-seed guard, and its outputs."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from palletizer.cli.bench_generalise import bench_generalise, parse_options
from palletizer.cli.seeds import parse_seeds


def test_seed_ranges_parse_and_bad_ones_say_what_is_allowed():
    assert parse_seeds('1-5') == [1, 2, 3, 4, 5]
    assert parse_seeds('3') == [3]
    assert parse_seeds('1-3,7,9-10') == [1, 2, 3, 7, 9, 10]
    for bad in ('1-x', '5-2', '-3', ''):
        with pytest.raises(ValueError, match='expected'):
            parse_seeds(bad)


def test_reserved_seeds_are_refused_without_the_flag(capsys):
    with pytest.raises(SystemExit):
        parse_options(['--seeds', '95-105'])
    assert 'seeds above 100 are reserved for independent checks' in capsys.readouterr().err
    assert parse_options(['--seeds', '101', '--reserved'])['seeds'] == [101]
    assert parse_options([])['seeds'] == list(range(1, 51))
    with pytest.raises(SystemExit):
        parse_options(['--levels', '19'])


def test_a_quasi_static_run_writes_every_episode_and_the_summary(tmp_path):
    out = bench_generalise(
        seeds=[1, 2], planners=['heuristic'], modes=['quasi_static'], levels=[11, 16],
        workers=1, out_dir=tmp_path,
    )  # fmt: skip
    doc = json.loads((tmp_path / 'generalise.json').read_text())
    eps = doc['episodes']
    assert sorted((e['level'], e['seed']) for e in eps) == [(11, 1), (11, 2), (16, 1), (16, 2)]
    r = doc['results']['heuristic']['quasi_static']
    assert r['main']['episodes'] == 2 and r['hard']['episodes'] == 2
    assert r['levels']['16']['episodes'] == 2
    ok = {
        k: sum(e['success'] for e in eps if (e['level'] in (11,)) == (k == 'main'))
        for k in ('main', 'hard')
    }
    assert out['heuristic']['main_episodes_ok_pct'] == 50.0 * ok['main']
    assert out['heuristic']['hard_episodes_ok_pct'] == 50.0 * ok['hard']
    for e in eps:  # failures stay in the closed vocabulary
        assert e['failure'] in (None, 'wrong_placement', 'stack_collapse')
    # The buffer is the configured one, and its moves are counted per episode and group.
    from palletizer.core.config import load_config

    k = load_config().planner.buffer.slots
    assert doc['buffer_slots'] == k and all(e['buffer_slots'] == k for e in eps)
    hard = [e for e in eps if e['level'] == 16]
    assert r['hard']['buffer_moves'] == sum(e['buffer_moves'] for e in hard)
    assert r['hard']['episodes_with_buffer_moves'] == sum(1 for e in hard if e['buffer_moves'])
    log = (tmp_path / 'generalise.episodes.jsonl').read_text().splitlines()
    assert len(log) == 4
    # --resume runs nothing that is already there for this commit
    again = bench_generalise(
        seeds=[1, 2], planners=['heuristic'], modes=['quasi_static'], levels=[11, 16],
        workers=1, out_dir=tmp_path, resume=True,
    )  # fmt: skip
    assert again['episodes_run'] == 0 and again['heuristic'] == out['heuristic']


def test_buffer_size_is_an_option_checked_at_parse():
    assert parse_options(['--buffer', '0'])['buffer_slots'] == 0
    assert parse_options([])['buffer_slots'] is None  # configs/planner.yaml's
    with pytest.raises(SystemExit):
        parse_options(['--buffer', '9'])


def test_without_a_buffer_no_carton_is_set_aside(tmp_path):
    bench_generalise(
        seeds=[2], planners=['heuristic'], modes=['quasi_static'], levels=[16],
        workers=1, out_dir=tmp_path, buffer_slots=0,
    )  # fmt: skip
    doc = json.loads((tmp_path / 'generalise.json').read_text())
    (e,) = doc['episodes']
    assert doc['buffer_slots'] == 0 and e['buffer_moves'] == 0


def test_the_command_prints_progress_and_json_last(tmp_path):
    proc = subprocess.run(
        [sys.executable, '-m', 'palletizer.cli.bench', 'generalise', '--seeds', '1',
         '--planners', 'heuristic', '--modes', 'quasi_static', '--levels', '11',
         '--workers', '1', '--out-dir', str(tmp_path)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    last = json.loads(proc.stdout.strip().splitlines()[-1])
    assert last['heuristic']['main_episodes_ok_pct'] in (0.0, 100.0)
    assert '[generalise] 1/1 heuristic quasi_static L11 s1' in proc.stderr


def test_a_physics_episode_runs_with_the_buffer_size_asked_for(monkeypatch):
    # --buffer K labels every row with K; a physics episode must run with K places too, not
    # with configs/planner.yaml's default.
    import palletizer.wiring.inprocess as inprocess
    from palletizer.cli.bench_generalise import _run

    seen = []

    def fake(level, seed, planner, *, config=None, **_kw):
        seen.append(config.planner.buffer.slots)
        raise RuntimeError('stop here')

    monkeypatch.setattr(inprocess, 'run_inprocess', fake)
    for slots in (0, 3):
        row = _run(('heuristic', 1.0, 11, 1, 'oracle', slots))
        assert row['failure'] == 'crash'
    assert seen == [0, 3]


def test_a_physics_episode_runs_the_way_asked_for(monkeypatch):
    # --way labels every row; the episode itself must run with that way's gauge and levers.
    import palletizer.wiring.inprocess as inprocess
    from palletizer.cli.bench_generalise import _run

    seen = []

    def fake(level, seed, planner, *, config=None, **_kw):
        g, cell = config.perception.gauge, config.cell
        seen.append(
            (g.weigh_on_lift, g.zero_on_move, cell.motion.transit, cell.episode.detect_early)
        )
        raise RuntimeError('stop here')

    monkeypatch.setattr(inprocess, 'run_inprocess', fake)
    for way in ('track+joint+early', 'still'):
        assert _run(('heuristic', 1.0, 11, 1, 'oracle', 1, way))['failure'] == 'crash'
    assert seen == [(True, True, 'joint', True), (False, False, 'cartesian', False)]


def test_the_way_is_checked_at_parse_and_recorded_in_every_row(tmp_path, capsys):
    assert parse_options(['--way', 'track+early+joint'])['way'] == 'track+early+joint'
    assert parse_options([])['way'] is None  # the configs' way
    with pytest.raises(SystemExit):
        parse_options(['--way', 'track+fast'])
    err = capsys.readouterr().err
    assert "--way: way 'track+fast': 'fast'" in err and 'then any of joint, early' in err
    bench_generalise(
        seeds=[1], planners=['heuristic'], modes=['quasi_static'], levels=[11],
        workers=1, out_dir=tmp_path, way='track+early+joint',
    )  # fmt: skip
    doc = json.loads((tmp_path / 'generalise.json').read_text())
    assert doc['way'] == 'track+joint+early'
    assert [e['way'] for e in doc['episodes']] == ['track+joint+early']
    # A resumed run of another way runs its episodes again.
    out = bench_generalise(
        seeds=[1], planners=['heuristic'], modes=['quasi_static'], levels=[11],
        workers=1, out_dir=tmp_path, resume=True,
    )  # fmt: skip
    assert out['episodes_run'] == 1


def test_frozen_loads_give_the_generator_s_results_and_a_changed_table_changes_them(tmp_path):
    from palletizer.core.frozen_loads import freeze

    def run(loads, out):
        bench_generalise(
            seeds=[3], planners=['heuristic'], modes=['quasi_static'], levels=[13, 33],
            workers=1, out_dir=tmp_path / out, loads=loads,
        )  # fmt: skip
        doc = json.loads((tmp_path / out / 'generalise.json').read_text())
        drop = ('wall_s', 'loads')
        return doc, [{k: v for k, v in e.items() if k not in drop} for e in doc['episodes']]

    frozen_doc, frozen = run('benchmarks/loads/v1.json', 'frozen')
    assert frozen_doc['loads'].startswith('benchmarks/loads/v1.json (generator ')
    generated_doc, generated = run('generator', 'generated')
    assert generated_doc['loads'] == 'generator' and frozen == generated
    # A table read by the benchmark is what its episodes use: a carton made 2.5x taller
    # changes the run.
    doc = freeze([13, 33], [3])
    for c in doc['loads']['13:3']['cartons']:
        c['dims'] = (c['dims'][0], c['dims'][1], c['dims'][2] * 2.5)
    (tmp_path / 'tall.json').write_text(json.dumps(doc))
    _, tall = run(str(tmp_path / 'tall.json'), 'tall')
    assert tall[1] == generated[1] and tall[0] != generated[0]
