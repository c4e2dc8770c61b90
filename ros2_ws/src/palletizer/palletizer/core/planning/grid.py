"""Grid baseline: first fit over recorded placements, nearest to the pallet centre first.

Rules and values: docs/planners.md §6.8.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import numpy as np

from palletizer.core.contracts import (
    HeightMap,
    PackageSpec,
    PalletGeometry,
    PalletState,
    Placement,
    PlacementPlan,
    PlanResult,
)
from palletizer.core.params.planning import GridParams
from palletizer.core.planning.base import LayerBook, PlannerKind
from palletizer.core.planning.stack import stack_from_placements

__all__ = ['GridPlanner']


class GridPlanner:
    """Naive baseline: yaw 0 then 90, lowest level first, corners nearest the centre first.

    It ignores the height map and reads only the measured placements it was given through
    record(), never simulator truth, so `oracle` is False. (The reference flagged its grid
    planner as an oracle stub; that flag belongs to whoever feeds it truth, e.g. an oracle gauge.)
    It checks no CoG and no stack stability: it is the bar the other planners must clear.
    """

    kind = PlannerKind.grid
    oracle = False

    def __init__(self, params: GridParams | None = None, *, pallet: PalletGeometry | None = None):
        self.params = params or GridParams()
        self.pallet = pallet or PalletGeometry()
        self.book = LayerBook(self.pallet)

    def set_forecast(self, specs: Sequence[PackageSpec]) -> None:
        """The baseline has no lookahead; the forecast is ignored."""

    def record(self, placement: Placement) -> None:
        self.book.record(placement)

    def choose(
        self,
        spec: PackageSpec,
        heightmap: HeightMap,
        pallet: PalletState | None,
        excluded_slots: Collection[str] = (),
        last_resort: bool = False,
    ) -> PlanResult:
        self.book.remember(spec)
        p = self.params
        boxes = stack_from_placements(self.book.placements)
        L, W, H = spec.dims_m
        hx, hy = self.pallet.size_xy[0] / 2.0, self.pallet.size_xy[1] / 2.0
        c = p.clearance
        rects = np.array([b.rect for b in boxes]).reshape(-1, 4)
        z0 = np.array([b.z for b in boxes])
        top = np.array([b.top for b in boxes])
        levels = sorted({0.0, *(round(float(t), 6) for t in top)})
        rejects = {'off_pallet': 0, 'overlap': 0, 'clearance': 0, 'min_support_ratio': 0}
        n = 0
        excluded = 0
        for quarter, yaw in ((0, 0.0), (1, np.pi / 2)):
            ex, ey = (W, L) if quarter else (L, W)
            xs = [-hx, -ex / 2.0, *(rects[:, 0] - ex - c), *(rects[:, 1] + c)]
            ys = [-hy, -ey / 2.0, *(rects[:, 2] - ey - c), *(rects[:, 3] + c)]
            corners = sorted(
                {(round(x, 6), round(y, 6)) for x in xs for y in ys},
                key=lambda q: (abs(q[0] + ex / 2) + abs(q[1] + ey / 2), q[1], q[0]),
            )
            for z in levels:
                for x0, y0 in corners:
                    x1, y1 = x0 + ex, y0 + ey
                    if x0 < -hx - 1e-9 or x1 > hx + 1e-9 or y0 < -hy - 1e-9 or y1 > hy + 1e-9:
                        rejects['off_pallet'] += 1
                        continue
                    ox = np.minimum(x1, rects[:, 1]) - np.maximum(x0, rects[:, 0])
                    oy = np.minimum(y1, rects[:, 3]) - np.maximum(y0, rects[:, 2])
                    vert = (np.minimum(z + H, top) - np.maximum(z, z0)) > p.overlap_tol
                    if np.any(vert & (ox > 1e-9) & (oy > 1e-9)):
                        rejects['overlap'] += 1
                        continue
                    if np.any(vert & (ox > -c + 1e-9) & (oy > -c + 1e-9)):
                        rejects['clearance'] += 1
                        continue
                    if z <= p.level_tol:
                        support = 1.0
                    else:
                        on = np.abs(top - z) <= p.level_tol
                        area = np.clip(ox, 0, None) * np.clip(oy, 0, None)
                        support = float((area * on).sum() / (ex * ey))
                    if support < p.min_support_ratio - 1e-9:
                        rejects['min_support_ratio'] += 1
                        continue
                    layer = self.book.layer(z)
                    slot = f'grid-L{layer}-{n}'
                    n += 1
                    if slot in excluded_slots:
                        excluded += 1
                        continue
                    cx = x0 + ex / 2.0 + self.pallet.centre_xy[0]
                    cy = y0 + ey / 2.0 + self.pallet.centre_xy[1]
                    plan = PlacementPlan(
                        position=(cx, cy, self.pallet.deck_z + z + H / 2.0),
                        yaw=float(yaw),
                        layer=layer,
                        slot=slot,
                        score=0.0,
                        predicted_support=min(1.0, support),
                        breakdown={},
                    )
                    return PlanResult(plan, {k: v for k, v in rejects.items() if v})
        summary = {k: v for k, v in rejects.items() if v}
        if excluded:
            summary['excluded'] = excluded
        return PlanResult(None, summary)
