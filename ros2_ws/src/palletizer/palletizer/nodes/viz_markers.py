"""Markers node: what RViz shows of the episode, as one latched MarkerArray.

/palletizer/markers (visualization_msgs/MarkerArray, in `world`), with stable namespaces and
ids so RViz updates markers in place instead of piling them up:
- `pallet` 0: the deck;
- `planned` <seq>: each carton where the planner put it (translucent blue);
- `actual` <seq>: where the referee found it after the settle (green placed, red not);
- `cog` 0: the stack's centre of mass after the last carton (the referee's, from
  /palletizer/pallet_states);
- `heightmap` 0: the observed cells of the last fused height map, one cube per cell at its
  height, coloured from low (blue) to high (yellow);
- `held` 0: the carton in the gripper (its weighed size, from the `pick` event), hanging from
  the `tcp` frame until it is placed.
It also publishes /palletizer/cycle_time_s (std_msgs/Float64) at every `place` event: the sim
time since the previous carton's place (the first carton: since the episode's first event), for
the Foxglove layout's cycle-time plot.
The planner publishes what it knows (candidates, chosen slot, believed centre of mass, support
polygon) on /palletizer/plan_markers (nodes/plan_markers.py).
A new episode (an attempt seq lower than the last one) clears the episode's markers.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import TypeVar

import numpy as np
from builtin_interfaces.msg import Time
from geometry_msgs.msg import Point
from palletizer_msgs.msg import EpisodeEvent, HeightMap, PalletState, Placement
from rclpy.node import Node
from std_msgs.msg import ColorRGBA, Float64
from visualization_msgs.msg import Marker, MarkerArray

from palletizer.core.contracts import PalletGeometry
from palletizer.core.measure import pallet_to_world
from palletizer.nodes.qos import EVENTS, LATCHED, MARKERS
from palletizer.nodes.spin import run_node

__all__ = ['FRAME', 'MarkerState', 'VizMarkersNode', 'main']

FRAME = 'world'

_Msg = TypeVar('_Msg')


def _color(r: float, g: float, b: float, a: float = 1.0) -> ColorRGBA:
    return ColorRGBA(r=float(r), g=float(g), b=float(b), a=float(a))


def _box(
    ns: str, mid: int, pose: Sequence[float], dims: Sequence[float], color: ColorRGBA
) -> Marker:
    m = Marker(ns=ns, id=int(mid), type=Marker.CUBE, action=Marker.ADD)
    m.header.frame_id = FRAME
    m.pose.position.x, m.pose.position.y, m.pose.position.z = (float(v) for v in pose[:3])
    yaw = float(pose[3]) if len(pose) > 3 else 0.0
    m.pose.orientation.z, m.pose.orientation.w = float(np.sin(yaw / 2)), float(np.cos(yaw / 2))
    m.scale.x, m.scale.y, m.scale.z = (float(v) for v in dims)
    m.color = color
    return m


class MarkerState:
    """The markers of the current episode, rebuilt into one MarkerArray on every update."""

    def __init__(self, pallet: PalletGeometry) -> None:
        self.pallet = pallet
        self.placements: dict[int, Placement] = {}
        self.cog: Marker | None = None
        self.heightmap: Marker | None = None
        self.last_seq = -1
        self.cleared = False
        self.held: tuple[float, float, float] | None = None
        self.held_drawn = False
        self.episode: tuple[str, int] | None = None
        self.since = 0.0  # [s] sim time of the episode's first event, then of the last place

    def cycle_time(self, ev: EpisodeEvent) -> float | None:
        """At a `place` event, the sim time [s] since the previous place (or the episode's
        first event); None for other events."""
        key = (ev.run_id, int(ev.seed))
        if key != self.episode or ev.seq == 0:
            self.episode, self.since = key, float(ev.ts)
        if ev.kind != 'place':
            return None
        out = float(ev.ts) - self.since
        self.since = float(ev.ts)
        return out

    def on_event(self, ev: EpisodeEvent) -> None:
        if ev.kind == 'pick':
            dims = json.loads(ev.payload_json or '{}').get('dims_mm')
            if dims:
                L, W, H = (float(v) / 1000.0 for v in dims)
                self.held = (L, W, H)
            else:
                self.held = None
        elif ev.kind in ('place', 'fail', 'perceive'):
            self.held = None

    def on_placement(self, p: Placement) -> None:
        if p.seq < self.last_seq:  # a new episode
            self.placements.clear()
            self.cog = None
            self.cleared = True
        self.last_seq = int(p.seq)
        self.placements[int(p.seq)] = p

    def on_state(self, s: PalletState) -> None:
        cx, cy, cz, _ = pallet_to_world((s.cog.x, s.cog.y, s.cog.z, 0.0), self.pallet)
        m = _box('cog', 0, (cx, cy, cz), (0.05, 0.05, 0.05), _color(1.0, 0.5, 0.0))
        m.type = Marker.SPHERE
        self.cog = m

    def on_heightmap(self, h: HeightMap) -> None:
        cells = np.asarray(h.cells, dtype=float).reshape(h.ny, h.nx)
        seen = np.asarray(h.observed, dtype=bool).reshape(h.ny, h.nx)
        m = Marker(ns='heightmap', id=0, type=Marker.CUBE_LIST, action=Marker.ADD)
        m.header.frame_id = FRAME
        m.pose.orientation.w = 1.0
        m.scale.x = m.scale.y = float(h.cell_size)
        m.scale.z = 0.004
        top = max(float(cells[seen].max()) if seen.any() else 0.0, 1e-6)
        iy, ix = np.nonzero(seen)
        for y, x in zip(iy.tolist(), ix.tolist(), strict=True):
            z = float(cells[y, x])
            m.points.append(
                Point(
                    x=h.origin_x + (x + 0.5) * h.cell_size,
                    y=h.origin_y + (y + 0.5) * h.cell_size,
                    z=self.pallet.deck_z + z,
                )
            )
            t = z / top
            m.colors.append(_color(t, t, 1.0 - t, 0.8))
        self.heightmap = m

    def array(self, stamp: Time) -> MarkerArray:
        out: list[Marker] = []
        if self.cleared:
            out.append(Marker(action=Marker.DELETEALL))
            self.cleared = False
        p = self.pallet
        deck = (p.centre_xy[0], p.centre_xy[1], p.deck_z / 2)  # from the floor to the deck
        out.append(_box('pallet', 0, deck, (*p.size_xy, p.deck_z), _color(0.6, 0.45, 0.3)))
        for seq, pl in sorted(self.placements.items()):
            dims = list(pl.dims_m)
            planned = pallet_to_world(
                (pl.planned_pose.x, pl.planned_pose.y, pl.planned_pose.z, pl.planned_pose.yaw), p
            )
            out.append(_box('planned', seq, planned, dims, _color(0.2, 0.4, 1.0, 0.35)))
            actual = pallet_to_world(
                (pl.actual_pose.x, pl.actual_pose.y, pl.actual_pose.z, pl.actual_pose.yaw), p
            )
            ok = _color(0.2, 0.8, 0.3, 0.9) if pl.placed else _color(0.9, 0.2, 0.2, 0.9)
            out.append(_box('actual', seq, actual, dims, ok))
        out += [m for m in (self.cog, self.heightmap) if m is not None]
        if self.held is not None:
            L, W, H = self.held
            m = _box('held', 0, (0.0, 0.0, H / 2), (L, W, H), _color(0.95, 0.75, 0.2, 0.9))
            m.header.frame_id = 'tcp'  # the cups' plane; the carton hangs along tcp z
            m.frame_locked = True
            out.append(m)
            self.held_drawn = True
        elif self.held_drawn:
            out.append(Marker(ns='held', id=0, action=Marker.DELETE))
            self.held_drawn = False
        for m in out:
            m.header.frame_id = m.header.frame_id or FRAME
            m.header.stamp = stamp
        return MarkerArray(markers=out)


class VizMarkersNode(Node):
    def __init__(self) -> None:
        super().__init__('viz_markers')
        self.state = MarkerState(PalletGeometry())
        self.pub = self.create_publisher(MarkerArray, '/palletizer/markers', MARKERS)
        self.create_subscription(Placement, 'placements', self._wrap(self.state.on_placement), 50)
        self.create_subscription(PalletState, 'pallet_states', self._wrap(self.state.on_state), 50)
        self.create_subscription(
            HeightMap, 'heightmap', self._wrap(self.state.on_heightmap), LATCHED
        )
        self.cycle_pub = self.create_publisher(Float64, '/palletizer/cycle_time_s', 10)
        self.create_subscription(EpisodeEvent, 'episode_events', self.on_event, EVENTS)
        self.publish()

    def on_event(self, ev: EpisodeEvent) -> None:
        cycle = self.state.cycle_time(ev)
        if cycle is not None:
            self.cycle_pub.publish(Float64(data=cycle))
        self.state.on_event(ev)
        self.publish()

    def _wrap(self, handler: Callable[[_Msg], None]) -> Callable[[_Msg], None]:
        def cb(msg: _Msg) -> None:
            handler(msg)
            self.publish()

        return cb

    def publish(self) -> None:
        self.pub.publish(self.state.array(self.get_clock().now().to_msg()))


def main(args: list[str] | None = None) -> None:
    run_node(VizMarkersNode, args)


if __name__ == '__main__':
    main()
