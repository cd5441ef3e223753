"""The laws of initial densities on S^{d-1}, relative to σ (the uniform probability measure;
docs/mathematics.md §2): uniform, von Mises–Fisher, mixtures, perturbations by harmonics, band-limited
and zonal laws, and the `Density` base class. Every one integrates to exactly 1 against σ.

The densities given by data (values on a grid, coefficients, saved states, files) are in
`meanfield.measures.tabulated`; `meanfield.measures.densities` (``mf.densities``) offers both.
"""
import numpy as np
from scipy.special import eval_chebyt, eval_gegenbauer

from .._docs import doc_params
from ..validation import NORMALIZE_POINTS, check_int, check_points, check_real, check_weights
from ..transformer.kernels import harmonic_dimension, kernel_multipliers
from ..spaces.quadrature import fibonacci, trapezoid
from ..spaces.harmonics import real_sh
from ..errors import InvalidInput


class Density:
    """Base class: ``__call__(x)`` evaluates ρ at points x of shape (..., d)."""

    dim = None  # fixed dimension, or None if the density works on every sphere

    def __call__(self, x):
        x = check_points(x, "x", dim=self.dim)
        return self._evaluate(x)

    def _evaluate(self, x):
        raise NotImplementedError

    def __add__(self, other):
        return NotImplemented


class Uniform(Density):
    """ρ ≡ 1, the uniform density (σ itself)."""

    def _evaluate(self, x):
        return np.ones(x.shape[:-1])

    def __repr__(self):
        return "uniform()"


def uniform():
    """The uniform density ρ ≡ 1 on any sphere (σ itself).

    Returns
    -------
    Density
        A callable ``f(x)`` on points of shape (..., d), returning ones of shape (...).

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield import densities
    >>> densities.uniform()(np.eye(3)).tolist()
    [1.0, 1.0, 1.0]
    """
    return Uniform()


class VonMisesFisher(Density):
    """ρ(x) = e^{κ⟨μ,x⟩} / a_0(κ), with a_0(κ) = ∫ e^{κ⟨μ,y⟩} dσ(y) = Γ(d/2)(2/κ)^{(d-2)/2} I_{(d-2)/2}(κ).

    Evaluated as e^{κ(⟨μ,x⟩−1)} / (a_0(κ) e^{−κ}), stable for large κ. κ = 0 is the uniform density.
    ``normalize=True`` takes the direction of a non-unit ``mean``.
    """

    def __init__(self, mean, kappa, normalize=False):
        mean = np.asarray(mean, dtype=float)
        if mean.ndim != 1:
            raise InvalidInput(f"`mean` must be a unit vector of shape (d,), got shape {mean.shape}.")
        self.mean = check_points(mean, "mean", normalize=normalize, hint=NORMALIZE_POINTS)
        self.kappa = check_real(kappa, "kappa", low=0.0)
        self.dim = self.mean.shape[0]
        self._log_norm = np.log(kernel_multipliers(self.kappa, self.dim, 0, scaled=True)[0])

    def _evaluate(self, x):
        return np.exp(self.kappa * (x @ self.mean - 1.0) - self._log_norm)

    def __repr__(self):
        return f"von_mises_fisher(mean={self.mean.tolist()}, kappa={self.kappa:g})"


def von_mises_fisher(mean, kappa, normalize=False):
    """Von Mises–Fisher density ρ(x) = e^{κ⟨μ,x⟩} / a_0(κ) with mean direction μ and concentration κ.

    a_0(κ) = ∫ e^{κ⟨μ,y⟩} dσ(y) = Γ(d/2)(2/κ)^{(d-2)/2} I_{(d-2)/2}(κ) (`meanfield.kernel_multipliers`),
    so that the density integrates to 1 against σ; evaluated stably for large κ (`VonMisesFisher`).

    Parameters
    ----------
    mean : (d,) array
        The mean direction μ, a unit vector of R^d; any non-zero vector with ``normalize=True``. It
        fixes the sphere S^{d-1}.
    kappa : float >= 0
        Concentration κ (dimensionless); κ = 0 is the uniform density.
    normalize : bool
        Take the direction of a non-unit ``mean`` instead of refusing it.

    Returns
    -------
    Density
        A callable ``f(x)`` on points x of shape (..., d), returning ρ(x) of shape (...).

    Raises
    ------
    ValueError
        ``mean`` not of shape (d,) or not a unit vector (without ``normalize``), ``kappa`` < 0.

    Examples
    --------
    >>> import meanfield as mf
    >>> from meanfield import densities
    >>> rho = densities.von_mises_fisher([0.0, 0.0, 1.0], 5.0)
    >>> round(float(rho([0.0, 0.0, 1.0])), 6)            # κ/(1 − e^{−2κ}) at the mean on S^2
    10.000454
    >>> x, w = mf.sample(densities.uniform(), 20000, 3, method="quasi")
    >>> round(float(w @ rho(x)), 6)                        # mass 1 against σ
    1.0
    """
    return VonMisesFisher(mean, kappa, normalize=normalize)


class Mixture(Density):
    """ρ = Σ_k w_k ρ_k with w_k >= 0, Σ w_k = 1."""

    def __init__(self, components, weights=None):
        components = list(components)
        if not components:
            raise InvalidInput("`components` must be a non-empty list of densities.")
        for i, c in enumerate(components):
            if not callable(c):
                raise InvalidInput(f"`components[{i}]` must be a density callable, got {type(c).__name__}.")
        if weights is None:
            weights = np.full(len(components), 1.0 / len(components))
        self.weights = check_weights(weights, len(components), "weights")
        self.components = components
        dims = {c.dim for c in components if getattr(c, "dim", None) is not None}
        if len(dims) > 1:
            raise InvalidInput(f"`components` live on spheres of different dimensions {sorted(dims)}.")
        self.dim = dims.pop() if dims else None

    def _evaluate(self, x):
        return sum(w * np.asarray(c(x), dtype=float) for w, c in zip(self.weights, self.components))

    def __repr__(self):
        return f"mixture({self.components!r}, weights={self.weights.tolist()})"


@doc_params
def mixture(components, weights=None):
    """Convex combination ρ = Σ_k w_k ρ_k of densities, w_k >= 0, Σ w_k = 1.

    Parameters
    ----------
    components : list of density callables
        The densities ρ_k, each ``f(x)`` on points of shape (..., d) (of `meanfield.measures.densities` or the
        user's own), on the same sphere.
    weights : (K,) array, optional
        The weights w_k, non-negative and summing to 1 (default: equal weights 1/K).

    {density_returns}

    Raises
    ------
    ValueError
        ``components`` empty, not callables or on spheres of different dimensions; ``weights`` of the
        wrong length, negative or not summing to 1.

    Examples
    --------
    >>> import numpy as np
    >>> import meanfield as mf
    >>> from meanfield import densities
    >>> rho = densities.mixture([densities.von_mises_fisher([1.0, 0.0], 4.0),
    ...                          densities.von_mises_fisher([-1.0, 0.0], 4.0)], [0.25, 0.75])
    >>> np.round(rho(np.array([[1.0, 0.0], [-1.0, 0.0]])), 6).tolist()
    [1.208934, 3.62356]
    >>> x, w = mf.sample(densities.uniform(), 1000, 2, method="quasi")
    >>> round(float(w @ rho(x)), 6)
    1.0
    """
    return Mixture(components, weights)


def _zonal_harmonic(l, dim, t):
    """Zonal degree-l harmonic on S^{d-1} with unit L²(σ) norm: sqrt(dim H_l) C_l^λ(t)/C_l^λ(1)."""


    n = float(harmonic_dimension(dim, l))
    if dim == 2:
        return np.sqrt(n) * eval_chebyt(l, t)
    lam = 0.5 * (dim - 2)
    return np.sqrt(n) * eval_gegenbauer(l, lam, t) / eval_gegenbauer(l, lam, 1.0)


class PerturbedUniform(Density):
    """ρ = 1 + amplitude·Y(x) with Y a degree-``degree`` harmonic (mass exactly 1 for degree >= 1).

    * On S^1 (dim 2): Y = cos(k(θ − phase)) — the plain cosine, so ρ0 = 1 + ε cos(kθ).
    * On S^2 (dim 3) with ``order=m``: Y = Y_{l,m}, the real harmonic orthonormal in L²(σ)
      (m > 0 cosine, m < 0 sine type, no Condon–Shortley phase), after rotating x by ``rotation``.
    * On S^{d-1}, d >= 4: the zonal harmonic about ``axis`` with unit L²(σ) norm (order must be 0).
    """

    def __init__(self, amplitude, degree, order=0, dim=None, phase=0.0, axis=None):
        self.amplitude = check_real(amplitude, "amplitude")
        self.degree = check_int(degree, "degree", low=1)
        self.order = check_int(order, "order", low=-self.degree, high=self.degree)
        self.phase = check_real(phase, "phase")
        self.dim = None if dim is None else check_int(dim, "dim", low=2)
        self.axis = None if axis is None else check_points(np.asarray(axis, dtype=float), "axis")
        if self.axis is not None:
            if self.dim is not None and self.axis.shape[0] != self.dim:
                raise InvalidInput(f"`axis` must have length dim={self.dim}.")
            self.dim = self.axis.shape[0]

    def _evaluate(self, x):
        d = x.shape[-1]
        if d == 2:
            theta = np.arctan2(x[..., 1], x[..., 0])
            y = np.cos(self.degree * (theta - self.phase)) if self.order >= 0 else np.sin(self.degree * (theta - self.phase))
        elif d == 3 and self.axis is None:
            y = real_sh(self.degree, self.order, x)
        else:
            if self.order != 0:
                raise InvalidInput("`order` must be 0 for perturbed_uniform on S^{d-1} with d >= 4 (zonal only) "
                                 "or when `axis` is given.")
            axis = self.axis if self.axis is not None else np.eye(d)[-1]
            y = _zonal_harmonic(self.degree, d, np.clip(x @ axis, -1, 1))
        return 1.0 + self.amplitude * y

    def __repr__(self):
        return f"perturbed_uniform(amplitude={self.amplitude:g}, degree={self.degree}, order={self.order})"


@doc_params
def perturbed_uniform(amplitude, degree, order=0, dim=None, phase=0.0, axis=None):
    """ρ = 1 + amplitude·Y_degree: the linear-stability initial datum (docs/mathematics.md §5).

    Y is a harmonic of degree ``degree`` (so the mass is exactly 1), chosen by the sphere of the
    points it is evaluated on (`PerturbedUniform`):

    * S^1 (d = 2): Y = cos(k(θ − phase)) (``order`` < 0: sin), so ρ0 = 1 + ε cos(kθ);
    * S^2 (d = 3) with ``order=m``: Y = Y_{l,m}, the real harmonic orthonormal in L²(σ) (m > 0 cosine,
      m < 0 sine type, no Condon–Shortley phase);
    * S^{d-1}, d >= 4, or any d with ``axis``: the zonal harmonic about ``axis`` (default e_d) with unit
      L²(σ) norm (``order`` must be 0).

    Parameters
    ----------
    amplitude : float
        ε; ρ >= 0 needs |ε| <= 1/max|Y|.
    degree : int >= 1
        The degree l (the Fourier mode k on S^1).
    order : int, -degree <= order <= degree
        The order m on S^2 (its sign picks cos or sin on S^1).
    dim : int >= 2, optional
        Fix the sphere S^{dim-1} (default: any).
    phase : float
        Phase of the cosine on S^1, in radians.
    axis : (d,) array, optional
        Unit vector: the axis of a zonal harmonic (fixes d).

    {density_returns}

    Raises
    ------
    ValueError
        ``degree`` < 1, ``order`` out of range (or non-zero for a zonal harmonic, on evaluation),
        ``axis`` not a unit vector of length ``dim``.

    Examples
    --------
    >>> import numpy as np
    >>> import meanfield as mf
    >>> from meanfield import densities
    >>> rho = densities.perturbed_uniform(0.1, 3, dim=2)         # 1 + 0.1 cos 3θ
    >>> np.round(rho(np.array([[1.0, 0.0], [0.0, 1.0]])), 6).tolist()
    [1.1, 1.0]
    >>> x, w = mf.sample(densities.uniform(), 1000, 2, method="quasi")
    >>> round(float(w @ rho(x)), 9)
    1.0
    """
    return PerturbedUniform(amplitude, degree, order=order, dim=dim, phase=phase, axis=axis)


class BandLimited(Density):
    """ρ = 1 + Σ_l c_l·Y_l: a random band-limited density on S^1 or S^2, shifted to be >= ``floor``."""

    def __init__(self, dim, lmax, rng=None, scale=1.0, floor=0.05):
        self.dim = check_int(dim, "dim", low=2, high=3)
        self.lmax = check_int(lmax, "lmax", low=1, high=1024 if self.dim == 2 else 32)   # its terms are summed on a grid
        rng = np.random.default_rng(rng)
        if self.dim == 2:
            self.terms = [(k, o, rng.standard_normal() / k) for k in range(1, self.lmax + 1) for o in (0, -1)]
        else:
            self.terms = [(l, m, rng.standard_normal() / (l + 1)) for l in range(1, self.lmax + 1) for m in range(-l, l + 1)]
        self._raw = 0.0
        # fix amplitude so the minimum on a fine grid is `floor`
        grid = (trapezoid(4096) if self.dim == 2 else fibonacci(20000)).points
        pert = self._perturbation(grid)
        lo = float(pert.min())
        self.amp = scale if lo >= 0 else min(scale, (1 - floor) / (-lo))

    def _perturbation(self, x):
        out = np.zeros(x.shape[:-1])
        for l, m, c in self.terms:
            if self.dim == 2:
                theta = np.arctan2(x[..., 1], x[..., 0])
                out += c * (np.cos(l * theta) if m == 0 else np.sin(l * theta))
            else:
                out += c * real_sh(l, m, x)
        return out

    def _evaluate(self, x):
        return 1.0 + self.amp * self._perturbation(x)


def band_limited(dim, lmax, rng=None, scale=1.0, floor=0.05):
    """A random band-limited density of degree <= lmax on S^1 or S^2 with minimum >= floor."""
    return BandLimited(dim, lmax, rng=rng, scale=scale, floor=floor)


def _last_axis(dim):
    e = np.zeros(dim)
    e[-1] = 1.0
    return e


class Zonal(Density):
    """ρ(x) = f(⟨x, e⟩): a zonal density given by its profile f on [−1, 1] and the axis e (default e_d).

    f must be vectorised over s; the mass is ∫ f(⟨x, e⟩) dσ = c_d ∫ f(s)(1 − s²)^{(d−3)/2} ds (the law of
    s under σ), to be made 1 by the caller (or pass ``normalize=True`` to the solver).
    """

    def __init__(self, profile, dim=None, axis=None):
        if not callable(profile):
            raise InvalidInput(f"`profile` must be a callable f(s) on [-1, 1], got {type(profile).__name__}.")
        self.profile = profile
        self.dim = None if dim is None else check_int(dim, "dim", low=2)
        self.axis = None if axis is None else check_points(np.asarray(axis, dtype=float), "axis", normalize=True)
        if self.axis is not None:
            if self.dim is not None and self.axis.shape != (self.dim,):
                raise InvalidInput(f"`axis` must have length dim={self.dim}, got shape {self.axis.shape}.")
            self.dim = self.axis.shape[0]

    def axis_in(self, dim):
        """The axis e on S^{dim−1} (e_d unless given)."""
        return _last_axis(dim) if self.axis is None else self.axis

    def _evaluate(self, x):
        s = np.clip(x @ self.axis_in(x.shape[-1]), -1.0, 1.0)
        return np.asarray(self.profile(s), dtype=float)

    def __repr__(self):
        return f"zonal({self.profile!r}, dim={self.dim})"


def zonal(profile, dim=None, axis=None):
    """The zonal density ρ(x) = profile(⟨x, axis⟩) (axis default e_d); see `Zonal`."""
    return Zonal(profile, dim=dim, axis=axis)


def zonal_profile(density, dim):
    """(f, e) with density(x) = f(⟨x, e⟩) for the densities known to be zonal on S^{dim−1} (`Zonal`,
    `VonMisesFisher` about its mean, `Uniform`), else None."""
    if isinstance(density, Zonal) and density.dim in (None, dim):
        return density.profile, density.axis_in(dim)
    if isinstance(density, VonMisesFisher) and density.dim == dim:
        return (lambda s: np.exp(density.kappa * (np.asarray(s) - 1.0) - density._log_norm)), density.mean
    if isinstance(density, Uniform):
        return (lambda s: np.ones(np.shape(s))), _last_axis(dim)
    return None


class SeededPerturbation(Density):
    """ρ_0 = 1 + ε Σ_{l=1..L} Y_l: equal amplitudes on the degrees 1..L, seeded (mass exactly 1).

    The near-uniform start of the metastability experiment (Section 6.3 and Problem 1 of the paper;
    docs/mathematics.md §5): every degree grows at its own linear rate ς_l, and the fastest, k*(β),
    sets the number of clusters that form first.

    * S^1: Y_l = cos(l θ + φ_l) with phases φ_l uniform on [0, 2π);
    * S^2: Y_l = 2^{-1/2} Σ_m u_{lm} Y_{lm} with (u_{lm})_m uniform on the unit sphere of R^{2l+1} and
      Y_{lm} the real harmonics orthonormal in L²(σ), so that ‖Y_l‖_{L²(σ)} = 2^{-1/2} = ‖cos(lθ)‖ on S^1.
    """

    def __init__(self, dim, epsilon=1e-4, degrees=8, seed=0):
        self.dim = check_int(dim, "dim", low=2, high=3)
        self.epsilon = check_real(epsilon, "epsilon", low=0.0)
        self.degrees = check_int(degrees, "degrees", low=1, high=64)
        self.seed = seed
        rng = np.random.default_rng(seed)
        if self.dim == 2:
            self.phases = rng.uniform(0.0, 2 * np.pi, self.degrees)
        else:
            self.coefficients = []
            for l in range(1, self.degrees + 1):
                u = rng.standard_normal(2 * l + 1)
                self.coefficients.append(u / np.linalg.norm(u) / np.sqrt(2.0))
        ls = np.arange(1, self.degrees + 1)
        bound = float(ls.size if self.dim == 2 else np.sum(np.sqrt((2 * ls + 1) / 2.0)))    # Σ_l sup|Y_l|
        if self.epsilon * bound >= 1.0:
            raise InvalidInput(f"`epsilon`={epsilon:g} is too large for {degrees} degrees: ρ_0 could be negative; "
                             f"use epsilon < {1.0 / bound:.3g}.")

    def component(self, l, x):
        """Y_l(x), the degree-l term without the factor ε."""
        x = np.asarray(x, dtype=float)
        if self.dim == 2:
            return np.cos(l * np.arctan2(x[..., 1], x[..., 0]) + self.phases[l - 1])
        return sum(c * real_sh(l, m, x) for m, c in zip(range(-l, l + 1), self.coefficients[l - 1]))

    def _evaluate(self, x):
        return 1.0 + self.epsilon * sum(self.component(l, x) for l in range(1, self.degrees + 1))

    def __repr__(self):
        return (f"seeded_perturbation(dim={self.dim}, epsilon={self.epsilon:g}, degrees={self.degrees}, "
                f"seed={self.seed})")


def seeded_perturbation(dim, epsilon=1e-4, degrees=8, seed=0):
    """ρ_0 = 1 + ε Σ_{l=1..L} Y_l, the seeded near-uniform density of `SeededPerturbation`."""
    return SeededPerturbation(dim, epsilon, degrees, seed)
