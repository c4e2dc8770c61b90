"""What the map remembers of one stack: cells out of sight now taken from an earlier fusion
where the cameras show them hidden, not changed (recall_hidden), and the record of what the
fusions of a stack have seen (MapMemory).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from palletizer.core.contracts import HeightMap, PalletGeometry
from palletizer.core.heightmap_fusion.robot import RobotBody
from palletizer.core.params.fusion import FusionError, FusionParams

__all__ = ['MapMemory', 'recall_hidden']


def _project(
    X: np.ndarray, T: np.ndarray, K: np.ndarray, shape: tuple[int, int], pad: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(u, v, planar depth z, inside) of world points X (N, 3) in a camera (T_world_optical,
    K); inside: in front and at least `pad` px inside an image of `shape` (H, W)."""
    pc = (X - T[:3, 3]) @ T[:3, :3]  # R^T (X - t)
    z = pc[:, 2]
    with np.errstate(divide='ignore', invalid='ignore'):
        u = K[0, 0] * pc[:, 0] / z + K[0, 2]
        v = K[1, 1] * pc[:, 1] / z + K[1, 2]
    H, W = shape
    inside = (z > 0) & (u >= pad) & (u < W - 1 - pad) & (v >= pad) & (v < H - 1 - pad)
    return u, v, z, inside


def recall_hidden(
    now: HeightMap,
    prev: HeightMap | None,
    views: Sequence[Any],
    params: FusionParams,
    pallet: PalletGeometry | None = None,
    body: RobotBody | None = None,
    q: np.ndarray | None = None,
    held_dims: Sequence[float] | None = None,
) -> tuple[HeightMap, int]:
    """(map, cells recalled): `now` with the cells it lacks and `prev` (an earlier fusion of the
    same stack) observed, taken from `prev` where the views show them hidden, not changed.

    Cartons are only added to a stack, so most cells that drop out of sight were covered from
    every camera by a carton placed beside them (the floor of a slot between two tall cartons,
    the rim of a lid round the carton standing on it). A persistent map keeps what it saw, as
    occupancy and TSDF maps do. Each camera is asked about the remembered point P (the cell's
    centre at its remembered height) through the depth at P's pixel (the median of the valid
    returns in the 3 x 3 window): deeper than P by more than recall_tol, the camera sees through
    where P was (the cell is lower now; a deck cell excepted, whose board gaps show the floor);
    nearer, something hides it, which tells nothing when it is the robot (the arm may hide a
    change). And each camera is asked about the cell's column above P (sampled every half
    cell): returns from within a quarter cell of the column's axis and recall_tol above P, off
    the robot, are something now standing on the cell (a carton whose lid edge the fusion's
    filters dropped); two pixels must show it, a single one may be a flying pixel. Either
    contradiction leaves the cell out; a cell is recalled when no camera contradicts it and
    at least one camera returned a depth at P's pixel from off the robot.
    """
    if prev is None or not params.recall:
        return now, 0
    if prev.shape != now.shape:
        raise FusionError(f'map shapes differ: now {now.shape}, earlier {prev.shape}')
    obs_now = np.asarray(now.observed)
    todo = np.asarray(prev.observed) & ~obs_now
    if not todo.any():
        return now, 0
    p = pallet or PalletGeometry()
    deck = p.deck_z
    cs = float(now.cell_size)
    iy, ix = np.nonzero(todo)
    P = np.stack(
        [
            now.origin[0] + (ix + 0.5) * cs,
            now.origin[1] + (iy + 0.5) * cs,
            p.deck_z + np.asarray(prev.cells)[iy, ix],
        ],
        axis=1,
    )
    bad = np.zeros(len(P), dtype=bool)
    told = np.zeros(len(P), dtype=bool)
    # The column over each cell, sampled every half cell from recall_tol above P to 5 cm over
    # the highest cell either map observed (a carton standing on the cell shows part of its
    # lid, which the fusion observes): returns found inside it are something standing on it.
    top = max(float(np.max(now.cells)), float(np.max(prev.cells))) + 0.05
    rise = np.arange(params.recall_tol, max(top, 2 * params.recall_tol), cs / 2)
    cols = P[:, None, :] + np.stack(
        [np.zeros_like(rise), np.zeros_like(rise), rise], axis=1
    )  # (N, K, 3)
    hits = [np.zeros((0, 3), np.int64)]
    for n_view, v in enumerate(views):
        T = np.asarray(v.T_world_optical, dtype=np.float64)
        K = np.asarray(v.K, dtype=np.float64)
        depth = np.asarray(v.depth)  # NaN (lost) fails the range tests below
        u, w, z, inside = _project(P, T, K, depth.shape, 1)
        if inside.any():
            k = np.flatnonzero(inside)
            r, c = np.round(w[k]).astype(np.int64), np.round(u[k]).astype(np.int64)
            win = np.stack(
                [depth[r + dr, c + dc] for dr in (-1, 0, 1) for dc in (-1, 0, 1)], axis=1
            ).astype(np.float64)
            valid = (win > params.depth_range[0]) & (win < params.depth_range[1])
            seen = valid.any(axis=1)
            d = np.nanmedian(np.where(valid, win, np.nan)[seen], axis=1)
            k, zk = k[seen], z[k][seen]
            # A return on the robot says nothing of the cell: the arm may hide a change.
            mine = np.zeros(len(k), dtype=bool)
            front = d < zk - params.recall_tol
            if body is not None and q is not None and front.any():
                Qf = T[:3, 3] + (P[k[front]] - T[:3, 3]) * (d[front] / zk[front])[:, None]
                mine[front] = body.contains(
                    Qf, np.asarray(q, float), held_dims, params.robot_margin
                )
            told[k[~mine]] = True
            # Through where P was, unless P is the deck: its board gaps show the floor below.
            raised = P[k, 2] > deck + params.recall_tol
            bad[k[(d > zk + params.recall_tol) & raised]] = True
        # Returns from inside each cell's column, above P.
        X = cols.reshape(-1, 3)
        u, w, z, inside = _project(X, T, K, depth.shape, 0)
        j = np.flatnonzero(inside)
        if j.size == 0:
            continue
        r, c = np.round(w[j]).astype(np.int64), np.round(u[j]).astype(np.int64)
        d = depth[r, c].astype(np.float64)
        ok = (d > params.depth_range[0]) & (d < params.depth_range[1])
        j, d, px = j[ok], d[ok], (r * depth.shape[1] + c)[ok]
        Q = T[:3, 3] + (X[j] - T[:3, 3]) * (d / z[j])[:, None]
        owner = j // len(rise)
        hit = (
            (np.abs(Q[:, 0] - P[owner, 0]) < cs / 4)
            & (np.abs(Q[:, 1] - P[owner, 1]) < cs / 4)
            & (Q[:, 2] > P[owner, 2] + params.recall_tol)
        )
        if hit.any() and body is not None and q is not None:
            on_robot = body.contains(Q[hit], np.asarray(q, float), held_dims, params.robot_margin)
            hit[np.flatnonzero(hit)[on_robot]] = False
        # Pixels (view, index) that returned from inside each column.
        hits.append(np.stack([owner[hit], np.full(hit.sum(), n_view), px[hit]], axis=1))
    # A surface seen by one pixel may be a flying pixel (read between two surfaces): a cell is
    # covered when at least two pixels returned from inside its column.
    seen_in = np.unique(np.concatenate(hits), axis=0)
    covered = np.bincount(seen_in[:, 0], minlength=len(P)) >= 2
    bad |= covered
    keep = told & ~bad
    if not keep.any():
        return now, 0
    cells = np.array(now.cells, dtype=float)
    obs = obs_now.copy()
    cells[iy[keep], ix[keep]] = np.asarray(prev.cells)[iy[keep], ix[keep]]
    obs[iy[keep], ix[keep]] = True
    return HeightMap(cells, obs, now.origin, now.cell_size, now.lids), int(keep.sum())


class MapMemory:
    """What the fusions of one stack have seen: per cell the height it was last observed at.

    remember(fused, ...) answers the fused map with the cells it lacks recalled from that
    record where the views show them hidden (recall_hidden), then records the cells the fused
    map observed. A cell the views contradict is not answered but stays recorded: a flying
    pixel or the arm passing is not a change, and a change in sight is recorded when seen.
    forget() starts a new stack (an episode).
    """

    def __init__(self, params: FusionParams, pallet: PalletGeometry | None = None) -> None:
        self.params = params
        self.pallet = pallet or PalletGeometry()
        self.seen: HeightMap | None = None
        self.recalled = 0  # cells the last answer took from the record

    def forget(self) -> None:
        self.seen = None
        self.recalled = 0

    def remember(
        self,
        fused: HeightMap,
        views: Sequence[Any],
        body: RobotBody | None = None,
        q: np.ndarray | None = None,
        held_dims: Sequence[float] | None = None,
    ) -> HeightMap:
        out, self.recalled = recall_hidden(
            fused, self.seen, views, self.params, self.pallet, body, q, held_dims
        )
        obs = np.asarray(fused.observed)
        if self.seen is None or self.seen.shape != fused.shape:
            self.seen = fused
        else:
            cells = np.where(obs, np.asarray(fused.cells), np.asarray(self.seen.cells))
            self.seen = HeightMap(
                cells, obs | np.asarray(self.seen.observed), fused.origin, fused.cell_size
            )
        return out
