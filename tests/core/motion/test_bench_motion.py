"""The motion benchmark runs and reports the keys docs/benchmarks.md promises."""

from __future__ import annotations

import pytest
from palletizer.cli.bench_motion import bench_motion, cycle_level11


def test_bench_motion_reports_ik_plan_and_memory_figures():
    out = bench_motion(repeats=2)
    for key in ('ik_ms', 'plan_ms', 'peak_rss_mb', 'plan_cpu_ms', 'motion_s_median'):
        assert out[key] > 0, key
    assert out['plan_failures'] == 0
    assert 'cycle_s_level11' not in out  # needs the simulator


@pytest.mark.sim
def test_level11_cycle_counts_everything_and_separates_the_first_delivery():
    out = cycle_level11()
    assert out['cycle_level11_placed'] == '4/4'
    first = out['cycle_level11_first_delivery_s']
    assert first > 0
    # The two figures differ by exactly the first delivery wait spread over the 4 cartons.
    assert out['cycle_s_level11'] - out['cycle_s_level11_after_first'] == pytest.approx(
        first / 4, abs=2e-3
    )
    assert 0 < out['cycle_s_level11_after_first'] < out['cycle_s_level11']
