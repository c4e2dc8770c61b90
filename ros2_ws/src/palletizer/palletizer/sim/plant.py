"""The industrial-hall decor of level 34: scenery that is seen, never touched, and its lights.

Everything here is visual: geoms of class `plant` collide with nothing (contype 0,
conaffinity 0) and carry no mass, so a level with this decor simulates exactly like the same
level in the plain cell; only the pictures differ. Lighting follows the reference rig
(docs/cell.md §3.8 "Plant decor"): dimmer headlight, three cold LED luminaires under a gantry beam
at y = -0.44, a warm grazing window light and a warm-tinted fill, shadows off on the
directionals (a shadow map would stretch over the whole hall).
"""

from __future__ import annotations

__all__ = ['PLANT_HEADLIGHT', 'plant_xml']

# diffuse, ambient, specular of the headlight (docs/cell.md §3.8)
PLANT_HEADLIGHT = ((0.16, 0.16, 0.16), (0.11, 0.11, 0.11), (0.03, 0.03, 0.03))

_GEOMS = [
    # name, size (half extents), pos, rgba
    ('plant_wall_back', (4.0, 0.10, 2.0), (0.57, 3.26, 2.0), (0.55, 0.57, 0.60, 1)),
    ('plant_wall_left', (0.10, 3.0, 2.0), (-3.43, 0.26, 2.0), (0.55, 0.57, 0.60, 1)),
    ('plant_wall_right', (0.10, 3.0, 2.0), (4.57, 0.26, 2.0), (0.55, 0.57, 0.60, 1)),
    ('plant_column_a', (0.15, 0.15, 2.0), (-2.8, 2.9, 2.0), (0.85, 0.62, 0.10, 1)),
    ('plant_column_b', (0.15, 0.15, 2.0), (3.9, 2.9, 2.0), (0.85, 0.62, 0.10, 1)),
    ('plant_gantry_beam', (2.0, 0.08, 0.08), (0.57, -0.44, 3.45), (0.30, 0.32, 0.35, 1)),
    ('plant_lamp_1', (0.30, 0.10, 0.03), (-1.28, -0.44, 3.30), (0.95, 0.97, 1.0, 1)),
    ('plant_lamp_2', (0.30, 0.10, 0.03), (0.57, -0.44, 3.30), (0.95, 0.97, 1.0, 1)),
    ('plant_lamp_3', (0.30, 0.10, 0.03), (2.42, -0.44, 3.30), (0.95, 0.97, 1.0, 1)),
    ('plant_aisle_marking', (3.5, 0.05, 0.001), (0.57, 1.40, 0.001), (0.95, 0.80, 0.10, 1)),
    ('plant_rack', (0.50, 1.20, 1.10), (3.70, 0.60, 1.10), (0.20, 0.35, 0.60, 1)),
]


def plant_xml() -> str:
    """Worldbody XML: the non-colliding hall geoms and the hall's lights."""
    geoms = '\n'.join(
        f'    <geom name="{n}" type="box" size="{s[0]} {s[1]} {s[2]}" pos="{p[0]} {p[1]} {p[2]}" '
        f'rgba="{c[0]} {c[1]} {c[2]} {c[3]}" contype="0" conaffinity="0" group="2" mass="0"/>'
        for n, s, p, c in _GEOMS
    )
    lights = """
    <light name="plant_led_1" pos="-1.28 -0.44 3.06" dir="0 0 -1" cutoff="60" exponent="4"
           diffuse="0.360 0.405 0.468" castshadow="false"/>
    <light name="plant_led_2" pos="0.57 -0.44 3.06" dir="0 0 -1" cutoff="60" exponent="4"
           diffuse="0.360 0.405 0.468" castshadow="false"/>
    <light name="plant_led_3" pos="2.42 -0.44 3.06" dir="0 0 -1" cutoff="60" exponent="4"
           diffuse="0.360 0.405 0.468" castshadow="false"/>
    <light name="plant_window" directional="true" pos="0 0 3" dir="0.88 -0.13 -0.45"
           diffuse="0.600 0.390 0.216" castshadow="false"/>
    <light name="plant_fill" directional="true" pos="0 0 3" dir="-0.55 0.62 -0.28"
           diffuse="0.450 0.414 0.369" castshadow="false"/>"""
    return geoms + lights
