"""Densities given by data: values on a documented grid (`on_grid`), Fourier and spherical-harmonic
coefficients, the state of a saved Solution and cell means (read from files by
`meanfield.measures.files`). Each is a `meanfield.measures.laws.Density` of mass 1 relative to σ
(docs/mathematics.md §2); `meanfield.measures.densities` (``mf.densities``) offers them with the laws.
"""
import numpy as np

from ..validation import MASS_RTOL, check_density_values, check_points
from ..spaces.quadrature import gauss_legendre_grid, trapezoid
from ..spaces.gridded import sphere_cells
from ..representations.harmonics import SphericalHarmonicSeries, real_to_alm, synthesis_points
from ..errors import InvalidInput

from .laws import Density


class GridValues(Density):
    """A density given by its values on a documented grid (see `on_grid`).

    Attributes: ``values`` (the grid's shape), ``points`` (grid shape + (d,)), ``weights`` (the
    grid's quadrature for σ, summing to 1), ``mass`` = Σ w·values, ``dim`` and ``grid``
    ("midpoints" on S^1, "gauss-legendre" on S^2). Called on points, it is the interpolant that
    keeps the values' sign: periodic linear in θ on S^1; on S^2 linear in φ along each ring, then
    linear in z = cos θ between rings (and between the outer rings and the poles, whose value is
    the ring's mean). The spectral solvers do not interpolate: they transform the values exactly.
    """

    def __init__(self, values, normalize=False):
        try:
            v = np.array(values, dtype=float)
        except (TypeError, ValueError):
            raise InvalidInput("`values` must be an array of density values on the grid.") from None
        if v.ndim == 1 and v.size >= 2:
            rule = trapezoid(v.size)
            self.dim, self.grid, self.points, self.weights = 2, "midpoints", rule.points, rule.weights
            self.theta = rule.angles
        elif v.ndim == 2 and v.shape[0] >= 1 and v.shape[1] >= 2:
            theta, phi, pts, w = gauss_legendre_grid(*v.shape)
            self.dim, self.grid, self.points, self.weights = 3, "gauss-legendre", pts, w
            self.theta, self.phi = theta, phi
        else:
            raise InvalidInput(f"`values` must have shape (n,) with n >= 2 (S^1: midpoints θ_j = 2π(j + 1/2)/n) or "
                             f"(ntheta, nphi) with nphi >= 2 (S^2: the Gauss–Legendre grid), got shape {v.shape}.")
        v, mass = check_density_values(v, "values", quadrature_weights=self.weights, rtol=np.inf)
        self.mass = 1.0 if normalize else mass
        self.values = v / mass if normalize else v
        self.values.setflags(write=False)

    @property
    def shape(self):
        return self.values.shape

    def measure(self):
        """The grid as a weighted discrete measure (points (n, d), weights w·values / mass)."""
        w = (self.weights * self.values).ravel()
        return self.points.reshape(-1, self.dim), w / w.sum()

    def unit_mass(self, normalize, dim=None, name="initial"):
        """This density with mass 1 (for a solver on S^{dim−1}): refused (ValueError naming the mass)
        unless it is 1 within 1e-6 or ``normalize``; ValueError if the grid is not on S^{dim−1}."""

        if dim is not None and dim != self.dim:
            raise InvalidInput(f"`{name}` holds values on a grid of S^{self.dim - 1}; the solver is on S^{dim - 1}.")
        if abs(self.mass - 1.0) <= MASS_RTOL and not normalize:
            return self
        if not normalize:
            raise InvalidInput(f"`{name}`: the grid values must have mass Σ w_j ρ_j = 1 (the grid's quadrature for σ) "
                             f"within {MASS_RTOL:g}; they have {self.mass!r}. Pass normalize=True to rescale.")
        return GridValues(self.values, normalize=True)

    @staticmethod
    def _periodic(v, u):
        """Linear interpolation of periodic samples v[..., j] at fractional indices u (same leading shape)."""
        n = v.shape[-1]
        j = np.floor(u)
        f = u - j
        j = j.astype(np.int64) % n
        return np.take_along_axis(v, j, -1) * (1 - f) + np.take_along_axis(v, (j + 1) % n, -1) * f

    def _evaluate(self, x):
        if self.dim == 2:
            n = self.values.size
            u = (np.arctan2(x[..., 1], x[..., 0]) % (2 * np.pi)) * (n / (2 * np.pi)) - 0.5
            return self._periodic(np.broadcast_to(self.values, u.shape + (n,)), u[..., None])[..., 0]
        nt, nphi = self.values.shape
        flat = x.reshape(-1, 3)
        u = (np.arctan2(flat[:, 1], flat[:, 0]) % (2 * np.pi)) * (nphi / (2 * np.pi))
        # node values in z: north pole, the rings (north to south), south pole
        z_nodes = np.concatenate([[1.0], np.cos(self.theta), [-1.0]])
        z = np.clip(flat[:, 2], -1.0, 1.0)
        k = np.clip(np.searchsorted(-z_nodes, -z, side="right") - 1, 0, nt)      # z_nodes[k] >= z >= z_nodes[k+1]
        f = (z_nodes[k] - z) / (z_nodes[k] - z_nodes[k + 1])
        ring = np.vstack([np.full((1, nphi), self.values[0].mean()), self.values,
                          np.full((1, nphi), self.values[-1].mean())])
        top = self._periodic(ring[k], u[:, None])[:, 0]
        bottom = self._periodic(ring[k + 1], u[:, None])[:, 0]
        return (top * (1 - f) + bottom * f).reshape(x.shape[:-1])

    def __repr__(self):
        return f"on_grid(<{self.grid} values of shape {self.values.shape}>, mass={self.mass:g})"


def on_grid(values, normalize=False):
    """A density given by its values on a documented grid; every solver accepts it as ``initial``.

    * S^1: ``values`` of shape (n,) at the midpoints θ_j = 2π(j + ½)/n, x_j = (cos θ_j, sin θ_j)
      (`meanfield.spaces.quadrature.trapezoid(n)`); mass Σ_j values_j / n.
    * S^2: ``values`` of shape (ntheta, nphi) on the Gauss–Legendre grid
      `meanfield.spaces.quadrature.gauss_legendre_grid(ntheta, nphi)` (rings θ_i from north to south with
      cos θ_i the Gauss–Legendre nodes, φ_k = 2πk/nphi); mass Σ w_ik values_ik with its weights.

    `solvers.FourierCircle` and `solvers.SphericalHarmonics` take the exact discrete transform of
    the values (modes |k| < n/2, resp. degrees <= min(ntheta − 1, (nphi − 1)/2)); `solvers.Particles`
    the weighted grid measure; the other solvers the interpolant (`GridValues`), rescaled to the
    grid's mass.

    Parameters
    ----------
    values : (n,) or (ntheta, nphi) array
        σ-relative density values on the grid of S^1 or S^2 (dimensionless).
    normalize : bool
        Divide the values by their mass (else a solver refuses a mass other than 1 within 1e-6).

    Returns
    -------
    GridValues
        A density callable (the sign-keeping interpolant) that carries the values, the grid's
        points and weights and the mass.

    Raises
    ------
    ValueError
        Values of another shape, not finite, negative or with zero mass (naming the minimum).

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield import densities
    >>> rho = densities.on_grid(2.0 * np.ones((4, 8)), normalize=True)     # S^2: 4 rings, 8 longitudes
    >>> rho.dim, rho.grid, rho.mass, rho([0.0, 0.0, 1.0]).tolist()
    (3, 'gauss-legendre', 1.0, 1.0)
    """
    return GridValues(values, normalize=normalize)


def _entries(coefficients, name, width, what):
    """The rows of ``coefficients`` as a float array (n, width), each checked to be ``width`` finite numbers."""
    if isinstance(coefficients, np.ndarray):
        coefficients = coefficients.tolist()
    if not isinstance(coefficients, (list, tuple)) or not coefficients:
        raise InvalidInput(f"`{name}` must be a non-empty list of {what}, got {coefficients!r}.")
    rows = []
    for i, row in enumerate(coefficients):
        ok = isinstance(row, (list, tuple, np.ndarray)) and len(row) == width
        try:
            values = [float(v) for v in row] if ok and not any(isinstance(v, (bool, str)) for v in row) else None
        except (TypeError, ValueError):
            values = None
        if values is None or not np.all(np.isfinite(values)):
            raise InvalidInput(f"`{name}[{i}]` must be {what}, got {row!r}.")
        rows.append(values)
    return np.array(rows, dtype=float), list(coefficients)


def _integer(value, name, i, what, low, row):
    if value != np.floor(value) or value < low:
        raise InvalidInput(f"`{name}[{i}]` must be {what}, got {row!r}.")
    return int(value)


class FourierModes(Density):
    """ρ(θ) = 1 + Σ_j a_j cos(k_j θ + φ_j) on S^1, x = (cos θ, sin θ), from rows [k, amplitude, phase].

    Mass exactly 1 (k >= 1). In the σ-relative Fourier coefficients of `solvers.FourierCircle`
    (ρ = Σ c_k e^{ikθ}) the row adds (a/2)e^{iφ} to c_k. ρ must be non-negative: it is checked on
    max(4096, 64 max k) midpoints (a trigonometric polynomial of degree K varies by at most
    a K² (2π/n)²/8 between two of them), and a negative minimum is refused, naming ``name``.
    """

    dim = 2

    def __init__(self, coefficients, name="coefficients"):
        what = "[k, amplitude, phase] with k >= 1 an integer"
        rows, given = _entries(coefficients, name, 3, what)
        self.k = np.array([_integer(r[0], name, i, what, 1, given[i]) for i, r in enumerate(rows)])
        self.amplitude, self.phase = rows[:, 1].copy(), rows[:, 2].copy()
        n = max(4096, 64 * int(self.k.max()))
        theta = trapezoid(n).angles
        values = self.evaluate_angles(theta)
        j = int(np.argmin(values))
        if values[j] < 0:
            raise InvalidInput(f"`{name}` gives a density 1 + Σ a cos(kθ + φ) that is negative: its minimum is "
                             f"{values[j]:.3g} at θ = {theta[j]:.4g}; a density must be non-negative.")

    def evaluate_angles(self, theta):
        theta = np.asarray(theta, dtype=float)
        return 1.0 + np.cos(np.multiply.outer(theta, self.k) + self.phase) @ self.amplitude

    def fourier_coefficients(self, modes):
        """The σ-relative coefficients c_0..c_modes (complex) of ρ (as `solvers.FourierCircle` stores them)."""
        c = np.zeros(int(modes) + 1, dtype=complex)
        c[0] = 1.0
        keep = self.k <= modes
        np.add.at(c, self.k[keep], 0.5 * self.amplitude[keep] * np.exp(1j * self.phase[keep]))
        return c

    def _evaluate(self, x):
        return self.evaluate_angles(np.arctan2(x[..., 1], x[..., 0]))

    def __repr__(self):
        rows = [[int(k), float(a), float(p)] for k, a, p in zip(self.k, self.amplitude, self.phase)]
        return f"fourier_modes({rows})"


def fourier_modes(coefficients):
    """ρ(θ) = 1 + Σ_j a_j cos(k_j θ + φ_j) on S^1, x = (cos θ, sin θ), from rows [k, amplitude, phase].

    Mass exactly 1; the ``[initial] density = "fourier"`` of a run's configuration. In the σ-relative
    Fourier coefficients of `solvers.FourierCircle` (ρ = Σ c_k e^{ikθ}) the row adds (a/2)e^{iφ} to
    c_k (`FourierModes`).

    Parameters
    ----------
    coefficients : list of [k, amplitude, phase]
        k >= 1 an integer mode, the amplitude a (dimensionless), the phase φ in radians.

    Returns
    -------
    FourierModes
        A density callable on points of shape (..., 2).

    Raises
    ------
    ValueError
        Rows not of three numbers, k not an integer >= 1, or ρ negative somewhere (checked on
        max(4096, 64 max k) midpoints; the message gives the minimum and where).

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield import densities
    >>> rho = densities.fourier_modes([[2, 0.5, 0.0]])
    >>> np.round(rho(np.array([[1.0, 0.0], [0.0, 1.0]])), 6).tolist()
    [1.5, 0.5]
    >>> densities.fourier_modes([[1, 1.5, 0.0]])
    Traceback (most recent call last):
    ...
    meanfield.errors.InvalidInput: `coefficients` gives a density 1 + Σ a cos(kθ + φ) that is negative: its minimum is -0.5 ...
    """
    return FourierModes(coefficients)


class HarmonicSeries(Density):
    """ρ(x) = Σ_{l<=L} Σ_{m=0}^{l} [clm[0,l,m] R^c_lm(x) + clm[1,l,m] R^s_lm(x)] on S^2.

    The real harmonics are those of `real_sh` and of `solvers.SphericalHarmonics`: orthonormal in
    L²(σ), no Condon–Shortley phase (pyshtools '4pi', csphase=1), R^c_lm = real_sh(l, m),
    R^s_lm = real_sh(l, −m); so clm[0, 0, 0] is the mass. ``clm`` is the array
    `solvers.SphericalHarmonics` stores (``sol.data[i]``) and `meanfield.from_pyshtools` returns.
    Evaluated by ducc0's synthesis at arbitrary points (accuracy 1e-13 of the coefficients' norm).
    """

    dim = 3

    def __init__(self, clm, name="clm"):
        c = np.asarray(clm)
        if (c.ndim != 3 or c.shape[0] != 2 or c.shape[1] != c.shape[2] or not np.isrealobj(c)
                or not np.all(np.isfinite(c))):
            raise InvalidInput(f"`{name}` must be a finite real array of shape (2, L+1, L+1), got shape {c.shape}.")
        self.clm = np.array(c, dtype=float)
        self.clm.setflags(write=False)
        self.lmax = c.shape[1] - 1

    def minimum(self):
        """(min ρ, its point) on a Gauss–Legendre grid of 4(L + 1) rings and 8(L + 1) longitudes."""

        n = 4 * (self.lmax + 1)
        values = SphericalHarmonicSeries(self.lmax).grid_values(self.clm, n, 2 * n)
        pts = gauss_legendre_grid(n, 2 * n)[2]
        j = np.unravel_index(int(np.argmin(values)), values.shape)
        return float(values[j]), pts[j]

    def _evaluate(self, x):
        return synthesis_points(real_to_alm(self.clm), self.lmax, x)

    def __repr__(self):
        return f"HarmonicSeries(<clm of degree {self.lmax}>, mass={self.clm[0, 0, 0]:g})"


def spherical_harmonics(coefficients):
    """ρ = 1 + Σ a Y_lm on S^2 from rows [l, m, amplitude] (the ``[initial] density = "harmonics"``).

    Y_lm = `real_sh`(l, m): orthonormal in L²(σ), m > 0 cos(mφ), m < 0 sin(|m|φ) type, no
    Condon–Shortley phase. Mass exactly 1.

    Parameters
    ----------
    coefficients : list of [l, m, amplitude]
        Integers l >= 1 and −l <= m <= l, and the amplitude a (dimensionless).

    Returns
    -------
    HarmonicSeries
        A density callable on points of shape (..., 3).

    Raises
    ------
    ValueError
        Rows not of three numbers, (l, m) out of range, or a density negative on a fine grid
        (`HarmonicSeries.minimum`).

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield import densities
    >>> rho = densities.spherical_harmonics([[1, 0, 0.5]])       # 1 + 0.5·√3 cos θ
    >>> round(float(rho([0.0, 0.0, 1.0])), 6), rho.lmax
    (1.866025, 1)
    """
    name, what = "coefficients", "[l, m, amplitude] with l >= 1 and -l <= m <= l integers"
    rows, given = _entries(coefficients, name, 3, what)
    lm = []
    for i, r in enumerate(rows):
        l = _integer(r[0], name, i, what, 1, given[i])
        if r[1] != np.floor(r[1]) or abs(r[1]) > l:
            raise InvalidInput(f"`{name}[{i}]` must be {what}, got {given[i]!r}.")
        lm.append((l, int(r[1])))
    L = max(l for l, _ in lm)
    clm = np.zeros((2, L + 1, L + 1))
    clm[0, 0, 0] = 1.0
    for (l, m), r in zip(lm, rows):
        clm[0 if m >= 0 else 1, l, abs(m)] += r[2]
    rho = HarmonicSeries(clm)
    low, at = rho.minimum()
    if low < 0:
        raise InvalidInput(f"`{name}` gives a density 1 + Σ a Y_lm that is negative: its minimum is {low:.3g} at "
                         f"x = {np.round(at, 4).tolist()}; a density must be non-negative.")
    return rho


class StateDensity(Density):
    """The density of a saved state (a `meanfield.representations.State`), as a callable: ρ(x) =
    ``state.density(x)``, evaluated by the state's own representation (exact for the spectral series,
    the Lagrangian nodes and P1 fields). ``t`` is the time of the state in its run."""

    def __init__(self, state, source=""):
        self.state = state
        self.dim = state.representation.dim
        self.t = state.t
        self.source = source

    def _evaluate(self, x):
        return np.asarray(self.state.density(x), dtype=float)

    def __repr__(self):
        return f"from_file({self.source!r}: {self.state.representation.name} state at t = {self.t:g})"


class LayeredStateDensity(StateDensity):
    """The density of a saved layered (causal) state, ρ(σ, x) for every token position σ (docs/causal.md):
    called as ``f(x, s)`` it is the state's density at position s (interpolated in σ between the
    nodes of its rule), so a layered solver starts each position from its own; called as ``f(x)`` it is
    the x-marginal ∫_0^1 ρ(σ, x) dσ (what a run without a mask starts from)."""

    def __call__(self, x, *position):
        x = check_points(x, "x", dim=self.dim)
        if not position:
            return self._evaluate(x)
        rep = self.state.representation
        return np.asarray(rep.evaluate(self.state.data, x, position=float(position[0])), dtype=float)


class CellMeans(Density):
    """A density on S^2 with given mean values on the cells of `meanfield.spaces.gridded.sphere_cells` (n
    latitude bands of equal angle × 2n longitude cells), as `Solution.save(grid=True)` writes them.

    Since dσ = dz dλ/4π (z = sin(latitude), λ the longitude; Archimedes), ρ = 4π ∂_z∂_λ M with M(z, λ) the
    mass of [−1, z] × [0, λ]; M is known exactly at the cells' corners. In λ the cumulative mass of each
    band is interpolated, periodically, by the monotone piecewise-cubic Hermite (PCHIP, Fritsch–Butland)
    interpolant; in z, at each λ, the cumulative of these band densities likewise; ρ is 4π times the
    mixed derivative. So ρ is continuous (up to the seam at the poles), non-negative, and every cell
    mean, hence the mass, is the file's exactly (to round-off). For a smooth density the point error
    is O(h²) where ρ > 0 away from the poles, O(h) in the polar bands (z = sin(latitude) is not a
    smooth coordinate there), h = π/n; clusters narrower than a cell are spread over their cells.
    """

    dim = 3

    def __init__(self, means):
        v = np.array(means, dtype=float)
        if v.ndim != 2 or v.shape[1] != 2 * v.shape[0] or not np.all(np.isfinite(v)) or v.min() < 0:
            raise InvalidInput("`means` must be finite non-negative cell means of shape (n, 2n) (sphere_cells(n)), "
                             f"got shape {v.shape}.")
        self.grid = sphere_cells(v.shape[0])
        self.means = v
        self.means.setflags(write=False)
        self.mass = float(np.sum(v * self.grid.weights))
        n = v.shape[0]
        # band edges in z = sin(latitude), south to north (increasing)
        self._z_edges = np.append(np.sin(np.radians(self.grid.bounds["lat"][::-1, 1])), 1.0)
        dlam = 2 * np.pi / (2 * n)
        # mass per unit λ of each band, south to north, in each longitude cell: its λ-secant slopes
        self._s_lam = (v * self.grid.weights)[::-1] / dlam
        self._d_lam = _pchip_slopes(self._s_lam, np.full(2 * n, dlam), periodic=True)

    def _evaluate(self, x):
        n = self.means.shape[0]
        flat = x.reshape(-1, 3)
        lam = np.mod(np.arctan2(flat[:, 1], flat[:, 0]), 2 * np.pi)
        z = np.clip(flat[:, 2], -1.0, 1.0)
        dlam = 2 * np.pi / (2 * n)
        j = np.minimum((lam / dlam).astype(np.int64), 2 * n - 1)
        bands = _hermite_derivative(self._s_lam[:, j].T, self._d_lam[:, j].T, self._d_lam[:, (j + 1) % (2 * n)].T,
                                    (lam / dlam - j)[:, None])                     # (points, bands): ∂_λ M per band
        widths = np.diff(self._z_edges)
        s = bands / widths
        d = _pchip_slopes(s, widths, periodic=False)
        k = np.clip(np.searchsorted(self._z_edges, z, side="right") - 1, 0, n - 1)
        rows = np.arange(k.size)
        t = (z - self._z_edges[k]) / widths[k]
        rho = 4 * np.pi * _hermite_derivative(s[rows, k], d[rows, k], d[rows, k + 1], t)
        return rho.reshape(x.shape[:-1])

    def __repr__(self):
        n = self.means.shape[0]
        return f"CellMeans(<{n} x {2 * n} cell means>, mass={self.mass:g})"


def _pchip_slopes(s, widths, periodic):
    """Node derivatives of the monotone (Fritsch–Butland) piecewise-cubic Hermite interpolant of data
    whose secant slopes over cells of ``widths`` are ``s`` (..., N) (all >= 0 here): N + 1 nodes; with
    ``periodic`` the last node is the first. Each lies in [0, 3 min(adjacent slopes)], so the
    interpolant is monotone (its derivative >= 0)."""
    if periodic:
        sl, sr = np.roll(s, 1, axis=-1), s
        hl, hr = np.roll(widths, 1), widths
    else:
        sl, sr = s[..., :-1], s[..., 1:]
        hl, hr = widths[:-1], widths[1:]
    w1, w2 = 2 * hr + hl, hr + 2 * hl
    with np.errstate(divide="ignore", invalid="ignore"):
        d = np.where(sl * sr > 0, (w1 + w2) / (w1 / sl + w2 / sr), 0.0)
    if periodic:
        return np.concatenate([d, d[..., :1]], axis=-1)
    h0, h1 = widths[0], widths[1]
    start = np.clip(((2 * h0 + h1) * s[..., 0] - h0 * s[..., 1]) / (h0 + h1), 0.0, 3 * s[..., 0])
    h0, h1 = widths[-1], widths[-2]
    end = np.clip(((2 * h0 + h1) * s[..., -1] - h0 * s[..., -2]) / (h0 + h1), 0.0, 3 * s[..., -1])
    return np.concatenate([start[..., None], d, end[..., None]], axis=-1)


def _hermite_derivative(s, d0, d1, t):
    """The derivative at t ∈ [0, 1] of the cubic Hermite interpolant on a cell with secant slope s and end
    derivatives d0, d1: 6t(1 − t)s + (1 − 4t + 3t²)d0 + (3t² − 2t)d1 (its integral over the cell is s·width)."""
    return 6 * t * (1 - t) * s + (1 - 4 * t + 3 * t * t) * d0 + (3 * t * t - 2 * t) * d1
