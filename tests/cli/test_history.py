"""benchmarks/history.jsonl: a result file's line is appended and never rewritten; a malformed
result file is refused, naming the file and what is wrong; scripts/bench appends the line of
the result file it writes; the committed history reads back."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from palletizer.cli import bench, history
from palletizer.cli.history import HistoryError, append, episodes_line, history_line

ROOT = Path(__file__).resolve().parents[2]


def _result(path: Path, **fields: object) -> Path:
    doc = {
        'benchmark': 'hardware',
        'commit': '269ef14',
        'episodes': 6,
        'episodes_ok': 6,
        'placement_check_err_mm_p95': 6.98,
        'per_episode': [{'seed': 1, 'success': True}],
        **fields,
    }
    path.write_text(json.dumps(doc))
    return path


def test_appending_twice_keeps_the_earlier_line_byte_for_byte(tmp_path):
    hist = tmp_path / 'history.jsonl'
    result = _result(tmp_path / 'hardware.json')
    first = append(history_line(result), hist)
    before = hist.read_bytes()
    assert first['id'] == 'hardware@269ef14' and first['commit_from'] == 'file'
    assert first['figures'] == {
        'episodes': 6,
        'episodes_ok': 6,
        'placement_check_err_mm_p95': 6.98,
    }

    _result(result, placement_check_err_mm_p95=4.2)
    second = append(history_line(result, command='scripts/bench hardware'), hist)
    after = hist.read_bytes()
    assert after.startswith(before)
    lines = [json.loads(t) for t in after.decode().splitlines()]
    assert [h['id'] for h in lines] == ['hardware@269ef14', 'hardware@269ef14-2']
    assert lines[0]['figures']['placement_check_err_mm_p95'] == 6.98
    assert second['figures']['placement_check_err_mm_p95'] == 4.2
    assert second['command'] == 'scripts/bench hardware'


@pytest.mark.parametrize(
    ('text', 'what'),
    [
        ('{"benchmark": "hardware", ', 'not JSON (line 1 column'),
        ('[1, 2]', 'a result file is one JSON object, not a list'),
        ('{"episodes": 3}', 'no `benchmark` field'),
        ('{"benchmark": "hardware", "commit": "HEAD"}', "`commit` is 'HEAD', not a git sha"),
    ],
)
def test_a_malformed_result_file_is_refused_naming_the_file_and_the_fault(
    tmp_path, capsys, text, what
):
    bad = tmp_path / 'broken.json'
    bad.write_text(text)
    hist = tmp_path / 'history.jsonl'
    with pytest.raises(HistoryError, match='broken.json') as exc:
        history_line(bad)
    assert what in str(exc.value)
    assert history.main(['append', str(bad), '--history', str(hist)]) == 1
    err = capsys.readouterr().err
    assert str(bad) in err and what in err
    assert not hist.exists()


def test_an_unfinished_history_is_not_appended_to(tmp_path):
    hist = tmp_path / 'history.jsonl'
    hist.write_text('{"id": "a"}\n{"id": "b"')
    with pytest.raises(HistoryError, match='line 2|:2: not JSON'):
        append(history_line(_result(tmp_path / 'hardware.json')), hist)


def test_an_episode_log_without_a_summary_gives_its_counts(tmp_path):
    log = tmp_path / 'generalise.episodes.jsonl'
    rows = [
        {'commit': 'ff14a18', 'planner': 'beam', 'level': 13, 'seed': s, 'success': ok}
        | {'n_objects': 8, 'n_placed': 8 if ok else 7, 'failure': None if ok else 'wrong'}
        for s, ok in ((14, True), (28, True), (40, False))
    ]
    log.write_text(''.join(json.dumps(r) + '\n' for r in rows))
    line = episodes_line(log, line_id='x/generalise', benchmark='generalise')
    assert line['commit'] == 'ff14a18' and line['commit_from'] == 'file'
    assert line['figures_from'] == 'episodes.jsonl'
    f = line['figures']
    assert (f['episodes'], f['episodes_ok'], f['cartons'], f['cartons_placed']) == (3, 2, 24, 23)
    assert f['planners'] == {'beam': {'13': {'episodes': 3, 'episodes_ok': 2}}}


def test_bench_save_writes_the_result_file_and_appends_its_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = {'benchmark': 'replica', 'commit': 'abc1234', 'rows_per_s': 4235}
    assert bench._record('replica', result, 'scripts/bench replica --save', save=True) == 0
    saved = json.loads((tmp_path / 'benchmarks/results/replica.json').read_text())
    assert saved['command'] == 'scripts/bench replica --save' and saved['rows_per_s'] == 4235
    (line,) = history.read_history(tmp_path / 'benchmarks/history.jsonl')
    assert line['id'] == 'replica@abc1234' and line['source'] == 'benchmarks/results/replica.json'
    assert line['date'] and line['figures']['rows_per_s'] == 4235
    # A run written elsewhere (--out-dir) is not the current result: no line.
    other = tmp_path / 'elsewhere' / 'generalise.json'
    other.parent.mkdir()
    other.write_text(json.dumps({'results': {}, 'n_seeds': 1, 'commit': 'abc1234'}))
    assert (
        bench._record('generalise', {'output': str(other)}, 'scripts/bench generalise', False) == 0
    )
    assert len(history.read_history(tmp_path / 'benchmarks/history.jsonl')) == 1


def test_a_result_file_a_benchmark_writes_itself_is_stamped_with_the_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    own = tmp_path / 'benchmarks/results/bpp.json'
    own.parent.mkdir(parents=True)
    own.write_text(json.dumps({'best': 'heuristic', 'table': []}))
    result = {'written': str(own), 'wall_s': 12.5, 'machine': {'cpu': 'x86_64'}}
    assert bench._record('bpp', result, 'scripts/bench bpp --sequences 3', save=False) == 0
    doc = json.loads(own.read_text())
    assert set(bench.PROVENANCE) <= set(doc) and doc['best'] == 'heuristic'
    assert doc['command'] == 'scripts/bench bpp --sequences 3' and doc['wall_s'] == 12.5
    assert doc['benchmark'] == 'bpp' and doc['machine'] == {'cpu': 'x86_64'} and doc['date']
    # The file's own commit (the one its figures hold for) is kept.
    gen = own.with_name('generalise.json')
    gen.write_text(json.dumps({'commit': 'abc1234', 'results': {}, 'n_seeds': 1}))
    assert (
        bench._record('generalise', {'output': str(gen)}, 'scripts/bench generalise', False) == 0
    )
    assert json.loads(gen.read_text())['commit'] == 'abc1234'


def test_save_is_refused_for_a_benchmark_that_writes_its_own_file(capsys):
    with pytest.raises(SystemExit) as exc:
        bench.main(['bpp', '--save'])
    assert exc.value.code == 2
    assert 'bpp writes its own result file' in capsys.readouterr().err


def test_the_committed_history_reads_back_with_one_line_per_current_result():
    lines = history.read_history(ROOT / 'benchmarks/history.jsonl')
    ids = [h['id'] for h in lines]
    assert len(ids) == len(set(ids))
    sources = {h['source'] for h in lines}
    for result in sorted((ROOT / 'benchmarks/results').glob('*.json')):
        assert f'benchmarks/results/{result.name}' in sources, result.name
    for h in lines:
        assert h['commit_from'] in ('file', 'folder name', 'given', None)
        assert h['figures_from'] in ('summary', 'episodes.jsonl')


def test_every_current_result_file_names_the_one_run_that_made_it():
    for result in sorted((ROOT / 'benchmarks/results').glob('*.json')):
        doc = json.loads(result.read_text())
        # The date came with scripts/bench's stamping; a file from before it has its history line's.
        missing = [k for k in bench.PROVENANCE if k != 'date' and not doc.get(k)]
        assert not missing, f'{result.name}: no {", ".join(missing)}'
        assert doc['benchmark'] == result.stem, result.name
        assert re.fullmatch(r'[0-9a-f]{7,40}', doc['commit']), (result.name, doc['commit'])
        assert doc['command'].startswith(f'scripts/bench {result.stem}'), (
            result.name,
            doc['command'],
        )
        assert {'cpu', 'python'} <= set(doc['machine']), result.name
