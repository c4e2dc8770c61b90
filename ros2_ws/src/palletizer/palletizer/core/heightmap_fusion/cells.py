"""Per-cell work on the height-map grid: a cell's robust height from its points (_robust_cells:
the mean round the most populated height window, refined), small holes filled where the
neighbours agree (_fill_holes) and the gaps between deck boards bridged (_bridge_deck).
"""

from __future__ import annotations

import numpy as np

from palletizer.core.params.fusion import FusionParams

__all__: list[str] = []


def _fill_holes(cells: np.ndarray, obs: np.ndarray, need: int, tol: float) -> None:
    """Fill unobserved cells in place where >= need of 8 neighbours are observed within tol."""
    ny, nx = cells.shape
    H = np.pad(cells, 1)
    Ob = np.pad(obs, 1)
    shifts = [(dy, dx) for dy in (-1, 0, 1) for dx in (-1, 0, 1) if (dy, dx) != (0, 0)]
    hs = np.stack([H[1 + dy : 1 + dy + ny, 1 + dx : 1 + dx + nx] for dy, dx in shifts])
    os_ = np.stack([Ob[1 + dy : 1 + dy + ny, 1 + dx : 1 + dx + nx] for dy, dx in shifts])
    n = os_.sum(axis=0)
    hi = np.where(os_, hs, -np.inf).max(axis=0)
    lo = np.where(os_, hs, np.inf).min(axis=0)
    # Enclosed: observed on both sides along X or along Y. A cell beside a lid whose far side
    # is unseen (the shadow beyond a tall carton) has 5 lid-high neighbours, and filling it
    # grew the lid by a cell.
    k = {s_: i for i, s_ in enumerate(shifts)}
    across = (os_[k[(0, -1)]] & os_[k[(0, 1)]]) | (os_[k[(-1, 0)]] & os_[k[(1, 0)]])
    fill = ~obs & (n >= need) & (hi - lo <= tol) & across
    if fill.any():
        mean = np.where(os_, hs, 0.0).sum(axis=0) / np.maximum(n, 1)
        cells[fill] = mean[fill]
        obs[fill] = True


def _bridge_deck(cells: np.ndarray, obs: np.ndarray, span: int, tol: float) -> None:
    """Mark deck (0, observed) the unobserved cells whose nearest observed cells along X, or
    along Y, are deck-high (<= tol) on both sides within span cells: the gaps between deck
    boards, which the sensor loses whole. Only at deck level: two lids of one height with an
    unseen gap between them stay apart (the gap is lower, not lid-high)."""
    if span <= 0:
        return
    deck = obs & (cells <= tol)
    ny, nx = cells.shape
    fill = np.zeros_like(obs)
    for axis, n in ((0, ny), (1, nx)):
        sides = []
        for sign in (-1, 1):
            hit = np.zeros_like(obs)  # nearest observed cell this way is deck
            found = np.zeros_like(obs)
            for d in range(1, span + 1):
                if d >= n:
                    break
                o = np.zeros_like(obs)
                dk = np.zeros_like(obs)
                src = slice(0, n - d) if sign > 0 else slice(d, n)
                dst = slice(d, n) if sign > 0 else slice(0, n - d)
                idx_s = (src, slice(None)) if axis == 0 else (slice(None), src)
                idx_d = (dst, slice(None)) if axis == 0 else (slice(None), dst)
                o[idx_d] = obs[idx_s]
                dk[idx_d] = deck[idx_s]
                hit |= ~found & dk
                found |= o
            sides.append(hit)
        fill |= sides[0] & sides[1]
    fill &= ~obs
    cells[fill] = 0.0
    obs[fill] = True


def _robust_cells(
    c: np.ndarray, z: np.ndarray, ncell: int, nb: int, zlo: float, params: FusionParams
) -> tuple[np.ndarray, np.ndarray]:
    """Per-cell height (ncell,) [m] and point count (ncell,): the mean of the points within
    `band` of the most populated 3-bin height window, refined once around that mean."""
    zb = np.clip(((z - zlo) / params.bin).astype(np.int64), 0, nb - 1)
    # The histogram spans only the bins that hold points (the stack, not the 2 m band): the
    # dense (cells x bins) array is most of the fusion's time.
    b0 = int(zb.min()) if zb.size else 0
    nb = max(int(zb.max()) - b0 + 1 if zb.size else 1, 3)
    zb = zb - b0
    hist = np.bincount(c * nb + zb, minlength=ncell * nb).reshape(ncell, nb)
    win = hist[:, :-2] + hist[:, 1:-1] + hist[:, 2:]
    i = np.argmax(win, axis=1)
    rows = np.arange(ncell)
    # The window's own centroid, not its middle bin's: points all in one edge bin of the
    # window lay 1.5 bins (15 mm, beyond `band`) from the middle, and the cell went unseen.
    h1, h2 = hist[rows, i + 1], hist[rows, i + 2]
    est = zlo + (b0 + i + 0.5 + (h1 + 2.0 * h2) / np.maximum(win[rows, i], 1)) * params.bin
    cnt = np.zeros(ncell, dtype=np.int64)
    for _ in range(2):
        sel = np.abs(z - est[c]) <= params.band
        cnt = np.bincount(c[sel], minlength=ncell)
        tot = np.bincount(c[sel], weights=z[sel], minlength=ncell)
        est = np.where(cnt > 0, tot / np.maximum(cnt, 1), est)
    return est, cnt
