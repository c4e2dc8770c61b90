"""The graph's oracle flag follows what the nodes were built with, for every combination of
height map, detector and gauge (the in-process half is tests/wiring/test_oracle_flag.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.graph.isolation import run_isolated

HERE = Path(__file__).parent


def test_the_director_flags_the_run_from_the_modes_the_nodes_were_built_with():
    proc = run_isolated([sys.executable, str(HERE / 'flag_run.py')], timeout=240)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith('FLAGS ')), None)
    assert proc.returncode == 0 and line, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = json.loads(line[len('FLAGS ') :])
    assert len(rows) == 8
    for r in rows:
        m, d, g = r['asked']
        assert r['built'] == {'map': m, 'detector': d, 'gauge': g}
        assert r['reported'] == [m, d, g]
        assert r['oracle'] is ('oracle' in (m, d, g)), r
