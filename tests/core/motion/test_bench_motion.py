"""The motion benchmark runs and reports the keys the README promises."""

from __future__ import annotations

from palletizer.cli.bench_motion import bench_motion


def test_bench_motion_reports_ik_plan_and_memory_figures():
    out = bench_motion(repeats=2)
    for key in ('ik_ms', 'plan_ms', 'peak_rss_mb', 'plan_cpu_ms', 'motion_s_median'):
        assert out[key] > 0, key
    assert out['plan_failures'] == 0
    assert 'cycle_s_level11' not in out  # needs the simulator
