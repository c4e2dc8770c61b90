"""The graph weighs on the lift and zeroes on the move as the in-process loop does
(configs/perception.yaml gauge.weigh_on_lift and zero_on_move): the director asks the
wrist_gauge node for the fit over the lift and for the tare over the move back, and holds the
arm still only where either is not certain enough."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pytest

from tests.graph.isolation import run_isolated

pytestmark = pytest.mark.sim


def _configs_on_lift(tmp_path: Path) -> Path:
    from palletizer.core.config import config_dir

    out = tmp_path / 'configs'
    shutil.copytree(config_dir(), out)
    perception = out / 'perception.yaml'
    text, n = re.subn(
        r'^(  (weigh_on_lift|zero_on_move):) *false',
        r'\g<1> true',
        perception.read_text(),
        flags=re.M,
    )
    assert n == 2
    perception.write_text(text)
    return out


# Behind --run-slow (about 90 s): the in-process gauge's test (tests/wiring/test_gauge_lift.py)
# runs in the default tier; this one holds the node and the director to it.
@pytest.mark.slow
def test_level_11_weighs_on_the_lift_and_zeroes_on_the_move_through_the_graph(tmp_path):
    from palletizer.core.config import load_config
    from palletizer.core.loads import draw_load

    configs = _configs_on_lift(tmp_path)
    proc = run_isolated(
        [
            sys.executable,
            '-m',
            'palletizer.cli.palletize',
            '--level',
            '11',
            '--seed',
            '1',
            '-n',
            '1',
            '--speed',
            '1',
        ],
        timeout=420,
        cwd=str(tmp_path),
        env={'PALLETIZER_CONFIG_DIR': str(configs)},
    )
    out = proc.stdout
    assert proc.returncode == 0, out[-4000:] + proc.stderr[-2000:]
    assert 'seed 1: 4/4 · SUCCESS' in out, out[-4000:]
    runs = sorted((tmp_path / 'runs').iterdir())
    events = [json.loads(ln) for ln in (runs[0] / 'events.jsonl').read_text().splitlines() if ln]
    picks = [e for e in events if e['kind'] == 'pick']
    truth = {d.package_id: d.spec for d in draw_load(11, 1, load_config())}
    assert len(picks) == 4
    for e in picks:
        assert e['payload']['weighed'] == 'lift', e
        assert e['payload']['mass_kg'] == pytest.approx(
            truth[e['package_id']].mass_kg, rel=0.01
        ), e
    settles = [e for e in events if e['kind'] == 'settle']
    assert len(settles) == 4 and all(e['payload'].get('zeroed') == 'move' for e in settles)
