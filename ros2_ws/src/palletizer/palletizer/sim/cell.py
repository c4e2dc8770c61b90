"""The Cell facade: one MuJoCo world (arm, gripper, pallet, source, cartons) advanced in lockstep."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import mujoco
import numpy as np

from palletizer.core.config.cell import CellConfig
from palletizer.core.errors import PalletizerError
from palletizer.sim.cameras import CameraRig, Frame, camera_specs
from palletizer.sim.depth_noise import DepthNoise, apply_depth_noise, noise_key
from palletizer.sim.pallet import PALLET_JOINTS
from palletizer.sim.robot import ARM_JOINTS
from palletizer.sim.scene import (
    AuxTableParams,
    CartonPlacement,
    SceneOptions,
    build_scene_xml,
    compile_scene,
    package_indices,
    scene_spec,
)
from palletizer.sim.servo import Servo, ServoGains, TrackResult, Trajectory
from palletizer.sim.suction import SealResult, SealStatus, Suction
from palletizer.sim.wrench import Wrench, WrenchNoise, WrenchSensor

__all__ = ['CartonTruth', 'Cell', 'CellError', 'CellOptions', 'GroundTruth']


class CellError(PalletizerError):
    """The cell was asked for something it cannot do (unknown level source, bad argument)."""


@dataclass(frozen=True)
class CellOptions:
    """Everything about the cell that is not the level: scene, servo gains, sensor noise.

    depth_noise: the depth sensor model of each camera by name; a camera not listed (and every
    camera when None) returns the rendered depth unchanged. The ideal default is for unit
    tests; from_config turns the configured sensors on.
    """

    scene: SceneOptions = SceneOptions()
    gains: ServoGains = ServoGains()
    wrench_noise: WrenchNoise = WrenchNoise()
    control_dt: float = 0.02  # 50 Hz controller tick (docs/cell.md §3.9)
    depth_noise: Mapping[str, DepthNoise] | None = None

    @classmethod
    def from_config(cls, cell: CellConfig, *, sleep: bool | None = None) -> CellOptions:
        """From configs/cell.yaml (palletizer.core.config.Config.cell): physics, cameras and
        their depth sensors, wrench noise.

        `sleep` overrides physics.sleep (island sleeping) when given.
        """
        phys = cell.physics
        scene = SceneOptions(
            timestep=phys.timestep,
            integrator=phys.integrator,
            cone=phys.cone,
            gravity=phys.gravity,
            sleep=phys.sleep if sleep is None else sleep,
            aux_table=AuxTableParams.from_config(cell.tables.auxiliary),
            cameras=camera_specs(cell.cameras),
        )
        noise: dict[str, DepthNoise] = {}
        for name, cam in cell.cameras.items():
            model = DepthNoise.from_config(cam.depth_noise)
            if model is not None:
                noise[name] = model
        return cls(
            scene=scene,
            wrench_noise=WrenchNoise.from_config(cell.wrench),
            depth_noise=noise or None,
        )


@dataclass(frozen=True)
class CartonTruth:
    """Ground truth of one carton: centre (3,) [m], quat (4,) (w x y z), lid centre (3,) [m]."""

    package_id: str
    index: int
    pos: np.ndarray
    quat: np.ndarray
    lid: np.ndarray
    dims: tuple[float, float, float]


@dataclass(frozen=True)
class GroundTruth:
    """Referee snapshot: time [s], cartons by id, pallet body pose (box centre: deck top is
    0.072 m above it), held carton id, TCP position [m]."""

    time: float
    cartons: dict[str, CartonTruth]
    pallet_pos: np.ndarray
    pallet_quat: np.ndarray
    held: str | None
    tcp_pos: np.ndarray


SourceFactory = Callable[[Any, int], Any]


def _default_source_factory(level: Any, seed: int) -> Any:
    """The sources package's factory for a level config (owned by the sources module)."""
    try:
        from palletizer.sim.sources import make_source
    except ImportError as exc:
        raise CellError(
            f'no source factory for level {getattr(level, "id", level)!r}: '
            'palletizer.sim.sources.make_source is not available; pass source= or cartons='
        ) from exc
    from palletizer.core.config import load_config

    # The calibrated cell (configs/cell.yaml) sizes the sources: conveyor, tables, truck bay.
    return make_source(level, seed, cell=load_config().cell)


def _box_dims(half_size: np.ndarray) -> tuple[float, float, float]:
    """Full sizes [m] of a box geom from its MuJoCo half sizes (3,)."""
    L, W, H = (2.0 * float(v) for v in half_size)
    return (L, W, H)


class Cell:
    """The simulated palletizing cell. It implements StepWorld (model, data, time, step).

    The world advances only inside step(), track(), settle(), a source's present() and the
    stability trials. Same (level, seed, calls) -> same state.
    """

    def __init__(
        self,
        level: Any = None,
        seed: int = 0,
        *,
        source: Any = None,
        cartons: Sequence[CartonPlacement] = (),
        options: CellOptions = CellOptions(),
        source_factory: SourceFactory | None = None,
    ) -> None:
        self.options = options
        self._factory = source_factory or _default_source_factory
        self._rig: CameraRig | None = None
        self._explicit_source = source
        self._cartons = tuple(cartons)
        self.reset(level, seed)

    # Construction ----------------------------------------------------------------------------
    def reset(self, level: Any = None, seed: int | None = None) -> None:
        """Rebuild the world from scratch for `level` (a level config or None) and `seed`.

        A level's source is built anew by the factory. A `source=` object given to the
        constructor is reused as it is, so only level-built cells reset their source state.
        """
        self.close()
        self.level = level
        self.seed = int(seed if seed is not None else getattr(self, 'seed', 0))
        if self._explicit_source is not None:
            self.source = self._explicit_source
        elif level is not None:
            self.source = self._factory(level, self.seed)
        else:
            self.source = None
        decor = getattr(level, 'decor', 'cell') if level is not None else 'cell'
        xml = build_scene_xml(self.source, self._cartons, self.options.scene, decor=decor)
        self.xml = xml
        scene = self.options.scene
        self._model = compile_scene(scene_spec(xml, scene.arm, scene.gripper))
        self._data = mujoco.MjData(self._model)
        mujoco.mj_resetDataKeyframe(self._model, self._data, self._model.key('home').id)
        mujoco.mj_forward(self._model, self._data)
        m = self._model
        self._ids: dict[int, str] = {p.draw.index: p.draw.package_id for p in self._cartons}
        if level is not None:
            from palletizer.core.loads import draw_load

            for draw in draw_load(level.id, self.seed):
                self._ids.setdefault(draw.index, draw.package_id)
        self._indices = package_indices(xml)
        self._dims = {
            i: _box_dims(m.geom_size[m.geom(f'package_geom_{i}').id]) for i in self._indices
        }
        self.servo = Servo(
            m,
            self._data,
            gains=self.options.gains,
            arm=self.options.scene.arm,
            gripper=self.options.scene.gripper,
        )
        self.servo.hold()
        self.suction = Suction(m, self._data, self.options.scene.gripper)
        self._wrench = WrenchSensor(m, self._data, self.options.wrench_noise, seed=self.seed)
        self._pallet_q = np.array([m.joint(j).qposadr[0] for j in PALLET_JOINTS])
        self._pallet_d = np.array([m.joint(j).dofadr[0] for j in PALLET_JOINTS])
        self._pallet_body = m.body('pallet').id
        self._pallet_anchor = m.eq('pallet_anchor').id
        self._gripper = m.body('gripper').id
        self._tcp = m.site('tcp').id
        self._arm_q = np.array([m.joint(j).qposadr[0] for j in ARM_JOINTS])
        self._arm_d = np.array([m.joint(j).dofadr[0] for j in ARM_JOINTS])
        self._before: list[Callable[[mujoco.MjModel, mujoco.MjData], None]] = []
        if self.source is not None:
            self.source.bind(m, self._data)

    def close(self) -> None:
        """Release the renderers (GL contexts)."""
        if self._rig is not None:
            self._rig.close()
            self._rig = None

    # StepWorld -------------------------------------------------------------------------------
    @property
    def model(self) -> mujoco.MjModel:
        """The compiled model."""
        return self._model

    @property
    def data(self) -> mujoco.MjData:
        """The live data."""
        return self._data

    @property
    def time(self) -> float:
        """Simulated time [s]."""
        return float(self._data.time)

    @property
    def dt(self) -> float:
        """Physics timestep [s]."""
        return float(self._model.opt.timestep)

    def step(self, n: int = 1) -> None:
        """Advance `n` physics steps: source hooks, servo law, then mj_step, each step."""
        m, d = self._model, self._data
        src = self.source
        for _ in range(int(n)):
            if src is not None:
                src.before_step(m, d)
            for hook in self._before:
                hook(m, d)
            self.servo.apply()
            mujoco.mj_step(m, d)

    def add_before_step(self, hook: Callable[[mujoco.MjModel, mujoco.MjData], None]) -> None:
        """Register a hook run before every physics step (pallet drivers of the trials)."""
        self._before.append(hook)

    def remove_before_step(self, hook: Callable[[mujoco.MjModel, mujoco.MjData], None]) -> None:
        """Unregister a hook added with add_before_step."""
        self._before.remove(hook)

    # Arm -------------------------------------------------------------------------------------
    @property
    def q(self) -> np.ndarray:
        """Arm joint positions (6,) [rad]."""
        return self._data.qpos[self._arm_q].copy()

    def joint_state(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Arm positions [rad], velocities [rad/s] and applied motor torques [N m], each (6,)."""
        d = self._data
        return (
            d.qpos[self._arm_q].copy(),
            d.qvel[self._arm_d].copy(),
            d.qfrc_actuator[self._arm_d].copy(),
        )

    def tcp_pose(self) -> tuple[np.ndarray, np.ndarray]:
        """TCP position (3,) [m] and rotation (3, 3) in the world (after the last step)."""
        d = self._data
        return d.site_xpos[self._tcp].copy(), d.site_xmat[self._tcp].reshape(3, 3).copy()

    def track(self, traj: Trajectory, *, speed: float = 1.0) -> TrackResult:
        """Execute a joint trajectory. speed 0 = fast-forward (arm set at the last sample, held).

        In fast-forward the held carton moves with the tool at its sealed relative pose; no
        physics time passes. Otherwise the servo tracks the trajectory in lockstep.
        """
        if speed < 0:
            raise CellError(f'speed = {speed}; expected 0 (fast-forward) or > 0')
        if speed == 0:
            return self._jump(np.asarray(traj.q[-1], float))
        return self.servo.track(traj, self.step)

    def _jump(self, q: np.ndarray) -> TrackResult:
        m, d = self._model, self._data
        held = self.suction.held
        rel = None
        if held is not None:
            eq = m.eq_data[m.eq(f'suction_{held}').id]
            rel = (eq[3:6].copy(), eq[6:10].copy())
        d.qpos[self._arm_q] = q
        d.qvel[self._arm_d] = 0.0
        mujoco.mj_kinematics(m, d)
        if rel is not None:
            jnt = m.joint(f'package_joint_{held}')
            a, v = int(jnt.qposadr[0]), int(jnt.dofadr[0])
            Rg = d.xmat[self._gripper].reshape(3, 3)
            d.qpos[a : a + 3] = d.xpos[self._gripper] + Rg @ rel[0]
            quat = np.zeros(4)
            mujoco.mju_mulQuat(quat, d.xquat[self._gripper], rel[1])
            d.qpos[a + 3 : a + 7] = quat
            d.qvel[v : v + 6] = 0.0
        mujoco.mj_forward(m, d)
        self.servo.hold(q)
        zero = np.zeros(6)
        return TrackResult(0.0, 0, zero, 0.0, 0.0, zero, 0)

    # Source ----------------------------------------------------------------------------------
    def present(self) -> Any:
        """Let the source deliver its next carton at rest (physics runs meanwhile); None if none."""
        if self.source is None:
            raise CellError('this cell has no source; build it with a level or source=')
        return self.source.present(self)

    def release(self, package_id: str) -> None:
        """Tell the source the arm took `package_id` (or gave up on it)."""
        if self.source is None:
            raise CellError('this cell has no source; build it with a level or source=')
        self.source.release(package_id)

    # Gripper and wrench ----------------------------------------------------------------------
    def set_vacuum(self, on: bool) -> SealResult:
        """Switch the vacuum (the SetIO digital out); the servo feed-forward follows the load."""
        res = self.suction.set_vacuum(on)
        if res.status is SealStatus.SEALED:
            payload = self.suction.payload()
            assert payload is not None
            self.servo.set_payload(*payload)
        elif res.status is SealStatus.RELEASED:
            self.servo.clear_payload()
        return res

    def package_id(self, index: int) -> str:
        """Package id of carton `index`."""
        return self._ids.get(index, f'package_{index}')

    def wrench(self) -> Wrench:
        """One wrist F/T sample in the flange frame, with the configured noise and bias."""
        return self._wrench.read()

    def zero_wrench(self) -> None:
        """Zero the wrist F/T sensor (the UR controller's zero_ftsensor)."""
        self._wrench.zero()

    # Time ------------------------------------------------------------------------------------
    def settle(self, seconds: float) -> None:
        """Simulate `seconds` [s] with the arm holding its reference."""
        self.step(int(round(seconds / self.dt)))

    # Cameras ---------------------------------------------------------------------------------
    def capture(
        self,
        cameras: Iterable[str],
        width: int = 640,
        height: int = 480,
        *,
        rgb: bool = True,
        depth: bool = True,
    ) -> dict[str, Frame]:
        """RGB and planar depth [m] of the named cameras, with intrinsics and pose.

        Depth is what each camera's sensor model (CellOptions.depth_noise) makes of the
        render: 0 marks a lost return. The noise is keyed by (seed, physics step, camera), so
        the bridge and an in-process run capturing at the same instant get the same image.
        """
        if self._rig is None:
            self._rig = CameraRig(self._model)
        mujoco.mj_kinematics(self._model, self._data)
        frames = self._rig.capture(self._data, cameras, width, height, rgb=rgb, depth=depth)
        models = self.options.depth_noise or {}
        step = int(round(self.time / self.dt))
        for name, f in frames.items():
            model = models.get(name)
            if model is None or f.depth is None:
                continue
            rng = np.random.default_rng(noise_key(self.seed, step, name))
            noisy = apply_depth_noise(f.depth, model, f.intrinsics.K, rng)
            frames[name] = replace(f, depth=noisy)
        return frames

    # Pallet ----------------------------------------------------------------------------------
    @property
    def pallet_anchored(self) -> bool:
        """True while the pallet weld holds the pallet to the world."""
        return bool(self._data.eq_active[self._pallet_anchor])

    def set_pallet_anchor(self, on: bool) -> None:
        """Weld (on) or free (off) the pallet."""
        self._data.eq_active[self._pallet_anchor] = 1 if on else 0

    # Referee ---------------------------------------------------------------------------------
    def carton_indices(self) -> tuple[int, ...]:
        """Indices of every carton in the scene."""
        return tuple(self._indices)

    def ground_truth(self) -> GroundTruth:
        """Snapshot of carton and pallet poses (for the referee and oracles only)."""
        m, d = self._model, self._data
        mujoco.mj_kinematics(m, d)
        out: dict[str, CartonTruth] = {}
        for i in self._indices:
            b = m.body(f'package_{i}').id
            pid = self.package_id(i)
            out[pid] = CartonTruth(
                pid,
                i,
                d.xpos[b].copy(),
                d.xquat[b].copy(),
                d.site_xpos[m.site(f'package_lid_{i}').id].copy(),
                self._dims[i],
            )
        held = self.suction.held
        return GroundTruth(
            time=self.time,
            cartons=out,
            pallet_pos=d.xpos[self._pallet_body].copy(),
            pallet_quat=d.xquat[self._pallet_body].copy(),
            held=None if held is None else self.package_id(held),
            tcp_pos=d.site_xpos[self._tcp].copy(),
        )

    def state_digest(self) -> bytes:
        """Bytes of time, qpos, qvel and act: equal digests mean identical physical states."""
        d = self._data
        return np.array([d.time]).tobytes() + d.qpos.tobytes() + d.qvel.tobytes() + d.act.tobytes()

    # Stability -------------------------------------------------------------------------------
    def stability_trials(self, protocol: Any = None) -> Any:
        """Run the stability protocol (by default configs/stability.yaml's: 15 jolts, 2 beams,
        EUMOS); see sim/stability.py."""
        from palletizer.core.config import load_config
        from palletizer.sim.stability import StabilityProtocol, run_protocol

        return run_protocol(
            self, protocol or StabilityProtocol.from_config(load_config().stability)
        )
