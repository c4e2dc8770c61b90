"""The cell bridge's own services in the lockstep profile, which a real cell does not offer.

~/reset to a level and seed, ~/present the next carton, ~/release it, ~/settle, ~/capture the
cameras, ~/run_stability trials and ~/ground_truth: each converts its messages and calls the
cell under the bridge's lock. In the hardware profile the node serves them only to refuse, by
name (nodes/cell_hardware.py).
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
from geometry_msgs.msg import Pose
from palletizer_msgs.msg import CartonTruth, SourceState
from palletizer_msgs.srv import (
    Capture,
    GroundTruth,
    PresentCarton,
    ReleaseCarton,
    ResetCell,
    RunStability,
    Settle,
)

from palletizer.bridge import carton_records
from palletizer.core.config import CameraConfig, Config, Level
from palletizer.core.errors import PalletizerError
from palletizer.core.loads import CartonDraw
from palletizer.nodes.cell_hardware import CameraPublisher, HardwareWorld
from palletizer.nodes.cell_streams import CellStreams, stamp
from palletizer.sim.cameras import Frame
from palletizer.sim.cell import Cell
from palletizer.sim.stability import StabilityProtocol

__all__ = ['CellOwner', 'LockstepServices', 'refusal']


class CellOwner(Protocol):
    """What the services use of the cell bridge node (nodes/cell_bridge.py)."""

    cfg: Config
    cell: Cell
    lock: threading.Lock
    level: Level
    draws: dict[str, CartonDraw]
    presented: str | None
    cameras: dict[str, CameraConfig]
    pallet_cams: list[str]
    joints: tuple[str, ...]
    images: CameraPublisher
    streams: CellStreams

    def reset_cell(self, level: int, seed: int) -> str:
        """Lay out (level, seed); '' or why not."""

    def render(self, names: list[str]) -> dict[str, Frame]:
        """Frames of the named cameras now."""


def refusal(world: HardwareWorld, name: str) -> Callable[[Any, Any], Any]:
    """The handler of service `name` (~/...) in the hardware profile: a refusal, counted."""
    return lambda _req, res: world.refuse(f'/cell_bridge/{name[2:]}', res)


class LockstepServices:
    """The handlers of the cell services, on the cell of `node`."""

    def __init__(self, node: CellOwner) -> None:
        self.node = node

    def on_reset(self, req: ResetCell.Request, res: ResetCell.Response) -> ResetCell.Response:
        n = self.node
        with n.lock:
            err = n.reset_cell(req.level, req.seed)
        if err:
            res.error_code, res.error_msg = ResetCell.Response.UNKNOWN_LEVEL, err
            res.stamp = stamp(n.cell.time)
            return res
        res.n_cartons, res.source = len(n.cell.carton_indices()), n.level.source
        res.stamp = stamp(n.cell.time)
        return res

    def on_present(
        self, req: PresentCarton.Request, res: PresentCarton.Response
    ) -> PresentCarton.Response:
        n = self.node
        with n.lock:
            got = n.cell.present()
            st = n.cell.source.state()
            res.forecast = list(n.cell.source.forecast())
            n.streams.publish_state()
        res.state = SourceState(
            source=st.kind,
            pending=st.pending,
            exhausted=st.exhausted,
            jammed=st.jammed,
            extras_json=json.dumps(dict(st.extras)),
        )
        if got is None:
            R = PresentCarton.Response
            res.error_code = R.JAMMED if st.jammed else R.EXHAUSTED
            res.error_msg = 'a carton never came to rest' if st.jammed else 'nothing left'
            res.stamp = stamp(n.cell.time)
            return res
        n.presented = res.package_id = got.package_id
        res.stamp = stamp(n.cell.time)
        return res

    def on_release(
        self, req: ReleaseCarton.Request, res: ReleaseCarton.Response
    ) -> ReleaseCarton.Response:
        n = self.node
        if req.package_id != n.presented:
            res.error_code = ReleaseCarton.Response.NOT_PRESENTED
            res.error_msg = f'package_id {req.package_id!r}; presented: {n.presented!r}'
            res.stamp = stamp(n.cell.time)
            return res
        with n.lock:
            n.cell.release(req.package_id)
            n.presented = None
        res.stamp = stamp(n.cell.time)
        return res

    def on_settle(self, req: Settle.Request, res: Settle.Response) -> Settle.Response:
        n = self.node
        if not (0.0 <= req.duration <= 600.0):  # NaN fails the comparison too
            res.error_code = Settle.Response.INVALID_REQUEST
            res.error_msg = f'duration = {req.duration} s; expected 0 to 600 s of sim time'
            res.stamp = stamp(n.cell.time)
            return res
        with n.lock:
            n.cell.settle(req.duration)
            n.streams.publish_state()
            speeds = [
                float(np.linalg.norm(n.cell.data.qvel[a : a + 3]))
                for a in (
                    n.cell.model.joint(f'package_joint_{i}').dofadr[0]
                    for i in n.cell.carton_indices()
                )
            ]
        res.max_speed = max(speeds, default=0.0)
        res.stamp = stamp(n.cell.time)
        return res

    def on_capture(self, req: Capture.Request, res: Capture.Response) -> Capture.Response:
        n = self.node
        names = list(req.cameras) or n.pallet_cams
        bad = [c for c in names if c not in n.cameras]
        if bad:
            res.error_code = Capture.Response.UNKNOWN_CAMERA
            res.error_msg = f'camera {bad[0]!r}; valid cameras: {", ".join(n.cameras)}'
            return res
        with n.lock:
            # The joint state of the capture instant: depth fusion filters the arm out with it.
            n.streams.publish_kinematics()
            frames = n.render(names)
            res.stamp = stamp(n.cell.time)
            q, _, _ = n.cell.joint_state()
            res.joint_names, res.joint_positions = list(n.joints), q.tolist()
        n.images.publish(frames, res.stamp)
        return res

    def on_stability(
        self, req: RunStability.Request, res: RunStability.Response
    ) -> RunStability.Response:
        n = self.node
        R = RunStability.Response
        if not (req.jolts or req.beam or req.eumos):
            res.error_code = R.INVALID_REQUEST
            res.error_msg = 'no trial selected: set jolts, beam or eumos'
            return res
        proto = StabilityProtocol.from_config(
            n.cfg.stability, jolts=req.jolts, beam=req.beam, eumos=req.eumos
        )
        try:
            with n.lock:
                held = n.cell.suction.held
                if held is None:
                    report = n.cell.stability_trials(proto)
                    n.streams.publish_state()
        except PalletizerError as exc:
            res.error_code, res.error_msg = R.TRIALS_FAILED, str(exc)
            return res
        if held is not None:
            res.error_code = R.CARTON_HELD
            res.error_msg = (
                f'carton {n.cell.package_id(held)!r} is on the cups; place or release it '
                'before the stability trials'
            )
            return res
        res.held_all = all(t.held for t in report.trials)
        res.summary_json = json.dumps(report.summary, default=float)
        res.detail_json = json.dumps([dataclasses.asdict(t) for t in report.trials], default=float)
        return res

    def on_ground_truth(
        self, req: GroundTruth.Request, res: GroundTruth.Response
    ) -> GroundTruth.Response:
        n = self.node
        with n.lock:
            gt = n.cell.ground_truth()
        res.stamp = stamp(gt.time)
        for c in carton_records(gt, n.draws):
            pose = Pose()
            pose.position.x, pose.position.y, pose.position.z = (float(v) for v in c.pos)
            o = pose.orientation
            o.w, o.x, o.y, o.z = (float(v) for v in c.quat)
            res.cartons.append(
                CartonTruth(
                    package_id=c.package_id,
                    type_name=c.type_name,
                    pose=pose,
                    dims_m=list(c.dims),
                    mass_kg=c.mass,
                    cog_offset_m=list(c.cog_offset),
                )
            )
        p = res.pallet
        p.position.x, p.position.y, p.position.z = (float(v) for v in gt.pallet_pos)
        p.orientation.w, p.orientation.x, p.orientation.y, p.orientation.z = (
            float(v) for v in gt.pallet_quat
        )
        res.held_package_id = gt.held or ''
        return res
