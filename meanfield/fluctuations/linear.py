"""The linear theory of the fluctuations of n i.i.d. uniform tokens about the uniform state
(Problem 4 of the paper; docs/fluctuations.md, docs/mathematics.md §18).

The empirical measure μ_n = (1/n) Σ_j δ_{x_j} solves the continuity equation of the mean field exactly.
Write μ_n = σ + η: the uniform state σ does not move (v[σ] = 0), so to first order in η each harmonic
coefficient obeys dη̂_lm/dt = ς_l η̂_lm, with ς_l the continuum's growth rate about σ
(`meanfield.linear_growth_rates`, docs/mathematics.md §5). For i.i.d. uniform tokens E|η̂_lm(0)|² = 1/n,
and the noise of each token (dx = ... + sqrt(2ν) P_x∘dB) adds 2ν l(l+d−2)/n per unit time to the
second moment (Itô's formula and Σ_m |∇Y_lm|² = l(l+d−2) N_l). The degree-l power
P_l = Σ_m |ρ̂_lm|² then has the mean

    E P_l(t) = (N_l/n) [ e^{2ς_l t} + 2ν l(l+d−2) t · (e^{2ς_l t} − 1)/(2ς_l t) ],

exactly for the linearised dynamics, with N_l = 1 on S^1 (the complex coefficient ρ̂_k = (1/n) Σ_j e^{−ikθ_j},
k >= 1) and N_l = dim H_l on S^{d−1}, d >= 3 (the coefficients of the real harmonics orthonormal in
L²(σ)). The neglected term is quadratic in η: the prediction holds while E P_l stays small against 1.

**Mode coupling (second order, S^1, (USA) without noise).** In Fourier the quadratic term is
dρ̂_k/dt ∋ Σ_{a ≠ 0, k} k a c_a ρ̂_a ρ̂_{k−a} (c_a = v I_a(β)/β, ς_a = a² c_a). Driven by the linear modes it
adds B_k(t) = e^{ς_k t} Σ_a k a c_a ρ̂_a(0) ρ̂_{k−a}(0) E(μ_a, t), μ_a = ς_a + ς_{k−a} − ς_k,
E(μ, t) = (e^{μt} − 1)/μ, and for i.i.d. uniform tokens (Wick's rule at leading order in 1/n)

    E|B_k(t)|² = (e^{2ς_k t}/n²) Σ_{a ≠ 0, k} k² a c_a (a c_a + (k − a) c_{k−a}) E(μ_a, t)².

Its ratio to the linear term grows as e^{2μ_a t}/n: a slow mode k fed by two fast ones (k = 3 by 1 + 2 at
β = 1) leaves the linear theory first, long before the fast modes reach order one. The terms left out
(the cross term with B_k, the third order) are smaller by a factor of order max_a E|ρ̂_a|².
"""
import numpy as np

from ..errors import InvalidInput, UnsupportedModel
from ..transformer.kernels import harmonic_dimension, kernel_multipliers, linear_growth_rates
from ..transformer.model import Model
from ..validation import check_int, check_real


def check_model(model, name="model"):
    """A zonal `meanfield.Model` without mask, schedule or MLP: the dynamics whose uniform state the linear
    theory linearises about."""
    if not isinstance(model, Model):
        raise InvalidInput(f"`{name}` must be a meanfield.Model, got {type(model).__name__}.")
    if not model.is_zonal or model.is_causal or model.mlp is not None or model.schedule is not None \
            or model.attention != "softmax":
        raise UnsupportedModel(f"`{name}` must be zonal (one head, Q^T K = I, V = v I, softmax attention) without "
                               "mask, MLP or schedule: the fluctuations are taken about the uniform state.")
    return model


def check_modes(modes, name="modes"):
    """Degrees (S^{d−1}) or frequencies (S^1) l >= 1, as a 1-D int array."""
    arr = np.atleast_1d(np.asarray(modes))
    if arr.ndim != 1 or arr.size == 0:
        raise InvalidInput(f"`{name}` must be a non-empty 1-D sequence of integers >= 1, got shape {arr.shape}.")
    return np.array([check_int(k, name, low=1) for k in arr.tolist()], dtype=int)


def check_nonnegative_times(t, name="t"):
    """Finite times >= 0, any shape (a scalar gives a 1-D array of one time)."""
    try:
        arr = np.atleast_1d(np.asarray(t, dtype=float))
    except (TypeError, ValueError):
        raise InvalidInput(f"`{name}` must be times (real numbers >= 0).") from None
    if arr.ndim != 1 or not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise InvalidInput(f"`{name}` must be a 1-D array of finite times >= 0.")
    return arr


def multiplicity(dim, modes):
    """N_l, the expected power n·E P_l(0) of i.i.d. uniform tokens: 1 for the complex Fourier coefficient on
    S^1, dim H_l (the number of real harmonics of degree l) on S^{d−1}, d >= 3."""
    return np.ones(len(modes)) if dim == 2 else harmonic_dimension(dim, np.asarray(modes)).astype(float)


def growth_rates(model, modes):
    """ς_l at the degrees ``modes`` (`meanfield.linear_growth_rates`, noise included)."""
    return linear_growth_rates(model, int(np.max(modes)))[modes]


def coupling_excess(model, n, modes, t, terms=64):
    """E|B_k(t)|², the second-order (mode-coupling) excess of E|ρ̂_k(t)|² over the linear theory on S^1
    (module docstring), (len(t), len(modes)); the sum over a runs over |a|, |k − a| <= ``terms``."""
    t, modes = np.atleast_1d(np.asarray(t, dtype=float)), np.atleast_1d(np.asarray(modes, dtype=int))
    c = velocity_coefficients(model, terms + int(np.max(modes)))
    rate = np.arange(len(c)) ** 2 * c
    out = np.zeros((len(t), len(modes)))
    for i, k in enumerate(modes):
        a = np.array([a for a in range(k - terms, terms + 1) if a not in (0, k)])
        b = k - a
        ca, cb = c[np.abs(a)], c[np.abs(b)]
        mu = rate[np.abs(a)] + rate[np.abs(b)] - rate[k]
        x = np.outer(t, mu)
        growth = np.where(np.abs(x) > 0, np.expm1(x) / np.where(mu == 0, 1.0, mu), t[:, None])
        out[:, i] = (growth ** 2 * (k * k * a * ca * (a * ca + b * cb))).sum(axis=1) * np.exp(2 * rate[k] * t) / n ** 2
    return out


def velocity_coefficients(model, P):
    """c_m = v I_m(β)/β, m = 0..P (v = ±1 the value matrix V = v I): for (USA) on S^1 the velocity's Fourier
    coefficients are v̂_m = i m c_m ρ̂_m, and ς_m = m² c_m. At β = 0 the limit: c_1 = v/2, the others 0
    (the kernel is 1 and the velocity P_x Σ_j w_j x_j)."""
    v = float(model.heads[0][2][0, 0])
    if model.beta == 0:
        c = np.zeros(P + 1)
        c[1:2] = 0.5 * v
        return c
    return v * kernel_multipliers(model.beta, 2, P, scaled=False) / model.beta


def linear_prediction(model, n, modes, t, *, order=1):
    """E P_l(t) of the linearised dynamics about the uniform state, from n i.i.d. uniform tokens.

    P_l = |ρ̂_l|² with ρ̂_l = (1/n) Σ_j e^{−ilθ_j} on S^1, and P_l = Σ_m |ρ̂_lm|² (real harmonics
    orthonormal in L²(σ)) on S^{d−1}, d >= 3:

        E P_l(t) = (N_l/n) [ e^{2ς_l t} + 2ν l(l+d−2) t · (e^{2ς_l t} − 1)/(2ς_l t) ]

    (docs/mathematics.md §18, docs/fluctuations.md), ς_l the growth rate of `meanfield.linear_growth_rates`.

    Parameters
    ----------
    model : Model
        A zonal model, (SA) or (USA), with or without noise ν.
    n : int >= 2
        Number of tokens.
    modes : sequence of int >= 1
        Frequencies k (S^1) or degrees l.
    t : float or 1-D array of times >= 0
    order : 1 or 2
        1: the linear theory; 2: with the leading mode coupling E|B_k|² (module docstring; S^1, (USA),
        no noise).

    Returns
    -------
    ndarray (len(t), len(modes))
        The predicted E P_l(t); n·E P_l(0) = N_l.

    Raises
    ------
    ValueError
        ``model`` not a Model, ``n`` < 2, a mode < 1, negative or non-finite times
        (`meanfield.UnsupportedModel`, a ValueError, for a non-zonal model), ``order`` not 1 or 2, or 2
        for a model other than (USA) on S^1 without noise.

    Examples
    --------
    (USA) on S^1 at β = 1: the mode k grows as e^{2 k² I_k(1) t}/n.

    >>> import numpy as np
    >>> import meanfield as mf
    >>> from meanfield import fluctuations
    >>> model = mf.Model(beta=1.0, dim=2, normalized=False)
    >>> p = fluctuations.linear_prediction(model, 2000, [1, 2, 3, 4], [0.0, 2.0])
    >>> np.round(2000 * p, 4).tolist()
    [[1.0, 1.0, 1.0, 1.0], [9.5892, 8.7755, 2.2212, 1.1915]]

    The slow modes 3 and 4 are fed by the fast ones (mode coupling, ``order=2``):

    >>> np.round(2000 * fluctuations.linear_prediction(model, 2000, [1, 2, 3, 4], [2.0], order=2), 3).tolist()
    [[9.596, 8.971, 2.482, 1.379]]
    """
    model = check_model(model)
    n = check_int(n, "n", low=2)
    modes = check_modes(modes)
    t = check_nonnegative_times(t)
    order = check_int(order, "order", low=1, high=2)
    if order == 2 and (model.dim != 2 or model.normalized or model.noise > 0):
        raise InvalidInput("`order`=2 (mode coupling) is derived for (USA) on S^1 without noise "
                           "(Model(beta, 2, normalized=False)).")
    rate = growth_rates(model, modes)
    lap = modes * (modes + model.dim - 2.0)
    x = 2.0 * np.outer(t, rate)
    ratio = np.where(np.abs(x) > 1e-300, np.expm1(x) / np.where(x == 0, 1.0, x), 1.0)
    linear = multiplicity(model.dim, modes) / n * (np.exp(x) + 2.0 * model.noise * lap * t[:, None] * ratio)
    return linear if order == 1 else linear + coupling_excess(model, n, modes, t)


def onset_time(model, n, level=0.25, modes=None):
    """The time at which the linear theory's power per harmonic, E P_l(t)/N_l, first reaches ``level`` for
    some l of ``modes``.

    Without noise t_*(n) = log(n·level)/(2ς_max) over the growing modes of ``modes``: the time at which the
    fluctuations of n i.i.d. uniform tokens reach order one (E|ρ̂_k|² = level on S^1, an amplitude of
    sqrt(level) per harmonic on S^{d−1}).

    Parameters
    ----------
    model : Model
        A zonal model.
    n : int >= 2
    level : float in (0, 1]
        The power per harmonic counted as order one (default 1/4: an amplitude of 1/2).
    modes : sequence of int >= 1, optional
        The modes considered (default 1..32).

    Returns
    -------
    float
        t_*, or inf when no mode of ``modes`` reaches ``level``.

    Raises
    ------
    ValueError
        ``model`` not a zonal Model, ``n`` < 2, ``level`` outside (0, 1], a mode < 1.

    Examples
    --------
    >>> import meanfield as mf
    >>> from meanfield import fluctuations
    >>> model = mf.Model(beta=1.0, dim=2, normalized=False)
    >>> round(fluctuations.onset_time(model, 10**4), 4)       # log(2500)/(2 I_1(1))
    6.922
    """
    model = check_model(model)
    n = check_int(n, "n", low=2)
    level = check_real(level, "level", low=0.0, high=1.0, low_open=True)
    modes = check_modes(np.arange(1, 33) if modes is None else modes)
    rate = growth_rates(model, modes)
    if model.noise == 0:
        top = rate.max()
        return float(np.log(max(n * level, 1.0)) / (2 * top)) if top > 0 else float("inf")
    # with noise: the first root of E P_l(t)/N_l = level, found on a doubling bracket then by bisection
    best = np.inf
    for k in modes[rate > 0]:
        N = multiplicity(model.dim, [k])[0]

        def excess(s):
            return linear_prediction(model, n, [k], [s])[0, 0] / N - level
        if excess(0.0) >= 0:
            return 0.0
        hi = 1.0
        while excess(hi) < 0 and hi < 1e6:
            hi *= 2
        if excess(hi) < 0:
            continue
        lo = 0.0
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if excess(mid) < 0 else (lo, mid)
        best = min(best, hi)
    return float(best)
