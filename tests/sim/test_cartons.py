"""Carton MJCF and the carton handle: names, inertia, collision classes and measurements."""

from __future__ import annotations

import math
from dataclasses import dataclass

import mujoco
import numpy as np
import pytest
from palletizer.sim.cartons import (
    CartonHandle,
    SceneError,
    box_inertia,
    carton_body_xml,
    carton_default_xml,
    yaw_quat,
)


@dataclass(frozen=True)
class _Draw:
    index: int = 3
    package_id: str = 'std_m-03'
    type_name: str = 'std_m'
    dims: tuple[float, float, float] = (0.42, 0.30, 0.18)
    mass: float = 4.2
    cog_offset: tuple[float, float, float] = (0.05, 0.0, 0.01)
    rgba: tuple[float, float, float, float] = (0.64, 0.43, 0.23, 1.0)
    friction: tuple[float, float, float] = (0.95, 0.01, 0.001)


def _model(body_xml: str, extra: str = '') -> tuple[mujoco.MjModel, mujoco.MjData]:
    xml = (
        '<mujoco><option timestep="0.002" integrator="implicitfast" cone="elliptic"/>'
        f'<default>{carton_default_xml()}</default><worldbody>{extra}{body_xml}</worldbody>'
        '</mujoco>'
    )
    model = mujoco.MjModel.from_xml_string(xml)
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    return model, data


def test_box_inertia_matches_the_solid_box_formula():
    np.testing.assert_allclose(box_inertia(12.0, (1.0, 2.0, 3.0)), (13.0, 10.0, 5.0))


def test_yaw_quat_turns_x_onto_y_at_ninety_degrees():
    w, x, y, z = yaw_quat(math.pi / 2)
    rot = np.zeros(9)
    mujoco.mju_quat2Mat(rot, np.array([w, x, y, z]))
    np.testing.assert_allclose(rot.reshape(3, 3) @ [1, 0, 0], [0, 1, 0], atol=1e-12)


@pytest.mark.sim
def test_carton_body_carries_mass_offset_cog_and_named_parts():
    draw = _Draw()
    model, data = _model(carton_body_xml(draw, (0.1, 0.2, 0.5), yaw_quat(0.3)))
    h = CartonHandle.bind(model, draw.index, draw.dims)
    assert mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, h.body) == 'package_3'
    assert mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, 0) == 'package_joint_3'
    np.testing.assert_allclose(model.body_mass[h.body], 4.2)
    np.testing.assert_allclose(model.body_ipos[h.body], draw.cog_offset, atol=1e-9)
    np.testing.assert_allclose(model.body_inertia[h.body], box_inertia(4.2, draw.dims), rtol=1e-6)
    np.testing.assert_allclose(model.geom_size[h.geom], np.array(draw.dims) / 2)
    assert model.geom_group[h.geom] == 1
    assert (model.geom_contype[h.geom], model.geom_conaffinity[h.geom]) == (1, 1)
    np.testing.assert_allclose(model.geom_friction[h.geom], draw.friction)
    # The lid site sits at the centre of the top face.
    np.testing.assert_allclose(h.lid_position(data), [0.1, 0.2, 0.5 + 0.09], atol=1e-9)
    np.testing.assert_allclose(h.position(data), [0.1, 0.2, 0.5], atol=1e-12)


@pytest.mark.sim
def test_carton_touches_furniture_but_not_the_arm():
    draw = _Draw(index=0)
    furniture = (
        '<geom name="table" type="box" pos="0 0 0.25" size="0.3 0.3 0.25" '
        'contype="3" conaffinity="3"/>'
    )
    arm = (
        '<body name="link" pos="0 0 0.7"><geom name="arm" type="capsule" size="0.05 0.2" '
        'euler="0 1.5708 0" contype="2" conaffinity="2"/></body>'
    )
    # The carton overlaps both the table top and the arm capsule.
    model, data = _model(carton_body_xml(draw, (0.0, 0.0, 0.585)), furniture + arm)
    pairs = {
        frozenset(
            (
                mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_GEOM, c.geom1),
                mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_GEOM, c.geom2),
            )
        )
        for c in data.contact[: data.ncon]
    }
    assert frozenset(('table', 'package_geom_0')) in pairs
    assert frozenset(('arm', 'package_geom_0')) not in pairs


@pytest.mark.sim
def test_carton_handle_measures_top_tilt_corners_and_lid_speed():
    draw = _Draw(index=1, cog_offset=(0.0, 0.0, 0.0))
    tilt = math.radians(20.0)
    quat = (math.cos(tilt / 2), math.sin(tilt / 2), 0.0, 0.0)  # about X
    model, data = _model(carton_body_xml(draw, (0.0, 0.0, 1.0), quat))
    h = CartonHandle.bind(model, 1, draw.dims)
    np.testing.assert_allclose(h.tilt(data), tilt, atol=1e-9)
    half_z = 0.5 * (0.30 * math.sin(tilt) + 0.18 * math.cos(tilt))
    np.testing.assert_allclose(h.top(data), 1.0 + half_z, atol=1e-9)
    assert h.bottom_corners(data).shape == (4, 3)
    h.set_velocity_x(data, 0.25)
    mujoco.mj_forward(model, data)
    np.testing.assert_allclose(h.lid_speed(model, data), 0.25, atol=1e-9)


@pytest.mark.sim
def test_carton_handle_rejects_a_model_without_that_carton():
    model, _ = _model(carton_body_xml(_Draw(index=0), (0.0, 0.0, 1.0)))
    with pytest.raises(SceneError, match="carton 7: 'package_7' is not in the compiled model"):
        CartonHandle.bind(model, 7, (0.1, 0.1, 0.1))
