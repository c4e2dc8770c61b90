"""Why the score heuristic rejects a candidate: its hard filters, named, in precedence order.

Rules: docs/planners.md §6.3 (the filters) and §6.2 (support, the clearance ring, the CoG).
"""

from __future__ import annotations

from enum import IntEnum

__all__ = [
    'EXCLUDED',
    'NOT_REJECTED',
    'PALLET_SPEC',
    'REJECT_REASONS',
    'UNSTABLE_STACK',
    'RejectReason',
]


class RejectReason(IntEnum):
    """A hard filter of score_candidates; the name is its reject_summary key.

    Ordered by precedence, highest first: a window failing several filters is counted once,
    under the one with the lowest value (the filters are applied from the highest value down,
    each overwriting the reason of the windows it fails).

    collision: a cell of the footprint's clearance ring stands more than support_tol above the
        window's base (its highest cell under the footprint); off the map counts as empty.
    unobserved: the footprint or its clearance ring touches a cell no camera observed; applied
        only when allow_unobserved is off.
    com_unsupported: the carton's CoG is not supported: its cell is unobserved, outside the
        footprint, or outside the span of the supported columns and rows, or nothing under the
        footprint is within support_tol of the base.
    out_of_reach: the release pose (and the approach pose above it, when approach_height > 0) is
        not reachable. Counted here only when reachability is scored (its weight > 0); with a
        zero weight ScorePlanner asks lazily in rank order and adds the unreachable ones to the
        count afterwards, outside this precedence.
    max_stack_height: the carton's top, base + height, is above max_stack_height [m above deck].
    min_support_ratio: less than min_support_ratio of the footprint's cells lie within
        support_tol of the base.
    """

    collision = 0
    unobserved = 1
    com_unsupported = 2
    out_of_reach = 3
    max_stack_height = 4
    min_support_ratio = 5


# The reason a window that passes every filter carries (below every RejectReason).
NOT_REJECTED = -1

# The reject_summary keys in precedence order (docs/planners.md §6.3).
REJECT_REASONS: tuple[str, ...] = tuple(reason.name for reason in RejectReason)

# ScorePlanner.choose's own counts, added to the summary when it finds no slot: candidates
# skipped as excluded slots (or near one), and those that would leave the believed stack
# toppling (stack_check), and those that would break a hard rule of the pallet spec
# (core.planning.spec_rules).
EXCLUDED = 'excluded'
UNSTABLE_STACK = 'unstable_stack'
PALLET_SPEC = 'pallet_spec'
