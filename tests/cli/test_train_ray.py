"""Weight training on a local Ray: the same run with 1 and 2 workers writes the same numbers,
a worker that dies is retried, and the trained weights load with planner_weights:=."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

ray = pytest.importorskip('ray')

from palletizer.cli import pool  # noqa: E402
from palletizer.cli.train import train  # noqa: E402

# A Ray cluster of its own: two on one machine at once collide (ports, the session files
# under /tmp/ray); run alone, after the parallel tests (scripts/test).
pytestmark = pytest.mark.serial


# Level 13 (8 cartons; boxes do fall in its jolt trials) on two seeds: 2 iterations x 3
# candidates x 2 = 12 evaluations.
TINY = {'levels': [13], 'seeds': [1, 2], 'iterations': 2, 'population': 3, 'progress_bar': False}
WHERE = ('wall_s', 'node', 'pid')  # how and where an evaluation ran, not what it found


@pytest.fixture(scope='module')
def local_ray():
    """One local Ray (2 CPUs, loopback) for the module; Ray's start-up is the slow part."""
    os.environ['RAY_USAGE_STATS_ENABLED'] = '0'
    ray.init(
        address='local',  # its own, whatever else runs here (cli/pool.py)
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        _node_ip_address='127.0.0.1',
    )
    yield
    ray.shutdown()


def _numbers(run: Path) -> dict:
    """Everything a run decided: each evaluation (less where it ran), best weights, history."""
    evals = {}
    for f in sorted((run / 'evaluations').glob('*.json')):
        doc = json.loads(f.read_text())
        evals[f.name] = {k: v for k, v in doc.items() if k not in WHERE}
    summary = json.loads((run / 'summary.json').read_text())
    return {
        'evaluations': evals,
        'best_weights': {
            k: v
            for k, v in json.loads((run / 'best_weights.json').read_text()).items()
            if k != 'use'
        },
        'iterations': summary['iterations'],
        'best': summary['best'],
    }


def test_one_or_two_workers_train_the_same_weights(local_ray, tmp_path):
    one = train(**TINY, workers=1, runs_dir=tmp_path / 'one')
    two = train(**TINY, workers=2, runs_dir=tmp_path / 'two')
    a, b = _numbers(Path(one['run'])), _numbers(Path(two['run']))
    assert len(a['evaluations']) == 12
    assert any(e['fallen'] for e in a['evaluations'].values())  # the ranking has work to do
    assert a == b
    pids_two = {
        json.loads(f.read_text())['pid'] for f in (Path(two['run']) / 'evaluations').glob('*')
    }
    assert len(pids_two) >= 2  # two worker processes did evaluate
    # A different training seed draws other candidates: the comparison can tell runs apart.
    other = train(**TINY, workers=2, runs_dir=tmp_path / 'other', training_seed=7)
    assert _numbers(Path(other['run']))['iterations'] != a['iterations'] or (
        _numbers(Path(other['run']))['evaluations'] != a['evaluations']
    )


def test_the_run_writes_the_reference_outputs(local_ray, tmp_path):
    s = train(**{**TINY, 'iterations': 1, 'population': 2}, workers=2, runs_dir=tmp_path)
    run = Path(s['run'])
    assert run.name.endswith('-weight-training')
    for name in (
        'manifest.json',
        'config_snapshot.json',
        'progress.jsonl',
        'best_weights.json',
        'summary.json',
    ):
        assert (run / name).is_file(), name
    assert (run / 'source_snapshot' / 'core' / 'training.py').is_file()
    assert sorted(p.name for p in (run / 'evaluations').iterdir()) == [
        'i000-c000-l13-s000001.json',
        'i000-c000-l13-s000002.json',
        'i000-c001-l13-s000001.json',
        'i000-c001-l13-s000002.json',
    ]
    m = json.loads((run / 'manifest.json').read_text())
    assert m['schema'] == 1 and m['algorithm'] == 'cross_entropy_policy_search'
    assert m['stability_protocol']['n_trials'] == 10 and 'core/training.py' in m['sha256']
    events = [json.loads(x)['event'] for x in (run / 'progress.jsonl').read_text().splitlines()]
    assert events[0] == 'training_started' and events[-1] == 'training_finished'
    for e in (
        'iteration_started',
        'candidate_started',
        'evaluation_started',
        'evaluation_progress',
        'evaluation_finished',
        'candidate_finished',
        'iteration_finished',
    ):
        assert e in events, e
    best = json.loads((run / 'best_weights.json').read_text())
    from palletizer.core.training import weight_id

    assert best['weight_id'] == weight_id(best['weights'])


def test_a_worker_that_dies_is_retried(local_ray, tmp_path):
    marker = str(tmp_path / 'died-once')

    def job(x):
        if x == 2 and not os.path.exists(marker):
            open(marker, 'w').close()
            os._exit(1)  # the worker process dies mid-task
        return x * x

    assert pool.run_all(job, [1, 2, 3], workers=2) == [1, 4, 9]
    assert os.path.exists(marker)
    os.unlink(marker)
    with pytest.raises(ray.exceptions.WorkerCrashedError):  # without retries the run fails
        list(pool.as_completed(job, [1, 2, 3], workers=2, retries=0))


def test_an_exception_in_a_job_reaches_the_caller_unretried(local_ray):
    def job(x):
        raise ValueError(f'bad job {x}')

    with pytest.raises(ValueError, match='bad job 5'):
        pool.run_all(job, [5], workers=1)


def test_compare_scores_a_weights_file_against_the_configured_weights(local_ray, tmp_path):
    from palletizer.cli.train import compare
    from palletizer.core.params.planning import DEFAULT_WEIGHTS

    f = tmp_path / 'w.json'
    f.write_text(json.dumps({'weights': {**DEFAULT_WEIGHTS, 'lowness': 3.0}}))
    out = compare([None, str(f)], levels=[13], seeds=[1, 2], workers=2)
    assert list(out) == ['configs/planner.yaml', str(f)]
    default = out['configs/planner.yaml']
    # level 13 seeds 1 and 2 with planner.yaml: all 16 cartons placed; 5 boxes tip over the
    # 2 x 10 jolt trials (3 before the first carton was freed from the deck's centre)
    assert (default['loss'], default['missing'], default['fallen'], default['placed']) == (
        5,
        0,
        5,
        16,
    )
    assert default['levels']['13']['evaluations'] == 2
    assert out[str(f)]['weight_id'] != default['weight_id']
