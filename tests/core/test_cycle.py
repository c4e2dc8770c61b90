"""The carton cycle's phases tile it: consecutive spans, no gap, no overlap, sum = cycle time."""

from __future__ import annotations

import pytest
from palletizer.core.cycle import CycleClock, phase_totals, spans_from_payload, spans_payload
from palletizer.core.errors import ConfigError
from palletizer.core.vocab import CyclePhase as P


def _tiles(spans) -> None:
    for a, b in zip(spans, spans[1:], strict=False):
        assert a.end_s == b.start_s
    assert all(s.end_s > s.start_s for s in spans)


def test_marks_become_consecutive_spans_that_sum_to_the_cycle():
    c = CycleClock()
    c.begin(P.wait, 1.5)
    for phase, t in [(P.detect, 2.0), (P.descend, 2.0), (P.lift, 3.25), (P.weigh, 4.0)]:
        c.mark(phase, t)
    spans = c.close(6.5)
    # detect took no time: the descent replaced it
    assert [s.phase for s in spans] == [P.wait, P.descend, P.lift, P.weigh]
    _tiles(spans)
    assert spans[0].start_s == 1.5 and spans[-1].end_s == 6.5
    assert sum(s.duration_s for s in spans) == pytest.approx(5.0)
    assert not c.open and c.close(7.0) == ()


def test_a_mark_of_the_open_phase_changes_nothing_and_time_never_runs_back():
    c = CycleClock()
    c.begin(P.cross, 0.0)
    c.mark(P.cross, 1.0)
    c.mark(P.place, 2.0)
    # Earlier than the last mark: held at 2.0, where it replaces the place that took no time.
    c.mark(P.release, 1.0)
    spans = c.close(3.0)
    assert [(s.phase, s.start_s, s.end_s) for s in spans] == [
        (P.cross, 0.0, 2.0),
        (P.release, 2.0, 3.0),
    ]


def test_a_phase_that_took_no_time_between_two_of_the_same_merges_them():
    c = CycleClock()
    c.begin(P.return_, 0.0)
    c.mark(P.descend, 1.0)
    c.mark(P.return_, 1.0)  # descend took no time: back in return, one span
    spans = c.close(2.0)
    assert [(s.phase, s.duration_s) for s in spans] == [(P.return_, 2.0)]


def test_an_executors_marks_are_held_inside_its_call():
    c = CycleClock()
    c.begin(P.descend, 10.0)
    c.marks_within([(P.return_, 9.0), (P.descend, 10.5), (P.lift, 13.0)], 10.0, 12.0)
    spans = c.close(12.0)
    assert [(s.phase, s.start_s, s.end_s) for s in spans] == [
        (P.return_, 10.0, 10.5),
        (P.descend, 10.5, 12.0),
    ]


def test_the_payload_round_trips_and_its_seconds_sum_exactly_to_cycle_s():
    c = CycleClock()
    c.begin(P.wait, 0.1234)
    c.mark(P.descend, 0.3337)
    c.mark(P.weigh, 1.0001)
    c.mark(P.cross, 2.5559)
    spans = c.close(3.7771)
    payload = spans_payload(spans)
    assert payload['cycle_start_s'] == 0.123 and payload['cycle_s'] == 3.654
    assert [name for name, _ in payload['phases']] == ['wait', 'descend', 'weigh', 'cross']
    assert round(sum(s for _, s in payload['phases']), 6) == payload['cycle_s']
    back = spans_from_payload(payload)
    assert [(s.phase, s.start_s, s.end_s) for s in back] == [
        (s.phase, s.start_s, s.end_s) for s in spans
    ]
    totals = phase_totals(back)
    assert set(totals) == set(P) and totals[P.plan] == 0.0 and totals[P.cross] == 1.221
    assert spans_payload(()) == {} and spans_from_payload({}) == ()


def test_an_unknown_phase_name_in_a_payload_is_refused_with_the_allowed_ones():
    with pytest.raises(ConfigError, match=r"'rest'; expected one of wait, detect"):
        spans_from_payload({'cycle_start_s': 0.0, 'phases': [['rest', 1.0]]})
