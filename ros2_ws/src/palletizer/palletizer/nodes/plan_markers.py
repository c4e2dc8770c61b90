"""What the planner knows, as markers (/palletizer/plan_markers, in `world`), published by the
planner node after every plan, with stable namespaces and ids:
- `candidates` 0..N-1: the footprints of the best valid candidates of the last plan in rank
  order (score heuristic; up to N), coloured by score from red (the lowest shown) to green;
- `chosen` 0: the footprint of the slot the planner chose;
- `cog_measured` 0: the stack's centre of mass as the planner believes it (the gauge's masses
  and centres, at the planned poses);
- `support` 0: the support polygon it rates tipping against (the hull of the first layer).
Markers of the previous plan that this one has fewer of are deleted, so nothing piles up.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from builtin_interfaces.msg import Time
from geometry_msgs.msg import Point
from std_msgs.msg import ColorRGBA
from visualization_msgs.msg import Marker, MarkerArray

from palletizer.core.contracts import PackageSpec, PalletGeometry, PlacementPlan
from palletizer.core.measure import pallet_to_world
from palletizer.core.stability import box_corners, support_hull

__all__ = ['FRAME', 'MAX_CANDIDATES', 'PlanMarkers']

FRAME = 'world'
MAX_CANDIDATES = 20
_LIFT = 0.004  # [m] footprints drawn this far above the surface they stand on


def _outline(
    ns: str, mid: int, corners: np.ndarray, z: float, color: ColorRGBA, width: float
) -> Marker:
    m = Marker(ns=ns, id=int(mid), type=Marker.LINE_STRIP, action=Marker.ADD)
    m.header.frame_id = FRAME
    m.pose.orientation.w = 1.0
    m.scale.x = width
    m.color = color
    pts = [*corners, corners[0]]
    m.points = [Point(x=float(p[0]), y=float(p[1]), z=float(z)) for p in pts]
    return m


class PlanMarkers:
    """Builds the planner's MarkerArray and remembers how many candidates it last drew."""

    def __init__(self, pallet: PalletGeometry | None = None) -> None:
        self.pallet = pallet or PalletGeometry()
        self.drawn = 0

    def array(
        self,
        stamp: Time,
        spec: PackageSpec,
        plan: PlacementPlan | None,
        planner: Any,
        heightmap: Any = None,
        pallet_state: Any = None,
    ) -> MarkerArray:
        out: list[Marker] = []
        L, W, H = (float(v) for v in spec.dims_m)
        deck = self.pallet.deck_z
        shown = 0
        candidates = getattr(planner, 'candidates', None)
        if candidates is not None and heightmap is not None:
            c = candidates(spec, heightmap, pallet_state)
            shown = min(MAX_CANDIDATES, len(c.score))
            if shown:
                s = np.asarray(c.score[:shown], dtype=float)
                span = max(float(s.max() - s.min()), 1e-9)
                for k in range(shown):
                    t = (float(s[k]) - float(s.min())) / span
                    corners = box_corners(float(c.x[k]), float(c.y[k]), L, W, float(c.yaw[k]))
                    z = deck + float(c.z_base[k]) + _LIFT
                    color = ColorRGBA(r=1.0 - t, g=t, b=0.1, a=0.9)
                    out.append(_outline('candidates', k, corners, z, color, 0.006))
        for k in range(shown, self.drawn):
            out.append(Marker(ns='candidates', id=k, action=Marker.DELETE))
        self.drawn = shown
        if plan is not None:
            x, y, zc = plan.position
            corners = box_corners(x, y, L, W, plan.yaw)
            white = ColorRGBA(r=1.0, g=1.0, b=1.0, a=1.0)
            out.append(_outline('chosen', 0, corners, zc - H / 2 + 2 * _LIFT, white, 0.012))
        else:
            out.append(Marker(ns='chosen', id=0, action=Marker.DELETE))
        book = getattr(planner, 'book', None)
        out += self._book(book)
        for m in out:
            m.header.frame_id = FRAME
            m.header.stamp = stamp
        return MarkerArray(markers=out)

    def _book(self, book: Any) -> list[Marker]:
        out: list[Marker] = []
        mass, cog = book.state() if book is not None else (0.0, (0.0, 0.0, 0.0))
        if mass > 0:
            x, y, z, _ = pallet_to_world((*cog, 0.0), self.pallet)
            m = Marker(ns='cog_measured', id=0, type=Marker.SPHERE, action=Marker.ADD)
            m.pose.position.x, m.pose.position.y, m.pose.position.z = x, y, z
            m.pose.orientation.w = 1.0
            m.scale.x = m.scale.y = m.scale.z = 0.05
            m.color = ColorRGBA(r=0.2, g=0.6, b=1.0, a=1.0)
            out.append(m)
        else:
            out.append(Marker(ns='cog_measured', id=0, action=Marker.DELETE))
        base = [
            (q.actual_pose[0], q.actual_pose[1], q.dims_m[0], q.dims_m[1], q.actual_pose[3])
            for q in (book.placements if book is not None else [])
            if q.layer == 1
        ]
        hull = support_hull(base)
        if len(hull) >= 3:
            world = np.array(
                [pallet_to_world((p[0], p[1], 0.0, 0.0), self.pallet)[:2] for p in hull]
            )
            yellow = ColorRGBA(r=1.0, g=0.85, b=0.1, a=1.0)
            out.append(_outline('support', 0, world, self.pallet.deck_z + _LIFT, yellow, 0.01))
        else:
            out.append(Marker(ns='support', id=0, action=Marker.DELETE))
        return out
