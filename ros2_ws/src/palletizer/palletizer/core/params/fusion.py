"""The height-map fusion's settings (FusionParams, configs/perception.yaml `heightmap`) and its
error (FusionError).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from palletizer.core.errors import PalletizerError

__all__ = ['FusionError', 'FusionParams']


class FusionError(PalletizerError):
    """Unusable fusion settings or inputs."""


@dataclass(frozen=True)
class FusionParams:
    """Height-map fusion settings (configs/perception.yaml `heightmap`).

    cell: grid cell edge [m]. min_upward_nz: smallest |n_z| of a kept surface (lids and deck;
    box sides dropped). depth_range: valid planar depth [m]. z_range: band of heights kept,
    relative to the deck [m] (below zero: the deck's own noise). normal_px: half-width [px] of the
    stencil the normals are taken over, on the depth median-filtered over 5 x 5 pixels.
    bin: height histogram bin [m] of the per-cell mode; band: half-width [m] around the mode whose
    points are averaged. min_points: points a cell needs to count as observed. fill_neighbours,
    fill_tol: an unobserved cell is filled when at least this many of its 8 neighbours are
    observed and span at most fill_tol [m]. robot_margin: inflation of the robot body [m].
    up_erode_px: pixels within this of a side face (|n_z| < 0.5) are dropped (0: off).
    below_deck: returns down to this below the deck [m] count as deck where their ray crosses
    the deck plane. deck_bridge: unobserved runs of up to this many cells between deck-high
    cells are deck (the board gaps).
    edge_fill: complete the cells the edge and normal filters leave unobserved round each lid
    (the 1-2 cells of every lid edge) from rectangles fitted to the lids, cartons being boxes:
    a cell whose centre lies in a lid's rectangle takes the lid's height; one outside every
    rectangle but within lid_ring [m] of one takes the height of the observed cells beyond,
    when at least two of its neighbours outside every rectangle are observed and agree within
    fill_tol (lid_ring_iters passes). lid_tol: height tolerance [m] of one lid's cells;
    lid_band [m]: returns within this of a lid's height are the lid's; lid_trim: percentile
    [%] trimmed off each end of the lid returns' extent; lid_widen: share of a pixel's
    footprint the extent is widened by on each side (the outermost returns' pixel centres lie
    on average half a pixel inside the edge); lid_other, lid_fill: a rectangle is rejected
    when more than lid_other of the cells it holds are observed at other heights or fewer
    than lid_fill of those observed are the lid's (or higher: a carton standing on it).
    """

    cameras: tuple[str, ...] = ('top', 'diag_a', 'diag_b')
    cell: float = 0.010
    min_upward_nz: float = 0.8
    depth_range: tuple[float, float] = (0.05, 8.0)
    z_range: tuple[float, float] = (-0.03, 2.0)
    normal_px: int = 2
    edge_px: int = 2
    edge_jump: float = 0.02
    bin: float = 0.01
    band: float = 0.012
    min_points: int = 2
    fill_neighbours: int = 5
    fill_tol: float = 0.004
    robot_margin: float = 0.04
    up_erode_px: int = 0
    below_deck: float = 0.2
    deck_bridge: int = 3
    edge_fill: bool = True
    lid_tol: float = 0.006
    lid_band: float = 0.015
    lid_trim: float = 0.3
    lid_widen: float = 0.5
    lid_other: float = 0.01
    lid_fill: float = 0.8
    lid_ring: float = 0.03
    lid_ring_iters: int = 2
    recall: bool = True
    recall_tol: float = 0.02

    def __post_init__(self) -> None:
        if not self.cell > 0 or not self.bin > 0 or not self.band > 0:
            raise FusionError(
                f'heightmap: cell {self.cell!r}, bin {self.bin!r}, band {self.band!r} must be > 0'
            )
        if not self.depth_range[0] < self.depth_range[1] or not self.z_range[0] < self.z_range[1]:
            raise FusionError(
                f'heightmap: depth_range {self.depth_range!r} and z_range {self.z_range!r} must '
                'be (low, high) with low < high'
            )
        if not 1 <= self.normal_px <= 10 or not 1 <= self.fill_neighbours <= 8:
            raise FusionError(
                f'heightmap: normal_px {self.normal_px!r} in 1..10 and fill_neighbours '
                f'{self.fill_neighbours!r} in 1..8'
            )

    @classmethod
    def from_config(cls, hm: Mapping[str, Any]) -> FusionParams:
        """From a configs/perception.yaml `heightmap` mapping; core.config builds
        Config.perception.heightmap.fusion with it."""
        d = cls()

        def get(key: str, default: Any) -> Any:
            return hm.get(key, default) if hm.get(key) is not None else default

        return cls(
            cameras=tuple(str(c) for c in get('cameras', d.cameras)),
            cell=float(get('cell', d.cell)),
            min_upward_nz=float(get('min_upward_nz', d.min_upward_nz)),
            depth_range=tuple(float(v) for v in get('depth_range', d.depth_range)),  # type: ignore[arg-type]  # (low, high) pairs, schema-checked
            z_range=tuple(float(v) for v in get('z_range', d.z_range)),  # type: ignore[arg-type]  # (low, high) pairs, schema-checked
            normal_px=int(get('normal_px', d.normal_px)),
            edge_px=int(get('edge_px', d.edge_px)),
            edge_jump=float(get('edge_jump', d.edge_jump)),
            bin=float(get('bin', d.bin)),
            band=float(get('band', d.band)),
            min_points=int(get('min_points', d.min_points)),
            fill_neighbours=int(get('fill_neighbours', d.fill_neighbours)),
            fill_tol=float(get('fill_tol', d.fill_tol)),
            robot_margin=float(get('robot_margin', d.robot_margin)),
            up_erode_px=int(get('up_erode_px', d.up_erode_px)),
            below_deck=float(get('below_deck', d.below_deck)),
            deck_bridge=int(get('deck_bridge', d.deck_bridge)),
            edge_fill=bool(get('edge_fill', d.edge_fill)),
            lid_tol=float(get('lid_tol', d.lid_tol)),
            lid_band=float(get('lid_band', d.lid_band)),
            lid_trim=float(get('lid_trim', d.lid_trim)),
            lid_widen=float(get('lid_widen', d.lid_widen)),
            lid_other=float(get('lid_other', d.lid_other)),
            lid_fill=float(get('lid_fill', d.lid_fill)),
            lid_ring=float(get('lid_ring', d.lid_ring)),
            lid_ring_iters=int(get('lid_ring_iters', d.lid_ring_iters)),
            recall=bool(get('recall', d.recall)),
            recall_tol=float(get('recall_tol', d.recall_tol)),
        )
