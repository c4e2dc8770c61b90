"""Every scene compiles without a MuJoCo warning; collision classes keep the arm off cartons."""

from __future__ import annotations

import mujoco
import pytest
from palletizer.core.config import load_config
from palletizer.sim.scene import (
    CartonPlacement,
    SceneError,
    SceneOptions,
    build_scene_spec,
    build_scene_xml,
    compile_scene,
    package_indices,
    scene_spec,
)
from palletizer.sim.sources import make_source

from tests.sim._cellkit import Draw

LEVELS = sorted(load_config().levels)


def _collide(m: mujoco.MjModel, g1: int, g2: int) -> bool:
    return bool(
        (m.geom_contype[g1] & m.geom_conaffinity[g2])
        or (m.geom_contype[g2] & m.geom_conaffinity[g1])
    )


@pytest.mark.sim
@pytest.mark.parametrize('sleep', [False, True])
def test_empty_cell_compiles_and_steps_without_warnings(sleep):
    m = compile_scene(build_scene_spec(options=SceneOptions(sleep=sleep)), check_steps=200)
    assert m.nu == 6
    for name in ('flange', 'tcp', 'cam_top', 'cam_diag_a', 'cam_diag_b', 'cam_station'):
        assert m.site(name).id >= 0
    assert m.key('home').id == 0


@pytest.mark.sim
@pytest.mark.parametrize('level_id', LEVELS)
def test_every_level_scene_compiles_and_steps_without_warnings(level_id):
    cfg = load_config()
    source = make_source(cfg.level(level_id), 1)
    xml = build_scene_xml(source)
    m = compile_scene(scene_spec(xml), check_steps=100)
    n = cfg.level(level_id).n
    assert len(package_indices(xml)) == n
    assert sum(m.eq(i).name.startswith('suction_') for i in range(m.neq)) == n


def test_compile_scene_reports_a_broken_model():
    xml = build_scene_xml().replace('<compiler ', '<compiler bogus="1" ')
    with pytest.raises(SceneError, match='does not compile'):
        scene_spec(xml)
    with pytest.raises(SceneError, match='does not compile'):
        compile_scene(xml)


@pytest.mark.sim
def test_compile_scene_fails_on_a_runtime_warning():
    boxes = [
        CartonPlacement(Draw(k, f'b-{k:02d}', (0.3, 0.2, 0.1), 1.0), (0.3 + 0.35 * k, 0.0, 0.2))
        for k in range(3)
    ]
    # Absurd gravity: accelerations blow past MuJoCo's sanity bound on the first step.
    spec = build_scene_spec(cartons=boxes, options=SceneOptions(gravity=(0.0, 0.0, -1e12)))
    with pytest.raises(SceneError, match='BADQACC'):
        compile_scene(spec, check_steps=200)


def test_arm_never_touches_cartons_but_cups_furniture_and_pallet_do():
    box = CartonPlacement(Draw(0, 'b-00', (0.3, 0.2, 0.1), 1.0), (0.6, 0.0, 0.3))
    m = compile_scene(build_scene_spec(cartons=[box]))
    carton = m.geom('package_geom_0').id
    arm = [
        g
        for g in range(m.ngeom)
        if m.geom(g).name.endswith(('_col', '_col0', '_col1')) or m.geom(g).name == 'gripper_body'
    ]
    assert len(arm) == 10
    assert not any(_collide(m, g, carton) for g in arm)
    assert not any(_collide(m, a, b) for a in arm for b in arm)
    for name in ('cup_0', 'cup_15', 'pallet_geom', 'floor'):
        assert _collide(m, m.geom(name).id, carton)
    for name in ('pallet_geom', 'floor', 'pedestal'):
        assert _collide(m, m.geom(name).id, m.geom('upper_arm_col1').id)


def test_each_carton_gets_one_inactive_suction_weld():
    boxes = [
        CartonPlacement(Draw(k, f'b-{k:02d}', (0.3, 0.2, 0.1), 1.0), (0.3 + 0.35 * k, 0.0, 0.2))
        for k in (0, 2, 5)
    ]
    m = compile_scene(build_scene_spec(cartons=boxes))
    d = mujoco.MjData(m)
    for k in (0, 2, 5):
        eq = m.eq(f'suction_{k}')
        assert m.eq_obj1id[eq.id] == m.body('gripper').id
        assert m.eq_obj2id[eq.id] == m.body(f'package_{k}').id
        assert not d.eq_active[eq.id]
    assert d.eq_active[m.eq('pallet_anchor').id]


@pytest.mark.sim
def test_a_carton_set_down_on_the_auxiliary_table_rests_on_its_top():
    # The set-aside buffer puts cartons there; without the table in the scene a carton set
    # down there fell to the floor and the take-back found nothing to seal on.
    from palletizer.sim.scene import AuxTableParams

    aux = AuxTableParams.from_config(load_config().cell.tables.auxiliary)
    (cx, cy), top, H = aux.centre, aux.top, 0.1
    box = CartonPlacement(
        Draw(0, 'b-00', (0.24, 0.18, H), 1.7), (cx, cy - 0.2, top + H / 2 + 0.01)
    )
    m = compile_scene(build_scene_spec(cartons=[box], options=SceneOptions(aux_table=aux)))
    d = mujoco.MjData(m)
    mujoco.mj_step(m, d, nstep=int(1.0 / m.opt.timestep))
    z = float(d.body('package_0').xpos[2])
    assert z == pytest.approx(top + H / 2, abs=0.002)
    for name in ('auxiliary_table_top', 'auxiliary_table_leg_0'):
        assert _collide(m, m.geom(name).id, m.geom('package_geom_0').id)
