"""The published URDF's body is the MuJoCo model's: every MJCF geom of the arm, pedestal and
gripper has URDF visual (and, where it collides, collision) primitives of the same shape, size
and world pose within 1 mm at home and at random joint angles, and every link's inertial is the
MJCF body's. The URDF goes through a real URDF parser (yourdfpy) and its forward kinematics."""

from __future__ import annotations

import io

import mujoco
import numpy as np
import pytest
import yourdfpy
from palletizer.core.config import load_config
from palletizer.core.description import JOINTS, robot_description
from palletizer.sim.robot import robot_model

CELL = load_config().cell
TOL = 1e-3  # [m] the bar: the drawn robot is the simulated one within 1 mm
# The MJCF bodies whose URDF link has another name.
_LINK_OF_BODY = {'robot_base': 'base_link'}


def _configs() -> list[np.ndarray]:
    rng = np.random.default_rng(44)
    lo, hi = np.array(CELL.robot.joint_lower), np.array(CELL.robot.joint_upper)
    return [np.array(CELL.robot.home), np.zeros(6), *rng.uniform(lo, hi, size=(6, 6))]


@pytest.fixture(scope='module')
def parsed() -> yourdfpy.URDF:
    return yourdfpy.URDF.load(
        io.StringIO(robot_description(CELL.robot, CELL.gripper)),
        load_meshes=False,
        build_collision_scene_graph=False,
        load_collision_meshes=False,
    )


@pytest.fixture(scope='module')
def model() -> mujoco.MjModel:
    return robot_model()


def _pose(pos: np.ndarray, mat: np.ndarray) -> np.ndarray:
    T = np.eye(4)
    T[:3, :3] = np.asarray(mat).reshape(3, 3)
    T[:3, 3] = pos
    return T


def _shift(T: np.ndarray, z: float) -> np.ndarray:
    S = np.eye(4)
    S[2, 3] = z
    return T @ S


def _expected(
    m: mujoco.MjModel, d: mujoco.MjData
) -> dict[str, tuple[str, tuple, np.ndarray, bool]]:
    """name -> (kind, URDF size, world pose, collides) of the primitives each MJCF geom makes."""
    out: dict[str, tuple[str, tuple, np.ndarray, bool]] = {}
    unnamed = [g for g in range(m.ngeom) if not m.geom(g).name]
    assert len(unnamed) == 1 and m.geom_contype[unnamed[0]] == 0, 'one unnamed visual geom'
    for g in range(m.ngeom):
        name = m.geom(g).name or 'base_cover'
        T = _pose(d.geom_xpos[g], d.geom_xmat[g])
        size = m.geom_size[g]
        collides = bool(m.geom_contype[g] or m.geom_conaffinity[g])
        kind = int(m.geom_type[g])
        if kind == mujoco.mjtGeom.mjGEOM_BOX:
            out[name] = ('box', tuple(2 * size), T, collides)
        elif kind == mujoco.mjtGeom.mjGEOM_CYLINDER:
            out[name] = ('cylinder', (size[0], 2 * size[1]), T, collides)
        elif kind == mujoco.mjtGeom.mjGEOM_CAPSULE:
            out[name] = ('cylinder', (size[0], 2 * size[1]), T, collides)
            out[f'{name}_end0'] = ('sphere', (size[0],), _shift(T, -size[1]), collides)
            out[f'{name}_end1'] = ('sphere', (size[0],), _shift(T, size[1]), collides)
        else:
            raise AssertionError(f'MJCF geom {name!r} has type {kind}: no URDF counterpart')
    return out


def _urdf_elements(
    urdf: yourdfpy.URDF, T_world_base_link: np.ndarray, which: str
) -> dict[str, tuple[str, tuple, np.ndarray]]:
    """name -> (kind, size, world pose) of every <visual> or <collision> in the URDF."""
    out = {}
    for link_name, link in urdf.link_map.items():
        T_link = T_world_base_link @ urdf.get_transform(link_name, 'base_link')
        for el in getattr(link, which):
            origin = el.origin if el.origin is not None else np.eye(4)
            g = el.geometry
            if g.box is not None:
                kind, size = 'box', tuple(g.box.size)
            elif g.cylinder is not None:
                kind, size = 'cylinder', (g.cylinder.radius, g.cylinder.length)
            elif g.sphere is not None:
                kind, size = 'sphere', (g.sphere.radius,)
            else:
                raise AssertionError(f'{link_name}: {which} {el.name!r} is not a primitive')
            assert el.name not in out, f'two URDF {which} elements named {el.name!r}'
            out[el.name] = (kind, size, T_link @ origin)
    return out


def _corners(kind: str, size: tuple, T: np.ndarray) -> np.ndarray:
    """Points that pin the primitive's pose up to its symmetries (n, 3) [m]."""
    if kind == 'box':
        signs = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)])
        local = signs * np.asarray(size) / 2
    elif kind == 'cylinder':
        local = np.array([[0.0, 0.0, -size[1] / 2], [0.0, 0.0, size[1] / 2]])
    else:
        local = np.zeros((1, 3))
    return (T[:3, :3] @ local.T).T + T[:3, 3]


def _same_points(a: np.ndarray, b: np.ndarray) -> float:
    """Largest distance from a point of `a` to its nearest point of `b`, and back [m]."""
    dist = np.linalg.norm(a[:, None, :] - b[None, :, :], axis=2)
    return float(max(dist.min(axis=1).max(), dist.min(axis=0).max()))


@pytest.mark.parametrize('which', ['visuals', 'collisions'])
def test_every_mjcf_geom_is_drawn_in_the_urdf_within_1_mm(parsed, model, which):
    d = mujoco.MjData(model)
    adr = [int(model.joint(j).qposadr[0]) for j in JOINTS]
    base = model.body('robot_base').id
    for q in _configs():
        d.qpos[adr] = q
        mujoco.mj_kinematics(model, d)
        parsed.update_cfg(q)
        want = {
            n: v
            for n, v in _expected(model, d).items()
            if which == 'visuals' or v[3]  # collision elements only where the geom collides
        }
        got = _urdf_elements(parsed, _pose(d.xpos[base], d.xmat[base]), which)
        assert set(got) == set(want), (
            f'URDF {which} missing {sorted(set(want) - set(got))}, '
            f'extra {sorted(set(got) - set(want))}'
        )
        for name, (kind, size, T, _) in want.items():
            gkind, gsize, gT = got[name]
            where = f'{which} {name!r} at q = {np.round(q, 3).tolist()}'
            assert gkind == kind, f'{where}: URDF {gkind}, MJCF {kind}'
            np.testing.assert_allclose(gsize, size, atol=TOL, err_msg=f'{where}: size [m]')
            off = _same_points(_corners(kind, size, T), _corners(gkind, gsize, gT))
            assert off <= TOL, f'{where}: {off * 1000:.2f} mm from the MJCF geom'


def test_every_link_inertial_is_the_mjcf_bodys(parsed, model):
    d = mujoco.MjData(model)
    adr = [int(model.joint(j).qposadr[0]) for j in JOINTS]
    base = model.body('robot_base').id
    T_world_base_link = _pose(d.xpos[base], d.xmat[base])
    massive = {
        _LINK_OF_BODY.get(model.body(b).name, model.body(b).name): b
        for b in range(1, model.nbody)
        if model.body_mass[b] > 0
    }
    with_inertial = {n for n, link in parsed.link_map.items() if link.inertial is not None}
    assert with_inertial == set(massive), f'URDF inertials {sorted(with_inertial)}'
    for q in _configs()[:4]:
        d.qpos[adr] = q
        mujoco.mj_kinematics(model, d)
        parsed.update_cfg(q)
        T_world_base_link = _pose(d.xpos[base], d.xmat[base])
        for link, b in massive.items():
            inertial = parsed.link_map[link].inertial
            T = T_world_base_link @ parsed.get_transform(link, 'base_link') @ inertial.origin
            R = T[:3, :3]
            I_world = R @ inertial.inertia @ R.T
            Rm = d.ximat[b].reshape(3, 3)
            I_mjcf = Rm @ np.diag(model.body_inertia[b]) @ Rm.T
            assert inertial.mass == pytest.approx(model.body_mass[b], rel=1e-6), link
            np.testing.assert_allclose(T[:3, 3], d.xipos[b], atol=TOL, err_msg=f'{link} CoM')
            np.testing.assert_allclose(I_world, I_mjcf, atol=1e-6, err_msg=f'{link} inertia')


def test_the_gripper_mass_is_the_configured_one(parsed):
    assert parsed.link_map['gripper'].inertial.mass == CELL.gripper.mass_kg
    ped = parsed.link_map['pedestal'].collisions[0].geometry.cylinder
    assert (ped.radius, ped.length) == (CELL.robot.pedestal.radius, CELL.robot.pedestal.height)
