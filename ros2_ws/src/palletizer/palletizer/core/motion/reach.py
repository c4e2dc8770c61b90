"""Reach model of the tool-down UR10e: analytic (vectorised IK) and a precomputed lookup table.

Run `python -m palletizer.core.motion.reach OUT.npz [--summary OUT.yaml]` to build the table.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import platform
import sys
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np

from palletizer.core.contracts import EUR_DECK_Z
from palletizer.core.motion.errors import MotionError
from palletizer.core.motion.kinematics import (
    DH,
    TWO_PI,
    UR10eKinematics,
    arm_box_hits,
    branch_family,
    ik_batch,
    tool_down_batch,
    unwrap_rows,
    wrist_near_mount,
)

__all__ = ['AnalyticReach', 'ReachParams', 'ReachTable', 'build_reach_table', 'main']

_FORMAT = 1
# What np.load and the checks raise for a file that is not a readable reach table.
_UNREADABLE = (
    OSError,
    EOFError,
    ValueError,
    KeyError,
    TypeError,
    zipfile.BadZipFile,
    zlib.error,
    MotionError,
)


@dataclass(frozen=True)
class ReachParams:
    """What 'reachable' means for a tool-down TCP pose.

    A pose is reachable when an IK solution of the elbow-up, wrist-not-flipped family lies in
    the joint limits there AND on every sample of the vertical descent from the transit pose
    above it, following one analytic branch without a joint step above max_joint_step.
    transit_height / place_clearance [m]: the descent starts at max(transit_height, z + clearance)
    (docs/cell.md §3.11). descent_step [m]: sampling of that descent. min_radius [m]: optional
    horizontal dead ring around the base axis (0 = off); the reference measured holding failures
    inside 0.373-0.447 m (docs/levels.md §1.5, docs/planners.md §6.3) that pure kinematics does
    not show.
    """

    transit_height: float = 0.94
    place_clearance: float = 0.18
    descent_step: float = 0.02
    max_joint_step: float = 0.10
    min_radius: float = 0.0
    # The wrist must keep off the robot's mount, as MotionParams checks every planned sample
    # (pedestal_radius, base_radius, shoulder_height, link_radius there); 0 turns it off.
    pedestal_radius: float = 0.24
    base_radius: float = 0.095
    shoulder_height: float = 0.181
    link_radius: float = 0.075
    # The forearm and wrists must clear the furniture round the pallet, as MotionParams checks
    # every planned sample (CollisionWorld.arm_boxes, arm_margin): world boxes (x0, y0, z0,
    # x1, y1, z1) [m], one after another, 6 numbers each; () turns it off. The pick table
    # (cell.yaml tables.pick), which also covers the conveyor's end there: level 12 seeds 1 and
    # 11 placed at the pallet corner beside it and drove wrist 2 into its top edge. The
    # pedestal as the executor's box (robot.pedestal round robot.base_pos, static_boxes):
    # level 15 seed 47 planned three deck slots along the pallet's robot-side edge, the
    # executor refused each (the forearm would strike the pedestal) and the episode ended
    # wrong_placement with 2 of 12 placed. The auxiliary table (tables.auxiliary), beside the
    # pallet's -X edge.
    arm_box: tuple[float, ...] = (
        *(-0.56, -1.14, 0.0, 0.16, -0.46, 0.58),
        *(0.36, -0.96, 0.0, 0.84, -0.48, 0.48),
        *(-0.62, -0.43, 0.0, -0.12, 0.23, 0.58),
    )
    arm_margin: float = 0.015

    def __post_init__(self) -> None:
        if len(self.arm_box) % 6 or not all(math.isfinite(v) for v in self.arm_box):
            raise MotionError(
                f'ReachParams.arm_box = {self.arm_box!r}; expected () or 6 finite numbers '
                '(x0, y0, z0, x1, y1, z1) per box'
            )
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.name == 'arm_box':
                continue
            if not math.isfinite(v) or v < 0:
                raise MotionError(f'ReachParams.{f.name} = {v!r}; expected a finite value >= 0')
        if self.descent_step <= 0 or self.max_joint_step <= 0:
            raise MotionError('ReachParams.descent_step and max_joint_step must be > 0')


def _column_ok(
    kin: UR10eKinematics,
    x: np.ndarray,
    y: np.ndarray,
    z: np.ndarray,
    yaw: np.ndarray,
    max_step: float,
    params: ReachParams | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Per column (n columns of m samples each, arrays (n, m)) and branch: is every sample
    in-family, in limits and branch-continuous? Returns (n, m, 8) 'good so far from the top'
    is not assumed; instead returns good (n, m, 8) and step_ok (n, m - 1, 8)."""
    n, m = x.shape
    T = kin.to_base_flange(tool_down_batch(x.ravel(), y.ravel(), z.ravel(), yaw.ravel()))
    q, valid = ik_batch(T)
    q = q.reshape(n, m, 8, 6)
    valid = valid.reshape(n, m, 8)
    qz = np.where(valid[..., None], q, 0.0)
    qu = np.swapaxes(unwrap_rows(np.swapaxes(qz, 0, 1)), 0, 1)
    good = valid & branch_family(qu) & kin.limits.within(qu)
    if params is not None and params.link_radius > 0:
        near = wrist_near_mount(
            qu.reshape(-1, 6),
            params.pedestal_radius,
            params.base_radius,
            params.shoulder_height,
            params.link_radius,
        )
        good &= ~near.reshape(good.shape)
    if params is not None and params.arm_box:
        b = np.asarray(params.arm_box, dtype=float).reshape(-1, 6)
        hit = arm_box_hits(
            qu.reshape(-1, 6), kin.T_world_base, b[:, :3], b[:, 3:], params.arm_margin
        )
        good &= (hit < 0).reshape(good.shape)
    step_ok = np.abs(np.diff(qu, axis=1)).max(axis=-1) <= max_step
    return good, step_ok


class AnalyticReach:
    """ReachOracle from the analytic IK, evaluated on demand (vectorised over queries)."""

    def __init__(
        self, kinematics: UR10eKinematics | None = None, params: ReachParams | None = None
    ) -> None:
        self.kin = kinematics or UR10eKinematics()
        self.params = params or ReachParams()

    def reachable(
        self, x: np.ndarray, y: np.ndarray, z_tcp: np.ndarray, yaw: np.ndarray
    ) -> np.ndarray:
        """(N,) bool: tool-down TCP poses (world, [m], [rad]) reachable by a clean descent."""
        x, y, z, yaw = (np.asarray(v, dtype=float) for v in np.broadcast_arrays(x, y, z_tcp, yaw))
        shape = x.shape
        x, y, z, yaw = x.ravel(), y.ravel(), z.ravel(), yaw.ravel()
        out = np.zeros(x.size, dtype=bool)
        if x.size == 0:
            return out.reshape(shape)
        p = self.params
        top = np.maximum(p.transit_height, z + p.place_clearance)
        m = int(math.ceil(float(np.max(top - z)) / p.descent_step)) + 1
        u = np.linspace(0.0, 1.0, max(m, 2))[None, :]
        zz = top[:, None] + (z - top)[:, None] * u
        rep = (np.repeat(v[:, None], zz.shape[1], axis=1) for v in (x, y, yaw))
        xx, yy, ww = rep
        chunk = max(1, 20000 // zz.shape[1])
        for i in range(0, x.size, chunk):
            sl = slice(i, i + chunk)
            good, step_ok = _column_ok(
                self.kin, xx[sl], yy[sl], zz[sl], ww[sl], p.max_joint_step, p
            )
            ok = cast(np.ndarray, good.all(axis=1) & step_ok.all(axis=1))
            out[sl] = ok.any(axis=1)
        if p.min_radius > 0:
            bx, by = self.kin.base_xyz[:2]
            out &= np.hypot(x - bx, y - by) >= p.min_radius
        return out.reshape(shape)


@dataclass(frozen=True, eq=False)
class ReachTable:
    """Precomputed reachability on a grid, looked up conservatively.

    xs (nx,), ys (ny,), zs (nz,) [m] world TCP coordinates; yaws (nyaw,) [rad] in [0, 2 pi);
    ok (nyaw, nz, ny, nx) bool at the grid points; meta: how it was made. A query is reachable
    only if all 8 corners of its grid cell are; yaws within yaw_tol of a grid yaw use that yaw,
    others need both neighbouring grid yaws. Outside the grid nothing is reachable.
    """

    xs: np.ndarray
    ys: np.ndarray
    zs: np.ndarray
    yaws: np.ndarray
    ok: np.ndarray
    meta: dict[str, Any] = field(default_factory=dict)
    yaw_tol: float = math.radians(1.0)
    # Derived in __post_init__: ok for all 8 corners of each grid cell (nyaw, nz-1, ny-1, nx-1).
    _cell: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        ok = np.asarray(self.ok, dtype=bool)
        shape = (len(self.yaws), len(self.zs), len(self.ys), len(self.xs))
        if ok.shape != shape:
            raise MotionError(f'ReachTable.ok shape {ok.shape}; expected {shape}')
        for name in ('xs', 'ys', 'zs'):
            a = np.asarray(getattr(self, name), dtype=float)
            if len(a) < 2 or not np.allclose(np.diff(a), a[1] - a[0]) or a[1] <= a[0]:
                raise MotionError(f'ReachTable.{name} must be an increasing uniform grid (>= 2)')
        cell = ok[:, 1:, 1:, 1:] & ok[:, 1:, 1:, :-1] & ok[:, 1:, :-1, 1:] & ok[:, 1:, :-1, :-1]
        cell &= (
            ok[:, :-1, 1:, 1:] & ok[:, :-1, 1:, :-1] & ok[:, :-1, :-1, 1:] & ok[:, :-1, :-1, :-1]
        )
        object.__setattr__(self, 'ok', ok)
        object.__setattr__(self, '_cell', cell)

    @staticmethod
    def _index(grid: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Cell index along one axis and whether v lies on the grid span."""
        g0, step, n = float(grid[0]), float(grid[1] - grid[0]), len(grid)
        f = (v - g0) / step
        inside = (f >= -1e-9) & (f <= n - 1 + 1e-9)
        i = np.clip(np.floor(f + 1e-9).astype(int), 0, n - 2)
        return i, inside

    def reachable(
        self, x: np.ndarray, y: np.ndarray, z_tcp: np.ndarray, yaw: np.ndarray
    ) -> np.ndarray:
        """(N,) bool by conservative lookup; same meaning as AnalyticReach.reachable."""
        x, y, z, yaw = (np.asarray(v, dtype=float) for v in np.broadcast_arrays(x, y, z_tcp, yaw))
        ix, inx = self._index(self.xs, x)
        iy, iny = self._index(self.ys, y)
        iz, inz = self._index(self.zs, z)
        cell = self._cell
        yaws = np.asarray(self.yaws, dtype=float)
        w = np.mod(yaw, TWO_PI)
        d = np.abs(np.angle(np.exp(1j * (w[..., None] - yaws))))
        nearest = np.argmin(d, axis=-1)
        on_grid = np.take_along_axis(d, nearest[..., None], axis=-1)[..., 0] <= self.yaw_tol
        # Neighbouring grid yaws on either side of the query.
        order = np.argsort(yaws)
        ys_sorted = yaws[order]
        k = np.searchsorted(ys_sorted, w) % len(yaws)
        lo_yaw, hi_yaw = order[(k - 1) % len(yaws)], order[k]
        res = cell[nearest, iz, iy, ix]
        both = cell[lo_yaw, iz, iy, ix] & cell[hi_yaw, iz, iy, ix]
        return cast(np.ndarray, np.where(on_grid, res, both) & inx & iny & inz)

    def save(self, path: str | Path) -> None:
        """Write the table and its meta (JSON) to an NPZ file."""
        np.savez_compressed(
            path,
            xs=self.xs,
            ys=self.ys,
            zs=self.zs,
            yaws=self.yaws,
            ok=self.ok,
            meta=np.array(json.dumps(self.meta, sort_keys=True)),
        )

    @classmethod
    def load(cls, path: str | Path) -> ReachTable:
        """Read a table written by save(); MotionError (one line, naming the file and how to
        rebuild it) when the file is missing, unreadable or not a reach table."""
        rebuild = f'build it with python -m palletizer.core.motion.reach {path}'
        try:
            with np.load(path, allow_pickle=False) as f:
                meta = json.loads(str(f['meta']))
                fmt = meta.get('format') if isinstance(meta, dict) else None
                if fmt != _FORMAT:
                    raise MotionError(f'format {fmt!r}; expected {_FORMAT}')
                return cls(f['xs'], f['ys'], f['zs'], f['yaws'], f['ok'], meta)
        except FileNotFoundError:
            raise MotionError(f'{path}: reach table not found; {rebuild}') from None
        except _UNREADABLE as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            reason = reason.splitlines()[0] if reason else type(exc).__name__
            raise MotionError(
                f'{path}: not a reach table ({reason}); expected an .npz written by '
                f'ReachTable.save: {rebuild}'
            ) from None

    def coverage(self, deck_z: float) -> dict[str, Any]:
        """Per TCP height above the deck [m]: fraction of grid points reachable for every yaw,
        and the highest heights reached by the whole grid, 98 %, 90 % and any of it."""
        frac = self.ok.all(axis=0).mean(axis=(1, 2))
        full = [float(z - deck_z) for z, f in zip(self.zs, frac, strict=True) if f == 1.0]
        any_ = [float(z - deck_z) for z, f in zip(self.zs, frac, strict=True) if f > 0.0]

        def highest(level: float) -> float | None:
            hs = [float(z - deck_z) for z, f in zip(self.zs, frac, strict=True) if f >= level]
            return round(max(hs), 4) if hs else None

        return {
            'fraction_by_height': {
                f'{z - deck_z:.2f}': round(float(f), 4) for z, f in zip(self.zs, frac, strict=True)
            },
            'highest_full_height': round(max(full), 4) if full else None,
            'highest_height_98pct': highest(0.98),
            'highest_height_90pct': highest(0.90),
            'highest_any_height': round(max(any_), 4) if any_ else None,
        }


def build_reach_table(
    kinematics: UR10eKinematics | None = None,
    params: ReachParams | None = None,
    x_range: tuple[float, float, float] = (0.0, 1.2, 0.02),
    y_range: tuple[float, float, float] = (-0.4, 0.4, 0.02),
    z_range: tuple[float, float, float] = (EUR_DECK_Z + 0.05, EUR_DECK_Z + 1.40, 0.05),
    yaws_deg: tuple[float, ...] = (0.0, 90.0, 180.0, 270.0),
    column_step: float = 0.01,
) -> ReachTable:
    """Evaluate reachability on a grid (defaults: the pallet at 2 cm, deck +0.05..+1.40 at 5 cm).

    The lowest TCP height must lie under the release pose of the flattest carton on the deck
    (0.08 m, pouch_xs, plus cup gap and drop clearance): a table that began at deck + 0.10
    called every carton under 0.0965 m unreachable on the deck, off its grid.

    Each (x, y, yaw) column is solved once, densely (column_step [m]) from the highest transit
    pose down to the lowest z; a grid z is reachable when some branch is good on every sample
    of its own descent [z, max(transit, z + clearance)].
    """
    kin = kinematics or UR10eKinematics()
    p = params or ReachParams()

    def grid(r: tuple[float, float, float]) -> np.ndarray:
        n = int(round((r[1] - r[0]) / r[2])) + 1
        return r[0] + np.arange(n) * r[2]

    xs, ys, zs = grid(x_range), grid(y_range), grid(z_range)
    yaws = np.radians(np.asarray(yaws_deg, dtype=float)) % TWO_PI
    z_top = max(p.transit_height, float(zs[-1]) + p.place_clearance)
    m = int(math.ceil((z_top - zs[0]) / column_step)) + 1
    zc = z_top + (zs[0] - z_top) * np.linspace(0.0, 1.0, m)  # descending column samples
    # For each grid z: the sample indices of its descent [top(z), z] within the column.
    tops = np.maximum(p.transit_height, zs + p.place_clearance)
    i_top = np.searchsorted(-zc, -tops, side='right') - 1
    i_top = np.clip(i_top, 0, m - 1)
    i_z = np.argmin(np.abs(zc[None, :] - zs[:, None]), axis=1)
    gx, gy, gw = np.meshgrid(xs, ys, yaws, indexing='ij')
    gx, gy, gw = gx.ravel(), gy.ravel(), gw.ravel()
    ncol = gx.size
    ok = np.zeros((ncol, len(zs)), dtype=bool)
    chunk = max(1, 40000 // m)
    for i in range(0, ncol, chunk):
        sl = slice(i, i + chunk)
        n = gx[sl].size

        def rep(v: np.ndarray) -> np.ndarray:
            return np.repeat(v[:, None], m, axis=1)

        good, step_ok = _column_ok(
            kin,
            rep(gx[sl]),
            rep(gy[sl]),
            np.broadcast_to(zc, (n, m)),
            rep(gw[sl]),
            p.max_joint_step,
            p,
        )
        # Bad-sample and bad-step prefix counts give each descent's verdict in O(1).
        bad = np.concatenate([np.zeros((n, 1, 8)), np.cumsum(~good, axis=1)], axis=1)
        bads = np.concatenate([np.zeros((n, 1, 8)), np.cumsum(~step_ok, axis=1)], axis=1)
        n_bad = bad[:, i_z + 1] - bad[:, i_top]
        n_bad_step = bads[:, i_z] - bads[:, i_top]
        ok[sl] = ((n_bad == 0) & (n_bad_step == 0)).any(axis=-1)
    if p.min_radius > 0:
        bx, by = kin.base_xyz[:2]
        ok &= (np.hypot(gx - bx, gy - by) >= p.min_radius)[:, None]
    # (nx, ny, nyaw, nz) -> (nyaw, nz, ny, nx)
    ok = ok.reshape(len(xs), len(ys), len(yaws), len(zs)).transpose(2, 3, 1, 0)
    meta = {
        'format': _FORMAT,
        'generator': 'palletizer.core.motion.reach.build_reach_table',
        'params': {
            k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(p).items()
        },
        'grid': {
            'x_range': list(x_range),
            'y_range': list(y_range),
            'z_range': list(z_range),
            'yaws_deg': list(yaws_deg),
            'column_step': column_step,
        },
        'robot': {
            'base_xyz': list(kin.base_xyz),
            'base_yaw': kin.base_yaw,
            'tcp_offset': kin.tcp_offset,
            'dh': dict(DH),
            'lower': list(kin.limits.lower),
            'upper': list(kin.limits.upper),
        },
        'versions': {'numpy': np.__version__, 'python': platform.python_version()},
    }
    return ReachTable(xs, ys, zs, yaws, ok, meta)


def main(argv: list[str] | None = None) -> int:
    """CLI: build the default table, save it to OUT.npz, print (and optionally save) a summary."""
    ap = argparse.ArgumentParser(
        prog='python -m palletizer.core.motion.reach', description=__doc__
    )
    ap.add_argument('out', help='output .npz path')
    ap.add_argument('--summary', help='also write the summary as YAML to this path')
    ap.add_argument(
        '--deck-z', type=float, default=EUR_DECK_Z, help='deck top z [m] (docs/cell.md §3.2)'
    )
    ap.add_argument('--xy-step', type=float, default=0.02, help='grid step over the pallet [m]')
    ap.add_argument('--z-step', type=float, default=0.05, help='grid step in TCP height [m]')
    ap.add_argument(
        '--z-low',
        type=float,
        default=0.05,
        help='lowest TCP height above the deck [m]; below the flattest carton (0.08 m)',
    )
    args = ap.parse_args(argv)
    d = args.deck_z
    table = build_reach_table(
        x_range=(0.0, 1.2, args.xy_step),
        y_range=(-0.4, 0.4, args.xy_step),
        z_range=(d + args.z_low, d + 1.40, args.z_step),
    )
    table.save(args.out)
    summary = {'out': str(args.out), 'meta': table.meta, 'coverage': table.coverage(args.deck_z)}
    if args.summary:
        import yaml  # only the CLI writes YAML

        Path(args.summary).write_text(yaml.safe_dump(summary, sort_keys=False))
    json.dump(summary['coverage'], sys.stdout, indent=1)
    sys.stdout.write('\n')
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
