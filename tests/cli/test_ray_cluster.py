"""A simulated two-node Ray cluster (ray.cluster_utils, loopback): training spreads its
evaluations over both nodes and finds what the evaluator finds run in this process."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

ray = pytest.importorskip('ray')

from palletizer.cli.loads import DEFAULT_TABLE, use_loads  # noqa: E402
from palletizer.cli.train import evaluate, train  # noqa: E402

# A Ray cluster of its own: two on one machine at once collide (ports, the session files
# under /tmp/ray); run alone, after the parallel tests (scripts/test).
pytestmark = pytest.mark.serial


@pytest.fixture(scope='module')
def two_nodes():
    os.environ['RAY_USAGE_STATS_ENABLED'] = '0'
    # Every node and the driver on 127.0.0.1, not this machine's outward address.
    old = os.environ.get('RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER')
    os.environ['RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER'] = '0'
    from ray.cluster_utils import Cluster

    cluster = Cluster(
        initialize_head=True, head_node_args={'num_cpus': 1, 'include_dashboard': False}
    )
    cluster.add_node(num_cpus=1)
    ray.init(address=cluster.address, log_to_driver=False)
    yield cluster
    ray.shutdown()
    cluster.shutdown()
    if old is None:
        os.environ.pop('RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER')
    else:
        os.environ['RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER'] = old


def test_work_spreads_over_both_nodes_and_the_results_are_unchanged(two_nodes, tmp_path):
    nodes = {n['NodeID'] for n in ray.nodes() if n['Alive']}
    assert len(nodes) == 2
    s = train(
        levels=[13],
        seeds=[1, 2, 3],
        iterations=1,
        population=2,
        progress_bar=False,
        runs_dir=tmp_path,
    )
    docs = [
        json.loads(f.read_text()) for f in sorted((Path(s['run']) / 'evaluations').glob('*.json'))
    ]
    assert len(docs) == 6
    assert {d['node'] for d in docs} == nodes  # both nodes evaluated some
    use_loads(str(DEFAULT_TABLE))
    for d in docs:  # the same numbers as the evaluator run here, without Ray
        job = {k: d[k] for k in ('id', 'iteration', 'candidate', 'level', 'seed', 'weights')}
        here = evaluate(job)
        assert {k: v for k, v in here.items() if k not in ('wall_s', 'node', 'pid')} == {
            k: v for k, v in d.items() if k not in ('wall_s', 'node', 'pid')
        }
