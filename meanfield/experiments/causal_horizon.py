"""The causal mean-field horizon: how long n tokens in order follow the layered continuity equation
(docs/causal.md, "The mean-field horizon").

n masked particles (`solvers.Particles`, tokens from `meanfield.sample_tokens`) and the layered continuum
of the same density (`solvers.FourierCircle` / `solvers.SphericalHarmonics` with ``positions``, handed
over to the labels `solvers.Lagrangian` when the clusters sharpen) agree early on and separate later:

* the **quarter gap** at time t is, for each quarter of the positions (0, 1/4], ..., (3/4, 1], the
  distance between the tokens' mean direction and the continuum's mean of x over those positions
  (`quarter_gaps`);
* the **horizon** t_h(n) is the first time at which the largest quarter gap exceeds a threshold (0.05),
  by linear interpolation between saved times (`horizon`);
* its growth with n is fitted both as t_h = a + b log n and as t_h = c n^p (`growth_fit`).

The mechanism (Karagodin, Polyanskiy, Rigollet, *Clustering in causal attention masking*, 2024): under a
causal mask the first token never moves and every later one converges to it, so the particles'
long-time state is decided by the first few tokens, a discrete set whose fluctuations do not average
out; the continuum's position σ → 0 is a density that follows the unmasked equation, with no such
token. The limits n → ∞ and t → ∞ do not commute: the layered equation describes n tokens up to t_h(n).
"""
from dataclasses import dataclass

import numpy as np

from ..transformer.model import Model
from ..measures.sampling import sample_tokens
import solvers

THRESHOLD = 0.05
QUARTER_NODES = 8          # Gauss–Legendre positions per quarter for the continuum's mean


def default_density(dim):
    """The initial density of the measurement, the same at every position: a tilt and a degree-2 mode,
    1 + 0.6 x_1 + 0.6 x_1 x_2 (= 1 + 0.6 cos θ + 0.3 sin 2θ) on S^1, 1 + 0.6 x_3 + 0.9 x_1 x_2 on S^2 (mass 1)."""
    if dim == 2:
        return lambda x: 1 + 0.6 * x[..., 0] + 0.6 * x[..., 0] * x[..., 1]
    return lambda x: 1 + 0.6 * x[..., 2] + 0.9 * x[..., 0] * x[..., 1]


def quarter_gaps(tokens, continuum, index):
    """(4,) the distance between the mean of the tokens (n, d) in each quarter of the positions j/n and
    the mean of x under the continuum's ρ(t_index, σ, ·), averaged over σ in the quarter (8 Gauss–Legendre
    positions; `Solution.measure` at a position works before and after a hand-over to the labels)."""
    n = len(tokens)
    g, gw = np.polynomial.legendre.leggauss(QUARTER_NODES)
    out = np.empty(4)
    for k in range(4):
        a, b = k / 4, (k + 1) / 4
        mean = 0.0
        for gi, wi in zip(g, gw):
            points, weights = continuum.measure(index, position=0.5 * (a + b) + 0.5 * (b - a) * gi)
            mean = mean + 0.5 * wi * (weights @ points) / weights.sum()
        out[k] = np.linalg.norm(tokens[k * n // 4:(k + 1) * n // 4].mean(0) - mean)
    return out


@dataclass
class Horizon:
    """The measurement of one (dim, n): saved ``times``, ``gaps`` (T, 4) per quarter, the horizon
    ``t_horizon`` (NaN if the gap stays below the threshold up to the last time), ``n``, ``dim``."""

    dim: int
    n: int
    times: np.ndarray
    gaps: np.ndarray
    t_horizon: float
    threshold: float


def continuum_run(model, rho0, times, resolution=None, positions=16, nodes=None):
    """The layered continuum of ``rho0`` at ``times``: FourierCircle (48 modes) or SphericalHarmonics (lmax
    24) with ``positions``, handed over to ``nodes`` labels per position when the clusters sharpen."""
    if model.dim == 2:
        solver = solvers.FourierCircle(model, resolution or 48, positions=positions)
    else:
        solver = solvers.SphericalHarmonics(model, resolution or 24, positions=positions)
    handover = {"nodes": nodes or (64 if model.dim == 2 else 200)}
    return solver.solve(rho0, times, on_underresolved=handover, rtol=1e-8, atol=1e-10, progress=False)


def horizon(dim, n, *, beta=4.0, position_bias=1.0, t_end=12.0, dt=0.5, threshold=THRESHOLD, rho0=None, seed=0,
            continuum=None, threads=None):
    """The quarter gaps of n tokens against the continuum over t ∈ [0, t_end] (saved every ``dt``) and the
    horizon: the first time the largest gap exceeds ``threshold`` ((SA), mask "causal", S^{dim−1}).

    Parameters
    ----------
    dim : 2 or 3.
    n : the number of tokens (quasi-random, `meanfield.sample_tokens`, in order).
    beta, position_bias : the model's β and ALiBi slope λ.
    t_end, dt : the saved times 0, dt, ..., t_end.
    threshold : the gap that ends the horizon (default 0.05).
    rho0 : the initial density ρ0(x) or ρ0(x, s) (default `default_density`).
    seed : the quasi-random shift of the tokens.
    continuum : a continuum Solution at the same times to reuse (default `continuum_run`).
    threads : the particles' threads.

    Returns
    -------
    `Horizon`, and the continuum Solution (to reuse for other n).
    """
    model = Model(beta, dim, mask="causal", position_bias=position_bias)
    rho0 = default_density(dim) if rho0 is None else rho0
    times = np.round(np.arange(0.0, t_end + 0.5 * dt, dt), 12)
    if continuum is None:
        continuum = continuum_run(model, rho0, times)
    tokens, _ = sample_tokens(rho0, n, dim, method="quasi", rng=seed)
    particles = solvers.Particles(model, diagnostics="none", threads=threads).solve(tokens, times, rtol=1e-7,
                                                                                   atol=1e-9, progress=False)
    gaps = np.array([quarter_gaps(particles.positions[i], continuum, i) for i in range(len(times))])
    return Horizon(dim, n, times, gaps, crossing(times, gaps.max(axis=1), threshold), threshold), continuum


def crossing(times, values, threshold):
    """The first time ``values`` exceeds ``threshold``, linear between saved times; NaN if never."""
    above = np.flatnonzero(values > threshold)
    if not above.size:
        return float("nan")
    i = int(above[0])
    if i == 0:
        return float(times[0])
    t0, t1, v0, v1 = times[i - 1], times[i], values[i - 1], values[i]
    return float(t0 + (threshold - v0) * (t1 - t0) / (v1 - v0))


def growth_fit(ns, t_horizon):
    """Least-squares fits of t_h(n): {"log": (a, b, rms) of a + b log n, "power": (c, p, rms) of c n^p}."""
    ns, t = np.asarray(ns, dtype=float), np.asarray(t_horizon, dtype=float)
    b, a = np.polyfit(np.log(ns), t, 1)
    log_rms = float(np.sqrt(np.mean((a + b * np.log(ns) - t) ** 2)))
    p, logc = np.polyfit(np.log(ns), np.log(t), 1)
    power_rms = float(np.sqrt(np.mean((np.exp(logc) * ns ** p - t) ** 2)))
    return {"log": (float(a), float(b), log_rms), "power": (float(np.exp(logc)), float(p), power_rms)}


__all__ = ["Horizon", "THRESHOLD", "continuum_run", "crossing", "default_density", "growth_fit", "horizon",
           "quarter_gaps"]
