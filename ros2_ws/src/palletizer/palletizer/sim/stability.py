"""Physical stability trials of a loaded pallet: 15 transport jolts, 2 narrow beams, one EUMOS pull."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import mujoco
import numpy as np

from palletizer.core.config import StabilityConfig
from palletizer.core.errors import PalletizerError

__all__ = [
    'CartonShift',
    'StabilityError',
    'StabilityProtocol',
    'StabilityReport',
    'TrialResult',
    'run_protocol',
]

G = 9.81
_AXES = {'x': 0, 'y': 1, 'z': 2}


class StabilityError(PalletizerError):
    """The trials cannot run (a carton is held, an unknown axis)."""


@dataclass(frozen=True)
class StabilityProtocol:
    """Trial parameters (docs/measurement.md §7.5: the reference's jolts and beams, plus EUMOS
    40509). Runs build it from configs/stability.yaml with from_config; the defaults equal that
    file for unit tests (tests/sim/test_stability.py keeps them equal)."""

    levels_g: tuple[float, ...] = (0.05, 0.15, 0.30, 0.50, 0.80)
    axes: tuple[str, ...] = ('x', 'y', 'z')
    duration: float = 0.50  # [s] one full period of the jolt
    settle_seconds: float = 1.5
    hold_seconds: float = 0.5
    rest_seconds: float = 0.35
    max_shift_m: float = 0.030  # retained-load threshold
    beam: bool = True
    beam_height: float = 0.05  # must match the compiled beam (sim/pallet.py)
    beam_settle_seconds: float = 2.0
    max_tilt_deg: float = 8.0
    eumos: bool = True
    eumos_accel_g: float = 0.5
    eumos_ramp_s: float = 0.050  # 0.5 g reached within 50 ms (EUMOS 40509)
    eumos_hold_s: float = 0.30
    # Braking after the pull is gentle so it does not test the load a second time; the sled
    # travels about 1.3 m towards +X, where the cell has no furniture (docs/cell.md §3.3).
    eumos_brake_g: float = 0.15
    eumos_axis: str = 'x'
    eumos_max_displacement_m: float = 0.030

    @classmethod
    def from_config(
        cls, cfg: StabilityConfig, *, jolts: bool = True, beam: bool = True, eumos: bool = True
    ) -> StabilityProtocol:
        """The protocol of configs/stability.yaml (Config.stability); each trial family can be
        left out (jolts: no axes)."""
        j, b, e = cfg.jolts, cfg.beam, cfg.eumos
        return cls(
            levels_g=j.levels_g,
            axes=j.axes if jolts else (),
            duration=j.duration,
            settle_seconds=j.settle_seconds,
            hold_seconds=j.hold_seconds,
            rest_seconds=j.rest_seconds,
            max_shift_m=j.max_shift_m,
            beam=beam,
            beam_height=b.height,
            beam_settle_seconds=b.settle_seconds,
            max_tilt_deg=b.max_tilt_deg,
            eumos=eumos,
            eumos_accel_g=e.accel_g,
            eumos_ramp_s=e.ramp_s,
            eumos_hold_s=e.hold_s,
            eumos_max_displacement_m=e.max_displacement_m,
        )


@dataclass(frozen=True)
class CartonShift:
    """One carton after a trial, relative to the pallet: displacement, horizontal shift, drop [m],
    tilt [deg], fell off."""

    package_id: str
    displacement: float
    shift: float
    drop: float
    tilt_deg: float
    fell: bool


@dataclass(frozen=True)
class TrialResult:
    """One trial: kind jolt|beam|eumos, axis, peak [g], held, score [0-100], per-carton shifts."""

    kind: str
    axis: str
    peak_g: float
    held: bool
    score: float
    max_displacement: float
    fell: tuple[str, ...]
    cartons: tuple[CartonShift, ...]
    pallet_travel: float = 0.0
    extras: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class StabilityReport:
    """All trials, a summary, and how well the baseline came back [m]."""

    trials: tuple[TrialResult, ...]
    summary: dict[str, Any]
    restore_error_m: float
    anchored_after: bool


class _World(Protocol):
    @property
    def model(self) -> mujoco.MjModel: ...
    @property
    def data(self) -> mujoco.MjData: ...
    def step(self, n: int = 1) -> None: ...
    def add_before_step(self, hook: Callable[[mujoco.MjModel, mujoco.MjData], None]) -> None: ...
    def remove_before_step(
        self, hook: Callable[[mujoco.MjModel, mujoco.MjData], None]
    ) -> None: ...
    def set_pallet_anchor(self, on: bool) -> None: ...
    def carton_indices(self) -> tuple[int, ...]: ...
    def package_id(self, index: int) -> str: ...
    @property
    def suction(self) -> Any: ...


class _Rig:
    """Ids and baseline of one world, plus the kinematic pallet driver."""

    def __init__(self, world: _World) -> None:
        m = world.model
        self.w, self.m, self.d = world, m, world.data
        self.dt = float(m.opt.timestep)
        self.slide_q = np.array(
            [m.joint(n).qposadr[0] for n in ('pallet_x', 'pallet_y', 'pallet_z')]
        )
        self.slide_d = np.array(
            [m.joint(n).dofadr[0] for n in ('pallet_x', 'pallet_y', 'pallet_z')]
        )
        self.hinges = [m.joint(n).id for n in ('pallet_rx', 'pallet_ry')]
        self.hinge_q = np.array([m.jnt_qposadr[j] for j in self.hinges])
        self.hinge_range = m.jnt_range[self.hinges].copy()
        self.pallet = m.body('pallet').id
        self.beam = m.body('stability_beam').mocapid[0]
        self.beam_geom = m.geom('stability_beam_geom').id
        self.beam_rgba = m.geom_rgba[self.beam_geom].copy()
        self.beam_park = self.d.mocap_pos[self.beam].copy()
        self.pallet_half = m.geom_size[m.geom('pallet_geom').id].copy()
        self.cartons = [
            (i, m.body(f'package_{i}').id, m.joint(f'package_joint_{i}').qposadr[0])
            for i in world.carton_indices()
        ]
        self.spec = int(mujoco.mjtState.mjSTATE_INTEGRATION)
        self.baseline = np.zeros(mujoco.mj_stateSize(m, self.spec))
        mujoco.mj_getState(m, self.d, self.baseline, self.spec)
        self.slide0 = self.d.qpos[self.slide_q].copy()

    def restore(self) -> None:
        """Baseline state back, keeping the clock; beam parked, hinges locked, weld on."""
        t = self.d.time
        mujoco.mj_setState(self.m, self.d, self.baseline, self.spec)
        self.d.time = t
        self.d.xfrc_applied[:] = 0.0
        self.m.jnt_range[self.hinges] = self.hinge_range
        self.d.mocap_pos[self.beam] = self.beam_park
        self.d.mocap_quat[self.beam] = (1.0, 0.0, 0.0, 0.0)
        self.m.geom_rgba[self.beam_geom] = self.beam_rgba
        mujoco.mj_forward(self.m, self.d)

    def relative_poses(self) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """Carton centre (3,) and rotation (3, 3) in the pallet frame."""
        mujoco.mj_kinematics(self.m, self.d)
        Rp = self.d.xmat[self.pallet].reshape(3, 3)
        pp = self.d.xpos[self.pallet]
        out = {}
        for i, b, _ in self.cartons:
            out[i] = (Rp.T @ (self.d.xpos[b] - pp), Rp.T @ self.d.xmat[b].reshape(3, 3))
        return out

    def drive(self, offsets: np.ndarray, velocities: np.ndarray) -> Callable[..., None]:
        """A before-step hook playing pallet slide offsets / velocities (n, 3) step by step."""
        k = [0]
        base = self.slide0
        n = len(offsets)

        def hook(m: mujoco.MjModel, d: mujoco.MjData) -> None:
            i = min(k[0], n - 1)
            d.qpos[self.slide_q] = base + offsets[i]
            d.qvel[self.slide_d] = velocities[i] if k[0] < n else 0.0
            k[0] += 1

        return hook


def _shifts(
    rig: _Rig, before: dict[int, tuple[np.ndarray, np.ndarray]], max_shift: float
) -> tuple[list[CartonShift], list[str]]:
    after = rig.relative_poses()
    half = rig.pallet_half
    out, fell = [], []
    for i, (p0, R0) in before.items():
        p1, R1 = after[i]
        dp = p1 - p0
        tilt = float(np.degrees(np.arccos(np.clip(((R0.T @ R1).trace() - 1) / 2, -1.0, 1.0))))
        # Off the deck: outside the footprint or below half the deck height
        # (docs/measurement.md §7.5).
        f = bool(abs(p1[0]) > half[0] or abs(p1[1]) > half[1] or p1[2] < half[2])
        pid = rig.w.package_id(i)
        out.append(
            CartonShift(
                pid,
                float(np.linalg.norm(dp)),
                float(np.linalg.norm(dp[:2])),
                float(-dp[2]),
                tilt,
                f,
            )
        )
        if f:
            fell.append(pid)
    return out, fell


def _score(cartons: list[CartonShift], fell: list[str], max_shift: float) -> tuple[bool, float]:
    worst = max((c.displacement for c in cartons), default=0.0)
    if fell:
        return False, 0.0
    held = max((c.shift for c in cartons), default=0.0) <= max_shift
    score = float(np.clip(100.0 * (1.0 - worst / (2.0 * max_shift)), 0.0, 100.0))
    return held, round(score, 1)


def _jolt_profile(axis: int, peak_g: float, duration: float, dt: float):
    """x(t) = D/2 (1 - cos 2 pi t / T), peak acceleration peak_g g (mujoco-notes)."""
    w = 2 * np.pi / duration
    D = 2 * peak_g * G / (w * w)
    t = np.arange(1, int(round(duration / dt)) + 1) * dt
    off = np.zeros((t.size, 3))
    vel = np.zeros((t.size, 3))
    off[:, axis] = D / 2 * (1 - np.cos(w * t))
    vel[:, axis] = D / 2 * w * np.sin(w * t)
    return off, vel


def _eumos_profile(p: StabilityProtocol, dt: float):
    """Acceleration ramp to a in ramp_s, hold, ramp down, then a gentle brake to rest."""
    a, r, h, b = p.eumos_accel_g * G, p.eumos_ramp_s, p.eumos_hold_s, p.eumos_brake_g * G
    v_top = a * (h + r)
    t_brake = v_top / b
    total = 2 * r + h + t_brake
    t = np.arange(1, int(np.ceil(total / dt)) + 1) * dt
    acc = np.where(t < r, a * t / r, 0.0)
    acc = np.where((t >= r) & (t < r + h), a, acc)
    acc = np.where((t >= r + h) & (t < 2 * r + h), a * (1 - (t - r - h) / r), acc)
    acc = np.where(t >= 2 * r + h, -b, acc)
    vel = np.cumsum(acc) * dt
    # The brake stops exactly at zero velocity, never reversing.
    stop = int(np.argmax((t > 2 * r + h) & (vel <= 0))) or vel.size
    vel = vel[:stop].clip(min=0.0)
    off = np.cumsum(vel) * dt
    ax = _AXES[p.eumos_axis]
    o3 = np.zeros((vel.size, 3))
    v3 = np.zeros((vel.size, 3))
    o3[:, ax] = off
    v3[:, ax] = vel
    return o3, v3, float(acc.max() / G)


# Slide armature while the pallet is driven [kg]: the pallet becomes effectively immovable by
# contacts and gravity between the per-step overwrites, so the load feels exactly the profile.
_DRIVEN_ARMATURE = 1e7


def _run_driven(rig: _Rig, off: np.ndarray, vel: np.ndarray, settle: float) -> None:
    hook = rig.drive(off, vel)
    saved = rig.m.dof_armature[rig.slide_d].copy()
    rig.w.add_before_step(hook)
    try:
        rig.m.dof_armature[rig.slide_d] = _DRIVEN_ARMATURE
        rig.w.set_pallet_anchor(False)
        rig.w.step(len(off))
        rig.w.step(int(round(settle / rig.dt)))
    finally:
        rig.w.remove_before_step(hook)
        rig.m.dof_armature[rig.slide_d] = saved


def _beam_trial(rig: _Rig, p: StabilityProtocol, axis: str) -> TrialResult:
    m, d = rig.m, rig.d
    lift = p.beam_height + 0.003
    before = rig.relative_poses()
    rig.w.set_pallet_anchor(False)
    d.qpos[rig.slide_q[2]] += lift
    for _, _, qa in rig.cartons:
        d.qpos[qa + 2] += lift
    m.jnt_range[rig.hinges] = np.array([[-1.6, 1.6], [-1.6, 1.6]])
    cx, cy = rig.beam_park[:2]
    d.mocap_pos[rig.beam] = (cx, cy, p.beam_height / 2)
    # The compiled ridge runs along X; turn it 90 deg for the Y trial.
    d.mocap_quat[rig.beam] = (
        (1, 0, 0, 0) if axis == 'x' else (np.cos(np.pi / 4), 0, 0, np.sin(np.pi / 4))
    )
    mujoco.mj_forward(m, d)
    rig.w.step(int(round(p.beam_settle_seconds / rig.dt)))
    cartons, fell = _shifts(rig, before, p.max_shift_m)
    tilt = np.degrees(np.abs(d.qpos[rig.hinge_q]))
    pallet_bottom = d.xpos[rig.pallet][2] - rig.pallet_half[2]
    seated = bool(pallet_bottom > 0.35 * p.beam_height)
    held = seated and not fell and bool(np.all(tilt <= p.max_tilt_deg))
    worst = max((c.displacement for c in cartons), default=0.0)
    score = (
        0.0
        if not held
        else round(float(np.clip(100 * (1 - worst / (2 * p.max_shift_m)), 0, 100)), 1)
    )
    return TrialResult(
        'beam',
        axis,
        0.0,
        held,
        score,
        worst,
        tuple(fell),
        tuple(cartons),
        extras={
            'tilt_x_deg': float(tilt[0]),
            'tilt_y_deg': float(tilt[1]),
            'seated': float(seated),
        },
    )


def run_protocol(world: _World, p: StabilityProtocol = StabilityProtocol()) -> StabilityReport:
    """Run jolts, beams and the EUMOS pull on the current stack, then restore the baseline.

    Physics is advanced through `world.step` so the arm servo keeps holding. The pallet is
    driven kinematically through its slide joints (no mocap teleport: the cartons feel the
    inertial load) with its weld released; each trial starts from the same captured baseline.
    """
    if world.suction.held is not None:
        raise StabilityError('a carton is still held; release it before the stability trials')
    for ax in p.axes + (p.eumos_axis,):
        if ax not in _AXES:
            raise StabilityError(f'axis {ax!r} is not one of x, y, z')
    # Sleeping islands would ignore the driven pallet: trials run with sleep off (which wakes
    # every body) and the option comes back afterwards.
    sleep_bit = int(mujoco.mjtEnableBit.mjENBL_SLEEP)
    slept = bool(world.model.opt.enableflags & sleep_bit)
    world.model.opt.enableflags &= ~sleep_bit
    try:
        return _run(world, p)
    finally:
        if slept:
            world.model.opt.enableflags |= sleep_bit


def _run(world: _World, p: StabilityProtocol) -> StabilityReport:
    world.set_pallet_anchor(True)
    world.step(int(round(p.hold_seconds / world.model.opt.timestep)))
    rig = _Rig(world)
    rest = int(round(p.rest_seconds / rig.dt))
    trials: list[TrialResult] = []
    for axis in p.axes:
        for g in p.levels_g:
            rig.restore()
            world.step(rest)
            before = rig.relative_poses()
            off, vel = _jolt_profile(_AXES[axis], g, p.duration, rig.dt)
            _run_driven(rig, off, vel, p.settle_seconds)
            cartons, fell = _shifts(rig, before, p.max_shift_m)
            held, score = _score(cartons, fell, p.max_shift_m)
            worst = max((c.displacement for c in cartons), default=0.0)
            trials.append(
                TrialResult(
                    'jolt',
                    axis,
                    g,
                    held,
                    score,
                    worst,
                    tuple(fell),
                    tuple(cartons),
                    float(np.abs(off[:, _AXES[axis]]).max()),
                )
            )
    if p.beam:
        for axis in ('x', 'y'):
            rig.restore()
            world.step(rest)
            trials.append(_beam_trial(rig, p, axis))
    if p.eumos:
        rig.restore()
        world.step(rest)
        before = rig.relative_poses()
        off, vel, peak = _eumos_profile(p, rig.dt)
        _run_driven(rig, off, vel, p.settle_seconds)
        cartons, fell = _shifts(rig, before, p.eumos_max_displacement_m)
        worst = max((c.displacement for c in cartons), default=0.0)
        held = not fell and worst <= p.eumos_max_displacement_m
        score = (
            0.0
            if fell
            else round(
                float(np.clip(100 * (1 - worst / (2 * p.eumos_max_displacement_m)), 0, 100)), 1
            )
        )
        trials.append(
            TrialResult(
                'eumos',
                p.eumos_axis,
                peak,
                held,
                score,
                worst,
                tuple(fell),
                tuple(cartons),
                float(off[:, _AXES[p.eumos_axis]].max()),
            )
        )
    # Back to the palletizing state: baseline, weld on, a rest, then measure the restore.
    rig.restore()
    world.set_pallet_anchor(True)
    base = rig.relative_poses()
    base_pallet = rig.d.xpos[rig.pallet].copy()
    world.step(rest)
    after = rig.relative_poses()
    err = float(np.linalg.norm(rig.d.xpos[rig.pallet] - base_pallet))
    for i in base:
        err = max(err, float(np.linalg.norm(after[i][0] - base[i][0])))
    anchored = bool(rig.d.eq_active[world.model.eq('pallet_anchor').id])
    return StabilityReport(tuple(trials), _summary(trials, p), err, anchored)


def _summary(trials: list[TrialResult], p: StabilityProtocol) -> dict[str, Any]:
    jolts = [t for t in trials if t.kind == 'jolt']
    out: dict[str, Any] = {
        'held_all': all(t.held for t in jolts),
        'trial_count': len(jolts),
        'falls': sum(len(t.fell) for t in jolts),
        'fell_ids': sorted({pid for t in jolts for pid in t.fell}),
    }
    for ax in p.axes:
        ts = [t for t in jolts if t.axis == ax]
        held_g = [t.peak_g for t in ts if t.held]
        failed_g = [t.peak_g for t in ts if not t.held]
        out[f'{ax}_max_held_g'] = max(held_g) if held_g else 0.0
        out[f'{ax}_first_failure_g'] = min(failed_g) if failed_g else None
        out[f'{ax}_mean_score'] = round(float(np.mean([t.score for t in ts])), 1) if ts else None
        out[f'{ax}_min_score'] = min((t.score for t in ts), default=None)
    scores = [t.score for t in jolts]
    out['mean_score'] = round(float(np.mean(scores)), 1) if scores else None
    out['min_score'] = min(scores, default=None)
    wsum = sum(t.peak_g for t in jolts)
    out['weighted_score'] = (
        round(sum(t.score * t.peak_g for t in jolts) / wsum, 1) if wsum else None
    )
    beams = [t for t in trials if t.kind == 'beam']
    if beams:
        out['beam_held'] = {t.axis: t.held for t in beams}
    eumos = [t for t in trials if t.kind == 'eumos']
    if eumos:
        out['eumos_held'] = eumos[0].held
        out['eumos_max_displacement_mm'] = round(eumos[0].max_displacement * 1e3, 2)
    return out
