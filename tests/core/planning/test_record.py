"""A plan request's stack keeps the planner's record: extended, or started over when it differs."""

from __future__ import annotations

from palletizer.core.contracts import PackageSpec, Placement
from palletizer.core.planning import RecordedPlanner, build_planner


def _placement(pid: str, x: float, placed: bool = True) -> Placement:
    return Placement(
        seq=0,
        package_id=pid,
        package_type='std_m',
        mass_kg=5.0,
        dims_m=(0.4, 0.3, 0.2),
        layer=1,
        planned_pose=(x, 0.0, 0.1, 0.0),
        actual_pose=(x, 0.0, 0.1, 0.0),
        error_xy_m=0.0,
        error_yaw_rad=0.0,
        support_ratio=1.0,
        overhang_m=0.0,
        placed=placed,
    )


def _spec(pid: str) -> PackageSpec:
    return PackageSpec(pid, 'std_m', (0.4, 0.3, 0.2), 5.0, (0.01, 0.0, 0.0))


def test_the_record_follows_the_requests_and_a_restarted_planner_catches_up():
    a, b, c = (_placement(p, x) for p, x in (('a', -0.3), ('b', 0.0), ('c', 0.3)))
    specs = [_spec('a'), _spec('b'), _spec('c')]
    rec = RecordedPlanner(lambda: build_planner('beam'))
    rec.sync([], specs)
    rec.sync([a], specs)
    rec.sync([a, b, _placement('x', 0.5, placed=False)], specs)  # unplaced ones do not count
    assert rec.recorded == ['a', 'b'] and rec.rebuilds == 0
    assert [p.package_id for p in rec.planner.book.placements] == ['a', 'b']
    assert rec.planner.book.specs['a'].cog_offset_m == (0.01, 0.0, 0.0)
    # A restarted planner (a fresh record) is handed the whole stack by the next request.
    fresh = RecordedPlanner(lambda: build_planner('beam'))
    fresh.sync([a, b, c], specs)
    rec.sync([a, b, c], specs)
    assert fresh.recorded == rec.recorded == ['a', 'b', 'c']
    assert fresh.planner.book.mass == rec.planner.book.mass == 15.0


def test_a_stack_that_does_not_extend_the_record_starts_it_over():
    a, b = _placement('a', -0.3), _placement('b', 0.0)
    rec = RecordedPlanner(lambda: build_planner('grid'))
    rec.sync([a, b], [])
    rec.sync([b], [])  # the next episode's first carton, or another run's stack
    assert rec.recorded == ['b'] and rec.rebuilds == 1
    assert [p.package_id for p in rec.planner.book.placements] == ['b']
