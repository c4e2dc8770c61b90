"""Level 34 is level 33 in an industrial hall: the scenery is seen, never touched."""

from __future__ import annotations

import mujoco
import pytest
from palletizer.core.config import load_config
from palletizer.sim.cell import Cell

pytestmark = pytest.mark.sim

CFG = load_config()


def test_plant_scenery_collides_with_nothing_and_only_level_34_has_it():
    hall = Cell(CFG.level(34), 1)
    plain = Cell(CFG.level(33), 1)
    try:
        m = hall.model
        plant = [
            i
            for i in range(m.ngeom)
            if (mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, i) or '').startswith('plant_')
        ]
        assert len(plant) >= 8
        assert all(m.geom_contype[i] == 0 and m.geom_conaffinity[i] == 0 for i in plant)
        assert m.nlight != plain.model.nlight or any(
            mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_LIGHT, i).startswith('plant_')
            for i in range(m.nlight)
        )
        names = [
            mujoco.mj_id2name(plain.model, mujoco.mjtObj.mjOBJ_GEOM, i) or ''
            for i in range(plain.model.ngeom)
        ]
        assert not [n for n in names if n.startswith('plant_')]
        # Same bodies, same degrees of freedom: the hall adds nothing physical.
        assert (m.nbody, m.nq, m.nv) == (plain.model.nbody, plain.model.nq, plain.model.nv)
    finally:
        hall.close()
        plain.close()


def test_level_34_gives_the_results_of_level_33_on_the_same_seed():
    from palletizer.core.planning import build_planner
    from palletizer.wiring.inprocess import MemorySink, run_inprocess

    # With oracle perception: the hall's own lighting changes what the cameras see (that is the
    # point of level 34), but nothing physical.
    a, sa = run_inprocess(
        33, 2, build_planner('heuristic'), sink=MemorySink(), perception='oracle'
    )
    b, sb = run_inprocess(
        34, 2, build_planner('heuristic'), sink=MemorySink(), perception='oracle'
    )
    da, db = a.to_dict(), b.to_dict()
    assert (da.pop('level'), db.pop('level')) == (33, 34)
    assert da == db
    assert sa.events == sb.events
    assert [p.actual_pose for p in sa.placements] == [p.actual_pose for p in sb.placements]
