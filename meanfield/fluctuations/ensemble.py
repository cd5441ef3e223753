"""Ensembles of n-token runs and their statistics (docs/fluctuations.md).

R realisations of n i.i.d. tokens are integrated by `solvers.Particles`, a batch of realisations per call
(one vectorised evaluation; on S^1 and S^2 the kernel sums are spectral, O(n) per token cloud), and only
the statistics are kept:

* the power P_l = |ρ̂_l|² (S^1, ρ̂_l = (1/n) Σ_j e^{−ilθ_j}) or Σ_m |ρ̂_lm|² (S^{d−1}), mean and standard
  error over the realisations;
* the pair correlation g_2(t, ψ): the density of the angle ψ between two distinct tokens relative to that
  of two independent uniform tokens (1 for i.i.d. uniform tokens);
* the order parameter r = |(1/n) Σ_j x_j|, every realisation (its law);
* on S^1 with ``pair_modes=P``, the means E ρ̂_k and E[ρ̂_a ρ̂_b] for |k|, |a|, |b| <= P (the one- and
  two-token Fourier moments of the BBGKY hierarchy, `meanfield.fluctuations.closure`);
* on S^1 with ``grid=G``, the densities of one token, of two and of three distinct tokens on G bins
  of the circle (f_1, f_2, f_3 relative to σ^{⊗k}), for the Kirkwood test of `second_equation`.
"""
from dataclasses import dataclass, field

import numpy as np
from scipy import special

from ..errors import InvalidInput
from ..measures.sampling import sample
from ..transformer.kernels import harmonic_dimension
from ..validation import check_callable, check_int, check_times
from .linear import check_model, check_modes, linear_prediction

BATCH_BYTES = 64 * 2 ** 20        # positions of one batch of realisations kept at the saved times


@dataclass
class Ensemble:
    """The statistics of R realisations of n tokens (see `ensemble`).

    Attributes
    ----------
    t : (T,) saved times.
    modes : (K,) the frequencies (S^1) or degrees l of ``power``.
    power, power_se : (T, K) the mean of P_l over the realisations and its standard error.
    angles : (G,) the angles ψ of ``g2`` (S^1: lags 2πm/(2G − 2), m = 0..G−1; S^{d−1}: bin centres).
    g2 : (T, G) the pair correlation g_2(t, ψ).
    order : (T, R) the order parameter r = |(1/n) Σ_j x_j| of each realisation.
    moments : (T, 2P + 1) complex E ρ̂_k, k = −P..P (S^1 with ``pair_modes=P`` > 0), else None.
    pair_moments : (T, 2P + 1, 2P + 1) complex E[ρ̂_a ρ̂_b], a, b = −P..P, else None.
    f1, f2, f3 : (T, G), (T, G, G), (T, G, G, G) binned densities of one token and of two and three distinct
        tokens relative to σ^{⊗k} (S^1 with ``grid=G`` > 0; bin i is [2πi/G, 2π(i+1)/G)), else None.
    """

    model: object
    n: int
    realizations: int
    t: np.ndarray
    modes: np.ndarray
    power: np.ndarray
    power_se: np.ndarray
    angles: np.ndarray
    g2: np.ndarray
    order: np.ndarray
    moments: np.ndarray = None
    pair_moments: np.ndarray = None
    f1: np.ndarray = None
    f2: np.ndarray = None
    f3: np.ndarray = None
    stats: dict = field(default_factory=dict)

    @property
    def pair_modes(self):
        """P, the highest |k| of ``moments`` (0 without them)."""
        return 0 if self.moments is None else (self.moments.shape[1] - 1) // 2

    def prediction(self):
        """The linear theory's E P_l(t) at the ensemble's times and modes (`linear_prediction`), (T, K)."""
        return linear_prediction(self.model, self.n, self.modes, self.t)

    def z_scores(self):
        """(power − prediction)/power_se, (T, K): within ±3 where the linear theory holds (for uniform
        initial tokens; NaN where the standard error is 0)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return (self.power - self.prediction()) / self.power_se

    def confidence(self, level=0.95):
        """The normal confidence interval of E P_l at ``level``: (low, high), each (T, K)."""
        z = special.ndtri(0.5 + 0.5 * level)
        return self.power - z * self.power_se, self.power + z * self.power_se

    def to_dataset(self):
        """The statistics as an `xarray.Dataset` (complex moments split into real and imaginary parts)."""
        import xarray as xr

        ds = xr.Dataset({"power": (("t", "mode"), self.power), "power_se": (("t", "mode"), self.power_se),
                         "prediction": (("t", "mode"), self.prediction()), "g2": (("t", "angle"), self.g2),
                         "order": (("t", "realization"), self.order)},
                        coords={"t": self.t, "mode": self.modes, "angle": self.angles})
        if self.moments is not None:
            k = np.arange(-self.pair_modes, self.pair_modes + 1)
            ds = ds.assign_coords(k=k, a=k, b=k)
            for name, dims, value in (("moments", ("t", "k"), self.moments),
                                      ("pair_moments", ("t", "a", "b"), self.pair_moments)):
                ds[name + "_re"], ds[name + "_im"] = (dims, value.real), (dims, value.imag)
        if self.f1 is not None:
            ds["f1"] = (("t", "bin_1"), self.f1)
            ds["f2"] = (("t", "bin_1", "bin_2"), self.f2)
            ds["f3"] = (("t", "bin_1", "bin_2", "bin_3"), self.f3)
        ds.attrs.update(n=self.n, realizations=self.realizations, beta=self.model.beta, dim=self.model.dim,
                        normalized=int(self.model.normalized), noise=self.model.noise,
                        description="statistics of an ensemble of n-token runs (docs/fluctuations.md)")
        return ds


# -------------------------------------------------------------------------------------------------
# statistics of a batch of clouds
# -------------------------------------------------------------------------------------------------
def circle_coefficients(x, kmax):
    """ρ̂_k = (1/n) Σ_j e^{−ikθ_j}, k = 0..kmax, of clouds x (..., n, 2): (..., kmax + 1) complex."""
    z = x[..., 0] - 1j * x[..., 1]
    out = np.empty(x.shape[:-2] + (kmax + 1,), dtype=complex)
    out[..., 0] = 1.0
    zk = np.ones_like(z)
    for k in range(1, kmax + 1):
        zk *= z
        out[..., k] = zk.mean(axis=-1)
    return out


def circle_pair_correlation(x, bins):
    """g_2 at the lags ψ_m = πm/(bins − 1), m = 0..bins−1, of each cloud x (..., n, 2): the pairs i ≠ j
    whose angles fall in circle bins m apart (of M = 2(bins − 1)), over n(n − 1)/M (their expected
    number for independent uniform tokens). One FFT of the bin counts per cloud."""
    M = 2 * (bins - 1)
    n = x.shape[-2]
    lead = int(np.prod(x.shape[:-2]))
    counts = bin_counts(circle_bins(x, M), M).reshape(lead, M)
    f = np.fft.rfft(counts, axis=-1)
    pairs = np.fft.irfft(np.abs(f) ** 2, n=M, axis=-1)[:, :bins]
    pairs[:, 0] -= n
    return (pairs / (n * (n - 1) / M)).reshape(x.shape[:-2] + (bins,))


def circle_bins(x, G):
    """The bin of each token of clouds x (..., n, 2) among G equal bins of the circle, starting at θ = 0."""
    theta = np.mod(np.arctan2(x[..., 1], x[..., 0]), 2 * np.pi)
    return np.minimum((theta * (G / (2 * np.pi))).astype(np.int64), G - 1)


def bin_counts(idx, G):
    """Counts (..., G) of the bin indices idx (..., n)."""
    lead = int(np.prod(idx.shape[:-1]))
    flat = idx.reshape(lead, -1) + G * np.arange(lead)[:, None]
    return np.bincount(flat.ravel(), minlength=lead * G).reshape(idx.shape[:-1] + (G,)).astype(float)


def distinct_densities(x, G):
    """Sums over the clouds x (T, B, n, 2) of the binned densities of one token and of two and three
    distinct tokens, relative to σ^{⊗k}: (T, G), (T, G, G), (T, G, G, G). Ordered triples of distinct
    tokens in bins (i, j, k) number h_i h_j h_k − δ_ij h_i h_k − δ_ik h_i h_j − δ_jk h_i h_j + 2 δ_ijk h_i
    (inclusion–exclusion over coincident tokens)."""
    n = x.shape[-2]
    h = bin_counts(circle_bins(x, G), G)
    s1 = h.sum(axis=1)
    s2 = np.einsum("tbi,tbj->tij", h, h)
    s3 = np.einsum("tbi,tbj,tbk->tijk", h, h, h)
    for i in range(G):
        s3[:, i, i, :] -= s2[:, i, :]
        s3[:, i, :, i] -= s2[:, i, :]
        s3[:, :, i, i] -= s2[:, :, i]
        s3[:, i, i, i] += 2 * s1[:, i]
    eye = np.arange(G)
    s2[:, eye, eye] -= s1
    return s1 * (G / n), s2 * (G * G / (n * (n - 1))), s3 * (G ** 3 / (n * (n - 1) * max(n - 2, 1)))


def _uniform_angle_cdf(psi, dim):
    """P(angle between two independent uniform points of S^{dim−1} <= ψ)."""
    a = 0.5 * (dim - 1)
    return 1.0 - special.betainc(a, a, 0.5 * (1.0 + np.cos(psi)))


def gegenbauer_sums(s, lmax, dim):
    """Σ over the entries of s of G_l(s), l = 0..lmax, with G_l the Gegenbauer polynomial of S^{dim−1}
    normalised by G_l(1) = 1 (Legendre on S^2; the three-term recurrence of C_l^α, α = (dim − 2)/2)."""
    alpha = 0.5 * (dim - 2)
    out = np.empty(lmax + 1)
    out[0] = s.size
    prev, cur = np.ones_like(s), 2 * alpha * s
    norm_prev, norm_cur = 1.0, 2 * alpha
    if lmax >= 1:
        out[1] = cur.sum() / norm_cur
    for l in range(1, lmax):
        nxt = (2 * (l + alpha) * s * cur - (l + 2 * alpha - 1) * prev) / (l + 1)
        norm_next = (2 * (l + alpha) * norm_cur - (l + 2 * alpha - 1) * norm_prev) / (l + 1)
        prev, cur, norm_prev, norm_cur = cur, nxt, norm_cur, norm_next
        out[l + 1] = cur.sum() / norm_cur
    return out


def sphere_statistics(x, modes, bins):
    """Degree-l powers Σ_m |ρ̂_lm|² = (N_l/n²) Σ_ij G_l(⟨x_i, x_j⟩) (addition theorem, `gegenbauer_sums`) and
    the angle histogram g_2 of clouds x (..., n, d), d >= 3: O(n²) each."""
    lead, (n, d) = x.shape[:-2], x.shape[-2:]
    flat = x.reshape(-1, n, d)
    N = harmonic_dimension(d, modes).astype(float)
    edges = np.linspace(0.0, np.pi, bins + 1)
    expected = n * (n - 1) * np.diff(_uniform_angle_cdf(edges, d))
    power = np.empty((len(flat), len(modes)))
    g2 = np.empty((len(flat), bins))
    iu = np.triu_indices(n, 1)
    for c, cloud in enumerate(flat):
        gram = np.clip(cloud @ cloud.T, -1.0, 1.0)
        power[c] = N * gegenbauer_sums(gram, int(np.max(modes)), d)[modes] / n ** 2
        hist = np.histogram(np.arccos(gram[iu]), bins=edges)[0]
        g2[c] = 2.0 * hist / expected
    return power.reshape(lead + (len(modes),)), g2.reshape(lead + (bins,))


def cloud_statistics(x, modes, bins, pair_modes=0):
    """The statistics of clouds x (T, B, n, d) (`Ensemble`): power (T, B, K), g2 (T, B, G), order (T, B),
    and on S^1 with pair_modes=P > 0 the coefficients ρ̂_k, k = −P..P, (T, B, 2P + 1)."""
    order = np.linalg.norm(x.mean(axis=-2), axis=-1)
    coeffs = None
    if x.shape[-1] == 2:
        c = circle_coefficients(x, max(int(np.max(modes)), pair_modes))
        power = np.abs(c[..., modes]) ** 2
        g2 = circle_pair_correlation(x, bins)
        if pair_modes:
            pos = c[..., :pair_modes + 1]
            coeffs = np.concatenate([np.conj(pos[..., :0:-1]), pos], axis=-1)
    else:
        power, g2 = sphere_statistics(x, modes, bins)
    return power, g2, order, coeffs


# -------------------------------------------------------------------------------------------------
# the ensemble
# -------------------------------------------------------------------------------------------------
def _initial(initial, n, dim, count, rng):
    """``count`` clouds of n i.i.d. tokens, (count, n, dim): uniform (None) or from the density ``initial``."""
    if initial is None:
        x = rng.standard_normal((count, n, dim))
        return x / np.linalg.norm(x, axis=-1, keepdims=True)
    return np.stack([sample(initial, n, dim, rng=rng)[0] for _ in range(count)])


def _check_closure_options(model, pair_modes, grid):
    """``pair_modes`` (>= 0) and ``grid`` (0 or 3..128), the statistics of the BBGKY closure: S^1 only."""
    pair_modes = check_int(pair_modes, "pair_modes", low=0)
    grid = check_int(grid, "grid", low=0, high=128)
    for name, value in (("pair_modes", pair_modes), ("grid", grid)):
        if value and model.dim != 2:
            raise InvalidInput(f"`{name}` (the statistics of the BBGKY closure) is for S^1 (dim = 2), "
                               f"got dim = {model.dim}.")
    if grid == 1 or grid == 2:
        raise InvalidInput(f"`grid` must be 0 (none) or at least 3 bins, got {grid}.")
    return pair_modes, grid


def _pair_angles(dim, bins):
    """The angles of the ``bins`` bins of the pair correlation g2: the nodes πj/(bins − 1) on S^1
    (`circle_pair_correlation`), the midpoints of equal bins of [0, π] otherwise (`sphere_statistics`)."""
    if dim == 2:
        return np.pi * np.arange(bins) / (bins - 1)
    edges = np.linspace(0.0, np.pi, bins + 1)
    return 0.5 * (edges[1:] + edges[:-1])


class _Sums:
    """The running sums over the realisations of `ensemble` (T saved times, K modes, R realisations):
    Σ power and Σ power² per mode, Σ g2, the order parameters of each realisation, and with the closure's
    statistics Σ of the coefficients, of their pair products and of the distinct-pair densities."""

    def __init__(self, T, K, R):
        self.power, self.power2, self.g2 = np.zeros((T, K)), np.zeros((T, K)), 0.0
        self.order = np.empty((T, R))
        self.coeff = self.pair = None
        self.dens = [0.0, 0.0, 0.0]
        self.done = 0

    def add(self, positions, modes, bins, pair_modes, grid):
        """Add the statistics (`cloud_statistics`, `distinct_densities` with ``grid``) of a batch of
        realisations (positions (T, B, n, d))."""
        power, g2, r, coeffs = cloud_statistics(positions, modes, bins, pair_modes)
        B = r.shape[1]
        self.power += power.sum(axis=1)
        self.power2 += (power ** 2).sum(axis=1)
        self.g2 = self.g2 + g2.sum(axis=1)
        self.order[:, self.done:self.done + B] = r
        if coeffs is not None:
            self.coeff = (0 if self.coeff is None else self.coeff) + coeffs.sum(axis=1)
            self.pair = (0 if self.pair is None else self.pair) + np.einsum("tba,tbc->tac", coeffs, coeffs)
        if grid:
            self.dens = [a + b for a, b in zip(self.dens, distinct_densities(positions, grid))]
        self.done += B

    def ensemble(self, model, n, t, modes, bins, grid, stats):
        """The `Ensemble` of the means over the R realisations (the standard error of the power's mean
        from its unbiased variance)."""
        R = self.order.shape[1]
        mean = self.power / R
        var = np.maximum(self.power2 / R - mean ** 2, 0.0) * R / (R - 1)
        return Ensemble(model, n, R, t, modes, mean, np.sqrt(var / R), _pair_angles(model.dim, bins), self.g2 / R,
                        self.order, None if self.coeff is None else self.coeff / R,
                        None if self.pair is None else self.pair / R,
                        *((d / R for d in self.dens) if grid else (None, None, None)), stats=stats)


def _batches(solver, t, R, batch, initial, n, rng, progress, options):
    """The solutions (positions saved at ``t``) of R realisations in batches of at most ``batch``: the
    batch's n-token clouds (`_initial`), then, with noise, a seed of its Brownian paths, from ``rng``."""
    from tqdm.auto import tqdm

    done = 0
    with tqdm(total=R, desc="realisations", disable=not progress) as bar:
        while done < R:
            B = min(batch, R - done)
            x0 = _initial(initial, n, solver.model.dim, B, rng)
            extra = {"rng": int(rng.integers(2 ** 63))} if solver.model.noise > 0 else {}
            yield solver.solve(x0, t, progress=False, save="positions", **extra, **options)
            done += B
            bar.update(B)

def ensemble(model, n, realizations, t_eval, rng=None, *, initial=None, modes=(1, 2, 3, 4), bins=65,
             pair_modes=0, grid=0, batch=None, progress=False, threads=None, **options):
    """The statistics of ``realizations`` runs of n i.i.d. tokens under ``model`` (`solvers.Particles`).

    Parameters
    ----------
    model : Model
        A zonal model on S^{d−1} ((SA) or (USA), noise allowed: the particles then take the
        Euler–Maruyama steps of ``dt``, an option to pass).
    n : int >= 2
        Tokens per realisation.
    realizations : int >= 2
        R, the number of independent realisations.
    t_eval : 1-D increasing times from 0
        Saved times of the statistics.
    rng : None, int or numpy Generator
        Seed of the initial tokens (and of the noise, one seed per batch drawn from it).
    initial : callable density, optional
        The law of the initial tokens (`meanfield.densities`); default uniform.
    modes : sequence of int >= 1
        The frequencies (S^1) or degrees of ``power``.
    bins : int >= 3
        Angles of g_2 (S^1: lags πm/(bins − 1), m = 0..bins − 1; S^{d−1}: bins of [0, π]).
    pair_modes : int >= 0
        On S^1, keep E ρ̂_k and E[ρ̂_a ρ̂_b] for |k|, |a|, |b| <= pair_modes (for `first_equation`).
    grid : int >= 0
        On S^1, keep the binned densities f_1, f_2, f_3 of one, two and three distinct tokens on ``grid``
        bins (for `second_equation`; memory T·grid³ doubles).
    batch : int >= 1, optional
        Realisations per Particles call (default: as many as keep 64 MB of positions).
    progress : bool
        A progress bar over the batches.
    threads : int, optional
        Threads of the kernel sums (`meanfield.threads`).
    **options
        Passed to ``Particles.solve`` (``rtol``, ``atol``, ``method``, ``dt``).

    Returns
    -------
    Ensemble

    Raises
    ------
    ValueError
        ``model`` not a zonal Model, ``n`` < 2, ``realizations`` < 2, bad ``t_eval``, ``modes``, ``bins``,
        ``pair_modes`` or ``grid`` (or either on S^{d−1}, d >= 3), ``batch``, or ``initial`` not callable.

    Examples
    --------
    >>> import numpy as np
    >>> import meanfield as mf
    >>> from meanfield import fluctuations
    >>> model = mf.Model(beta=1.0, dim=2, normalized=False)
    >>> ens = fluctuations.ensemble(model, 200, 64, [0.0, 1.0, 2.0], rng=0)
    >>> ens.power.shape, ens.g2.shape, ens.order.shape
    ((3, 4), (3, 65), (3, 64))
    >>> bool(np.all(np.abs(ens.z_scores()) < 4))          # the linear theory, within sampling error
    True
    """
    model = check_model(model)
    n = check_int(n, "n", low=2)
    R = check_int(realizations, "realizations", low=2)
    t = check_times(t_eval, "t_eval")
    modes = check_modes(modes)
    bins = check_int(bins, "bins", low=3)
    pair_modes, grid = _check_closure_options(model, pair_modes, grid)
    if initial is not None:
        check_callable(initial, "initial")
    per = max(1, BATCH_BYTES // (8 * len(t) * n * model.dim))
    batch = min(R, per) if batch is None else check_int(batch, "batch", low=1)
    rng = np.random.default_rng(rng)
    import solvers

    solver = solvers.Particles(model, diagnostics="none", threads=threads)
    sums, calls = _Sums(len(t), len(modes), R), []
    for sol in _batches(solver, t, R, batch, initial, n, rng, progress, options):
        calls.append(sol.stats.get("nfev"))
        sums.add(sol.positions, modes, bins, pair_modes, grid)
    return sums.ensemble(model, n, t, modes, bins, grid, {"batch": batch, "calls": len(calls), "nfev": calls})
