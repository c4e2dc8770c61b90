"""The referee's compliance checks: each rule is measured, kept by a stack that keeps it and
broken by one that breaks it."""

from __future__ import annotations

import math

import pytest
from palletizer.core.compliance import Deck, StackItem, check_compliance, label_normal, supports
from palletizer.core.config import load_config
from palletizer.core.pallet_spec import load_spec

CAT = load_config().catalogue
DECK = Deck(centre=(0.6, 0.0), size=(1.2, 0.8), top=0.144)
STD_M = CAT.types['std_m'].dims  # 0.42 x 0.30 x 0.18, C32, label +y, 4.2 kg


def box(pid, x, y, layer=0, *, t='std_m', yaw=0.0, mass=None, dims=None, z0=None):
    d = dims or CAT.types[t].dims
    bottom = DECK.top + layer * d[2] if z0 is None else z0
    return StackItem(
        pid, t, (x, y, bottom + d[2] / 2), d, yaw, CAT.types[t].mass if mass is None else mass
    )


def spec(**rules):
    return load_spec(rules, sorted(CAT.types))


def test_the_support_graph_finds_what_rests_on_what():
    items = [box('a', 0.3, 0.0), box('b', 0.75, 0.0), box('c', 0.5, 0.0, 1)]
    g = supports(items)
    # c (0.29..0.71 in x) rests on a (0.09..0.51) and b (0.54..0.96); nothing rests on c.
    assert set(g[2]) == {0, 1} and g[0] == {} and g[1] == {}
    assert g[2][0] == pytest.approx((0.51 - 0.29) * 0.30) and g[2][1] == pytest.approx(
        (0.71 - 0.54) * 0.30
    )
    # 2 cm above the other's top is not resting on it.
    lifted = [box('a', 0.3, 0.0), box('c', 0.3, 0.0, z0=DECK.top + 0.18 + 0.02)]
    assert supports(lifted)[1] == {}


def test_the_empty_spec_breaks_nothing_but_everything_is_measured():
    items = [
        box('a', 0.3, 0.0, t='pouch_xs'),
        box('b', 0.3, 0.0, 1, t='heavy_l', z0=DECK.top + 0.08),
    ]
    c = check_compliance(spec(), items, CAT, DECK)
    assert c.broken == [] and c.hard_violations == 0
    assert c.fragile_violations and c.weight_order_inversions  # measured all the same
    assert c.load_mass_kg == pytest.approx(0.35 + 8.5)


def test_height_and_mass_limits():
    items = [box(f'c{k}', 0.6, 0.0, k) for k in range(7)]  # 7 x 0.18 = 1.26 m
    c = check_compliance(spec(max_load_height_m=1.3, max_load_mass_kg=30.0), items, CAT, DECK)
    assert c.load_height_m == pytest.approx(1.26) and c.broken == []
    c = check_compliance(spec(max_load_height_m=1.2, max_load_mass_kg=29.0), items, CAT, DECK)
    assert c.broken == ['max_load_height_m', 'max_load_mass_kg'] and c.hard_violations == 2


def test_crush_propagates_the_load_down_and_splits_it_by_contact_area():
    # A column of std_m: the bottom one carries every carton above it.
    column = [box(f'c{k}', 0.6, 0.0, k, mass=20.0) for k in range(5)]
    c = check_compliance(spec(crush={}), column, CAT, DECK)
    limit = CAT.crush_limit_kg('std_m', STD_M)  # 63.6 kg
    assert [v['package_id'] for v in c.crush_violations] == ['c0']  # 80 kg on it
    assert c.crush_violations[0]['above_kg'] == pytest.approx(80.0)
    assert c.crush_violations[0]['limit_kg'] == pytest.approx(limit, abs=0.01)
    assert c.broken == ['crush'] and c.hard_violations == 1
    # A spec override raises the limit: kept.
    assert (
        check_compliance(spec(crush={'limits_kg': {'std_m': 90.0}}), column, CAT, DECK).broken
        == []
    )
    # Bridged over two cartons, a 30 kg carton puts its mass on each by contact area.
    a, b = box('a', 0.3, 0.0), box('b', 0.75, 0.0)
    top = box('top', 0.5, 0.0, 1, mass=30.0)
    low = box('low', 0.5, 0.0, 2, mass=0.0)
    c = check_compliance(spec(crush={'limits_kg': {'std_m': 16.0}}), [a, b, top, low], CAT, DECK)
    share_a = 30.0 * 0.22 / (0.22 + 0.17)
    assert [v['package_id'] for v in c.crush_violations] == ['a']
    assert c.crush_violations[0]['above_kg'] == pytest.approx(share_a, abs=0.01)


def test_nothing_may_rest_on_a_fragile_carton():
    pouch = box('p', 0.3, 0.0, t='pouch_xs')
    beside = box('s', 0.8, 0.0)
    kept = check_compliance(spec(fragile={}), [pouch, beside], CAT, DECK)
    assert kept.fragile_violations == [] and kept.broken == []
    on = box('on', 0.3, 0.0, t='book_s', z0=DECK.top + 0.08)
    c = check_compliance(spec(fragile={}), [pouch, beside, on], CAT, DECK)
    assert c.fragile_violations == [{'package_id': 'p', 'under': 'on'}]
    assert c.broken == ['fragile'] and c.hard_violations == 1
    # A type the spec names fragile counts too.
    two = [box('a', 0.6, 0.0), box('b', 0.6, 0.0, 1)]
    assert check_compliance(spec(fragile={'types': ['std_m']}), two, CAT, DECK).broken == [
        'fragile'
    ]


def test_a_heavier_carton_on_a_lighter_one_is_an_inversion_beyond_the_tolerance():
    light = box('l', 0.6, 0.0, mass=3.0)
    c = check_compliance(
        spec(weight_order={}), [light, box('h', 0.6, 0.0, 1, mass=3.4)], CAT, DECK
    )
    assert c.weight_order_inversions == [] and c.broken == []  # within 0.5 kg
    c = check_compliance(
        spec(weight_order={}), [light, box('h', 0.6, 0.0, 1, mass=6.0)], CAT, DECK
    )
    assert c.weight_order_inversions == [
        {'package_id': 'h', 'mass_kg': 6.0, 'on': 'l', 'on_mass_kg': 3.0}
    ]
    assert c.broken == ['weight_order'] and c.hard_violations == 0  # a soft rule


def test_label_out_counts_perimeter_cartons_whose_label_faces_outwards():
    # std_m's label is on +y. At the +y edge with yaw 0 it looks out; turned half round, in.
    edge_y = DECK.centre[1] + DECK.size[1] / 2 - 0.15  # its +y side on the edge
    out = box('out', 0.6, edge_y)
    inward = box('in', 0.2, edge_y, yaw=math.pi)
    middle = box('mid', 0.6, -0.12)  # y -0.27..0.03: 0.13 m from the -y edge
    c = check_compliance(spec(label_out={}), [out, inward, middle], CAT, DECK)
    assert (c.perimeter_labelled, c.label_out, c.label_out_pct) == (2, 1, 50.0)
    assert c.broken == ['label_out']
    c = check_compliance(spec(label_out={}), [out, middle], CAT, DECK)
    assert c.label_out_pct == 100.0 and c.broken == []
    # At a short (x) edge, a quarter turn shows the +y label outwards; a carton without a
    # label is not counted.
    corner_x = DECK.centre[0] + DECK.size[0] / 2 - 0.15
    turned = box('turned', corner_x, 0.0, yaw=-math.pi / 2)
    tray = box('tray', 0.1, 0.0, t='tray_s')
    c = check_compliance(spec(label_out={}), [turned, tray], CAT, DECK)
    assert (c.perimeter_labelled, c.label_out) == (1, 1)
    assert label_normal('+y', -math.pi / 2) == pytest.approx((1.0, 0.0))
    assert label_normal('none', 0.0) is None


def test_groups_kept_together_or_split():
    books = [box('b1', 0.2, 0.2, t='book_s'), box('b2', 0.2, 0.0, t='book_s')]
    c = check_compliance(spec(group_by={'key': 'group'}), books, CAT, DECK)
    assert c.group_splits == 0 and c.broken == []
    far = box('b3', 1.05, 0.2, t='book_s')
    c = check_compliance(spec(group_by={'key': 'group'}), [*books, far], CAT, DECK)
    assert c.group_splits == 1 and c.broken == ['group_by']
    # By type, two types of one aisle are two groups, each together.
    mixed = [box('s', 0.2, 0.2, t='std_s'), box('m', 0.8, 0.2)]
    assert check_compliance(spec(group_by={'key': 'group'}), mixed, CAT, DECK).group_splits == 1
    assert check_compliance(spec(group_by={'key': 'type'}), mixed, CAT, DECK).group_splits == 0
