"""The online 3D bin-packing benchmark of the learning literature (docs/bpp.md): the integer
bin and its support rule, the frozen random sequences, the baselines, and the adapter that runs
the project's planners on it."""

from palletizer.core.bpp.adapter import PLANNER_POLICIES, UNIT, PlannerPolicy, bin_geometry
from palletizer.core.bpp.baselines import BASELINES, Baseline
from palletizer.core.bpp.container import BIN_SIZE, Check, Container, Item, Pose, stable
from palletizer.core.bpp.episode import Episode, Outcome, Policy, run_episode
from palletizer.core.bpp.sequences import ITEM_TYPES, draw_sequence

__all__ = [
    'BASELINES',
    'BIN_SIZE',
    'ITEM_TYPES',
    'PLANNER_POLICIES',
    'UNIT',
    'Baseline',
    'Check',
    'Container',
    'Episode',
    'Item',
    'Outcome',
    'PlannerPolicy',
    'Policy',
    'Pose',
    'bin_geometry',
    'draw_sequence',
    'run_episode',
    'stable',
]
