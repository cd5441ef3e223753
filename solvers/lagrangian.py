"""`Lagrangian`: the mean-field equation along its characteristics, with exact densities (S^1, S^2).

Without noise the continuity equation ∂_tρ + div_S(ρX[ρ]) = 0 ((3.1), (3.8) of Geshkovski,
Letrouit, Polyanskiy, Rigollet, *A mathematical perspective on Transformers* (2023)) is transported
by the flow Φ_t of its velocity (docs/mathematics.md §9):

    ρ_t(Φ_t(y)) = ρ_0(y)/J_t(y),     d/dt log J_t(y) = (div_S X_t)(Φ_t(y)).

Discretisation: labels y_j, the nodes of a quadrature for σ with weights q_j, carry the masses
w_j = q_j ρ_0(y_j); the state is their positions x_j = Φ_t(y_j) and log-Jacobians ℓ_j = log J_t(y_j):

    ẋ_i = X(x_i) = s P_{x_i} F(x_i),     ℓ̇_i = div_S X(x_i),

    (SA)   F(x) = Σ_k w_k e^{β⟨x,x_k⟩} x_k / Σ_k w_k e^{β⟨x,x_k⟩},
           div_S X = s[β tr(P_x C P_x) − (d−1)⟨x, F⟩],  C = Σ_k ŵ_k x_k x_kᵀ − F Fᵀ,
    (USA)  F(x) = Σ_k w_k e^{β⟨x,x_k⟩} x_k,
           div_S X = s[β tr(P_x B P_x) − (d−1)⟨x, F⟩],  B = Σ_k w_k e^{β⟨x,x_k⟩} x_k x_kᵀ,

with ŵ_k the softmax weights, P_x = I − x xᵀ and s = v for V = v·I (docs/mathematics.md §9: the
Jacobian of F is βC, resp. βB). The moments [w, w x, w x⊗x] are summed in one pass of the shared
kernel-sum engine (`meanfield.sums.kernelsums.kernel_sums`), so velocity and divergence cost one O(n²)
exponential per right-hand side. The labels move exactly as weighted particles (§1.5): the method
is exact up to the quadrature in the labels, never needs a finer grid as clusters sharpen, and
its cost does not depend on how sharp they are (ρ reaches 1e15 at t = 50 on S^1).

Labels: the trapezoid rule on S^1 (`meanfield.spaces.quadrature.trapezoid`), or composite Gauss–Legendre
panels (``panels``, ``order`` nodes each), which `Lagrangian.solve_adaptive` refines where the
label map becomes a staircase (clusters); Gauss–Legendre × trapezoid on S^2
(`meanfield.spaces.quadrature.gauss_legendre`).

Error estimate: every run carries a *companion* — the same equation on a coarser rule (every other
trapezoid node; pairs of panels merged; about half the Gauss–Legendre nodes on S^2) — integrated in
the same state, and records the W1 distance between the two node measures at each saved time
(``error_estimate``). `solve_adaptive` records instead the W1 distance to its previous round.

General attention (heads (Q_h, K_h, V_h), M_h = Q_hᵀK_h): X = P_x Σ_h F_h with F_h the softmax mean of
V_h x_k under e^{β⟨x, M_h x_k⟩} (the plain sum for (USA)), and div_S X = Σ_h tr(P_x DF_h P_x) − (d−1)⟨x, F⟩
from the same moments, one kernel-sum pass per head (`_head_terms`; docs/mathematics.md §9).

A feed-forward term (``Model(mlp=...)``, `meanfield.transformer.feedforward`) is local: the labels move by
X + P_x F and ℓ̇ gains its closed-form divergence div_S(P_x F) = tr(DF) − ⟨x, DF x⟩ − (d−1)⟨x, F⟩.

Noise: with ν > 0 the density is not transported by any flow map (diffusion spreads each label
into a law), so the characteristics carry no diffusion and the model raises `UnsupportedModel`.
"""
import functools
import importlib
from dataclasses import dataclass

import numpy as np

from meanfield.validation import check_callable, check_density_values, check_int, check_memory, check_real
from meanfield.errors import InvalidInput, UnsupportedModel
from meanfield.transformer.kernels import minimum_degree
from meanfield.sums.kernelsums import kernel_sums
from meanfield.sums.compiled import frame_field
from meanfield.spaces.geodesic import tangent_frame
from meanfield.transformer.normalization import alpha, carries_radius, label_rates
from meanfield.spaces.quadrature import circle_points, gauss_legendre, trapezoid
from meanfield.representations.lagrangian import LagrangianNodes, monotone_lift
from meanfield.representations.layered import LayeredNodes
from meanfield.sums.spectralsums import EPSILON, check_sums, choose_sums, zonal_sums
from .base import Run, Solver
from .bases import ResolutionPolicy
from .layered import check_positions_model, signature_of_init
from meanfield.observables.wasserstein import wasserstein

_SPAN_TOL = 1e-12
LABEL_TOL = 1e-8           # the labels integrate the kernel's moments at t = 0 to this, relative
MAX_DEFAULT_NODES = {2: 4100, 3: 4608}     # the cap of the labels chosen from a spectral resolution
LAYERED_MAX_NODES = {2: 256, 3: 512}       # the same, per position, for labels in (σ, x) (a step costs O((Mn)²))
ZONAL_DIAGNOSTICS = frozenset({"energy", "energy_rate_identity"})   # defined for the gradient flow of E_β only
BYTES_PER_NODE = 1000      # measured working memory of a run per label (state, stages, companion, kernel sums)
LAYERED_MODULE = "solvers.layered_lagrangian"     # `LayeredLagrangian`, what ``positions`` builds
COMPANION_EPSILON = 1e-10  # the companion's spectral sums: it measures W1 >~ 1e-6, its field needs no more (docs)


def circle_panels(edges, order):
    """Composite Gauss–Legendre rule on S^1: ``order`` nodes on each panel [edges[p], edges[p+1]].

    Returns (angles (P·order,), weights (P·order,)) with weights summing to (edges[-1] − edges[0])/2π
    (= 1 for one turn); exact for polynomials of degree 2·order − 1 in the angle on each panel.
    """
    g, gw = np.polynomial.legendre.leggauss(order)
    a, b = edges[:-1, None], edges[1:, None]
    theta = (0.5 * (a + b) + 0.5 * (b - a) * g).ravel()
    q = (0.5 * (b - a) * gw).ravel() / (2 * np.pi)
    return theta, q


@functools.lru_cache(maxsize=None)
def _pairs(d):
    """Index pairs (i <= j) of the second moments that are summed: all but (d−1, d−1), which follows
    from the trace (|x_k| = 1, so Σ_i (x_k)_i² = 1); their diagonal mask and symmetric multiplicity."""
    iu, ju = np.triu_indices(d)
    keep = ~((iu == d - 1) & (ju == d - 1))
    iu, ju = iu[keep], ju[keep]
    return iu, ju, (iu == ju).astype(float), np.where(iu == ju, 1.0, 2.0)


def moment_values(x, w):
    """The columns [w, w x, w x_i x_j (i <= j, but not the last diagonal)] for the kernel-sum engine."""
    n, d = x.shape
    iu, ju, _, _ = _pairs(d)
    vals = np.empty((n, 1 + d + len(iu)))
    vals[:, 0] = w
    np.multiply(x, w[:, None], out=vals[:, 1:1 + d])
    np.multiply(vals[:, 1 + iu], x[:, ju], out=vals[:, 1 + d:])
    return vals


def velocity_divergence(z, x, weights, beta, *, normalized=True, v=1.0, heads=None, chunk=512, partition=False,
                        sums="direct", threads=1, epsilon=EPSILON):
    """The velocity X(z_i) and its surface divergence div_S X(z_i) for μ = Σ_k w_k δ_{x_k}.

    (SA) X = s P_z F with F the softmax mean Σ ŵ_k x_k, div_S X = s[β tr(P_z C P_z) − (d−1)⟨z, F⟩]
    with C the softmax covariance; (USA) F = Σ_k w_k e^{β⟨z,x_k⟩} x_k and C → B = Σ w e^{β⟨z,x_k⟩} x_k x_kᵀ
    (module docstring; docs/mathematics.md §9). Here s = ``v`` and, for unit sources,
    tr(P_z M P_z) = Σ_k m_k (1 − ⟨z, x_k⟩²) for the second moment M = Σ_k m_k x_k x_kᵀ.

    Parameters
    ----------
    z : (m, d) points on the sphere where the field is wanted; x : (n, d) sources; weights : (n,).
    beta : float, of either sign; normalized : True for (SA), False for (USA); v : the scalar of V = v·I.
    heads : optional sequence of (M_h, V_h) = (Q_hᵀK_h, V_h), (d, d) each, for general attention (2.7):
        X = P_z Σ_h F_h with F_h = Σ_k ŵ_k^h V_h x_k (softmax weights of e^{β⟨z, M_h x_k⟩}) for (SA),
        and div_S X = Σ_h tr(P_z DF_h P_z) − (d−1)⟨z, F⟩ (docs/mathematics.md §9.4); ``v`` is then
        unused. Direct sums only.
    partition : also return Z(z_i) = Σ_k w_k e^{β⟨z_i,x_k⟩} (the partition function of (3.6)).
    sums : "direct" (the moments [w, w x, w x⊗x] in one pass of `meanfield.sums.kernelsums.kernel_sums`) or
        "spectral" (S^1/S^2: Zs = e^{−|β|}Z, G = e^{−|β|}∇_S Z/β and H = e^{−|β|}Δ_S Z/β from
        `meanfield.sums.spectralsums`, so that (SA) X = v G/Zs, div_S X = v(H/Zs − β|G/Zs|²) and (USA)
        X = v e^{|β|} G, div_S X = v e^{|β|} H; docs/mathematics.md §9, §12).
    threads : ducc0's threads for the spectral sums; epsilon : their accuracy (default 3e-13).

    Returns
    -------
    (X (m, d), div (m,)) or (X, div, Z).
    """
    z = np.asarray(z, dtype=float)
    x = np.asarray(x, dtype=float)
    w = np.asarray(weights, dtype=float)
    d = x.shape[1]
    if heads is not None:
        if sums != "direct" or partition:
            raise InvalidInput("`heads`: general attention has direct sums only and no single partition function "
                             "(`sums` must be 'direct', `partition` False).")
        return _velocity_divergence_heads(z, x, w, beta, normalized, heads, chunk)
    if sums == "spectral":
        return _velocity_divergence_spectral(z, x, w, beta, normalized, v, partition, threads, epsilon)
    S, c = kernel_sums(z, x, moment_values(x, w), beta, chunk=chunk)
    X, div = moment_field(z, S, c, beta, normalized, v)
    if partition:
        return X, div, S[:, 0] * np.exp(c)
    return X, div


def moment_field(z, S, c, beta, normalized=True, v=1.0):
    """(X (m, d), div_S X (m,)) at z from the moment sums e^{c}S = Σ_k w_k e^{β⟨z,x_k⟩}[1, x_k, x_k x_kᵀ]
    (`moment_values`; any weights w_k, e.g. the causal prefix weights of `causal_moment_sums`), by the
    formulas of `velocity_divergence`."""
    d = z.shape[1]
    iu, ju, diag, mult = _pairs(d)
    # zᵀ M z with M_{d−1,d−1} = S_0 − Σ_{i<d−1} M_ii, and tr M = S_0
    zl2 = z[:, -1] ** 2
    quad = np.einsum("nk,nk->n", S[:, 1 + d:], z[:, iu] * z[:, ju] * mult - zl2[:, None] * diag) + zl2 * S[:, 0]
    tr = S[:, 0] - quad
    if normalized:
        F = S[:, 1:1 + d] / S[:, :1]
        tr /= S[:, 0]
    else:
        scale = np.exp(c)
        F = S[:, 1:1 + d] * (scale[:, None] if np.ndim(scale) else scale)
        tr *= scale
    zF = np.einsum("nd,nd->n", z, F)
    if normalized:
        tr -= np.einsum("nd,nd->n", F, F) - zF * zF            # C = M2 − F Fᵀ
    X = v * (F - zF[:, None] * z)
    div = v * (beta * tr - (d - 1) * zF)
    return X, div


def _second_moment(S, d):
    """S₂ = Σ_k w_k e^{…} x_k x_kᵀ (m, d, d) from the moment sums of `moment_values` (the last
    diagonal entry from the trace: |x_k| = 1)."""
    iu, ju, _, _ = _pairs(d)
    S2 = np.zeros((len(S), d, d))
    S2[:, iu, ju] = S[:, 1 + d:]
    S2[:, ju, iu] = S[:, 1 + d:]
    S2[:, d - 1, d - 1] = S[:, 0] - np.einsum("nii->n", S2)
    return S2


def attention_jacobian(z, x, weights, beta, *, normalized=True, v=1.0, chunk=512):
    """The zonal attention output A = vF (m, d) at z and its Jacobian DA (m, d, d): DA = vβC ((SA), C = S₂/Z − FFᵀ
    the softmax covariance) or vβB ((USA), B = Σ_k w_k e^{β⟨z,x_k⟩} x_k x_kᵀ), from one pass of the moment
    sums (docs/mathematics.md §9)."""
    d = z.shape[1]
    S, c = kernel_sums(z, x, moment_values(x, weights), beta, chunk=chunk)
    S2 = _second_moment(S, d)
    if normalized:
        F = S[:, 1:1 + d] / S[:, :1]
        DA = (v * beta) * (S2 / S[:, :1, None] - F[:, :, None] * F[:, None, :])
    else:
        scale = np.exp(c)
        scale = scale[:, None] if np.ndim(scale) else scale
        F = S[:, 1:1 + d] * scale
        DA = (v * beta) * S2 * (scale[:, :, None] if np.ndim(scale) else scale)
    return v * F, DA


def attention_norm(z, x, weights, beta, *, normalized=True, v=1.0, chunk=512):
    """‖A(z)‖ and its surface gradient ∇_S‖A‖ (m, d) for the zonal attention output A = vF at z.

    ∇_S ½‖A‖² = P_z (DA)ᵀA with DA from `attention_jacobian` (docs/mathematics.md §9; docs/normalization.md)."""
    A, DA = attention_jacobian(z, x, weights, beta, normalized=normalized, v=v, chunk=chunk)
    norm = np.sqrt(np.einsum("nd,nd->n", A, A))
    g = np.einsum("nab,na->nb", DA, A)                      # (DA)ᵀA; DA is symmetric
    g -= np.einsum("nd,nd->n", z, g)[:, None] * z
    return norm, g / norm[:, None]


def _head_terms(z, S, c, M, V, beta, normalized):
    """One head's F_h (m, d) and tr(P_z DF_h P_z) for a general head (M = QᵀK, V): from the
    moments S = Σ_k w_k e^{β⟨z, M x_k⟩ − c}[1, x_k, x_k x_kᵀ] (docs/mathematics.md §9.4).

    (SA)  F = V Y/Z, DF = β(V S₂ Mᵀ/Z − F (M Y/Z)ᵀ);   (USA) F = e^c V Y, DF = β e^c V S₂ Mᵀ,
    with Z = S_0, Y = S_x, S₂ = S_xx. Returns (F, tr(P_z DF P_z)) where tr(P DF P) = tr DF − zᵀ DF z."""
    d = z.shape[1]
    S2 = _second_moment(S, d)
    Y = S[:, 1:1 + d]
    Vz, Mz = z @ V, z @ M                                  # Vᵀz, Mᵀz as rows
    trC = np.einsum("nab,ab->n", S2, V.T @ M)              # tr(V S₂ Mᵀ)
    zCz = np.einsum("na,nab,nb->n", Vz, S2, Mz)            # zᵀ V S₂ Mᵀ z
    F = Y @ V.T
    if normalized:
        Z = S[:, 0]
        F /= Z[:, None]
        m = (Y @ M.T) / Z[:, None]
        tr = (trC - zCz) / Z - np.einsum("nd,nd->n", F, m) + np.einsum("nd,nd->n", z, F) * np.einsum("nd,nd->n", z, m)
    else:
        scale = np.exp(c)
        scale = scale[:, None] if np.ndim(scale) else scale
        F *= scale
        tr = (trC - zCz) * np.squeeze(scale)
    return F, beta * tr


def _velocity_divergence_heads(z, x, w, beta, normalized, heads, chunk):
    """`velocity_divergence` for general heads (see its ``heads``): one pass of the moments per head."""
    values = moment_values(x, w)
    return heads_field(z, lambda M, h: kernel_sums(z, x, values, beta, M=M, chunk=chunk), beta, normalized, heads)


def heads_field(z, summed, beta, normalized, heads):
    """(X, div_S X) at z for general heads from their moment sums ``summed(M_h, h)`` = (S, c) (`_head_terms`)."""
    F = np.zeros_like(z)
    tr = np.zeros(len(z))
    for h, (M, V) in enumerate(heads):
        S, c = summed(M, h)
        Fh, trh = _head_terms(z, S, c, M, V, beta, normalized)
        F += Fh
        tr += trh
    zF = np.einsum("nd,nd->n", z, F)
    return F - zF[:, None] * z, tr - (z.shape[1] - 1) * zF


def spectral_field(Zs, G, H, beta, normalized=True, v=1.0):
    """(X (..., d), div_S X (...)) from the spectral sums Zs = e^{−|β|}Z, G = e^{−|β|}∇_S Z/β and
    H = e^{−|β|}Δ_S Z/β (`meanfield.sums.spectralsums`): (SA) X = v G/Zs, div_S X = v(H/Zs − β|G/Zs|²); (USA) X = v e^{|β|} G,
    div_S X = v e^{|β|} H (docs/mathematics.md §9, §12)."""
    if normalized:
        F = G / Zs[..., None]
        return v * F, v * (H / Zs - beta * np.einsum("...d,...d->...", F, F))
    scale = v * np.exp(abs(beta))                       # the spectral sums carry e^{−|β|}
    return scale * G, scale * H


def _velocity_divergence_spectral(z, x, w, beta, normalized, v, partition, threads, epsilon):
    """`velocity_divergence` through the spectral sums (see its ``sums``)."""
    out = np.empty((len(z), z.shape[1] + 1))
    Zs = spectral_rates(z, x, w, beta, normalized, v, threads, out, epsilon)
    if partition:
        return out[:, :-1], out[:, -1], Zs * np.exp(abs(beta))
    return out[:, :-1], out[:, -1]


def spectral_rates(z, x, w, beta, normalized, v, threads, out, epsilon=EPSILON):
    """[X, div_S X] at the points z (m, d) for the sources x (n, d) with weights w through the spectral sums
    of accuracy ``epsilon`` (`spectral_field`; x is z for the labels' own field), written to out[:, :d] and
    out[:, d]; returns Zs. The points need only their directions. The field is assembled from the syntheses in
    the points' frame in one compiled pass (`meanfield.sums.compiled.frame_field`)."""
    sums = zonal_sums(beta, z.shape[1], epsilon, threads, len(z) + len(x))
    Zs, g, H, frame = sums.frame_sums(z, None if x is z else x, w)
    frame_field(Zs, g, H, frame, beta, normalized, v, out)
    return Zs


def carry_mass(values, q, mass):
    """Density values at labels of quadrature weights q, rescaled so that the labels carry ``mass`` (Σ q_j ρ_j =
    mass): a hand-over from a density Solution keeps its mass exactly, not up to the labels' quadrature error
    for it (1e-6 with 256 labels under lmax 32). Values of zero mass are returned as they are."""
    total = float(q @ values)
    return values * (mass / total) if total > 0 else values


@dataclass(eq=False, slots=True)
class LagrangianRun(Run):
    """The per-run values of a `Lagrangian` run (set with the initial state)."""

    systems: list = None              # [(slice of the state, label weights)]: the labels, then the companion's
    system_sums: list = None          # the kernel sums of each system: "direct" or "spectral"
    rep: LagrangianNodes = None       # the representation: labels, weights, ρ_0 at the labels, companion
    sums: str = "direct"              # the fine labels' sums (recorded in stats)
    sums_error_bound: float = 0.0     # their bound of the relative error
    last_estimate: float = np.nan     # the last W1 distance to the companion


def _check_ngpt(model):
    if (model.normalization == "ngpt" or carries_radius(model)) and not model.is_zonal:
        raise UnsupportedModel(f"`normalization`={model.normalization!r} on the characteristics needs a zonal model "
                               "(the Jacobian of A is summed for one head with QᵀK = I, V = v·I); use "
                               "solvers.Particles.")


def radius_field(r0, points, step=1e-3):
    """(r (n,), ∇_S r (n, d)) of the initial radii at ``points``: a number (∇_S r = 0) or a callable r0(x) > 0,
    its surface gradient by fourth-order central differences along great circles in a tangent frame
    (`meanfield.spaces.geodesic.tangent_frame`; error about step⁴ times the fifth derivative, 1e-12 for smooth r0)."""
    n, d = points.shape
    if not callable(r0):
        r = check_real(r0, "radii", low=0.0, low_open=True)
        return np.full(n, r), np.zeros((n, d))

    def values(x):
        try:
            out = np.asarray(r0(x), dtype=float)
        except (TypeError, ValueError) as exc:
            raise InvalidInput(f"`radii` could not be evaluated on points of shape {x.shape}: {exc}") from None
        if out.shape != (n,) or not np.all(np.isfinite(out)) or not np.all(out > 0):
            raise InvalidInput(f"`radii` must return one finite radius > 0 per point (shape ({n},)).")
        return out

    grad = np.zeros((n, d))
    for e in tangent_frame(points):
        at = [values(np.cos(j * step) * points + np.sin(j * step) * e) for j in (2, 1, -1, -2)]
        grad += ((-at[0] + 8 * at[1] - 8 * at[2] + at[3]) / (12 * step))[:, None] * e
    return values(points), grad


class Lagrangian(Solver):
    """Characteristics with exact densities on S^1 (dim 2) and S^2 (dim 3), any attention, no noise.

    Parameters
    ----------
    model : `meanfield.Model` with dim 2 or 3 and ``noise == 0``: zonal (Q^T K = I, V = v·I), or general
        Q, K, V with one or several heads (direct sums, no energy diagnostics; docs/mathematics.md §9).
    nodes : int, optional
        Number of labels: the trapezoid rule with ``nodes`` points on S^1 (default 1024); on S^2
        Gauss–Legendre × trapezoid with ntheta = round(sqrt(nodes/2)) rings of 2·ntheta points
        (default 2048). The rule must integrate the kernel's moments to 1e-8 at t = 0 (`LABEL_TOL`):
        exact degree >= minimum_degree(β‖M‖₂, d, 1e-8) + 2 (`meanfield.transformer.kernels.minimum_degree`; M = QᵀK,
        I for a zonal model), else ValueError naming `nodes`.
    panels : int or 1-D array, optional (S^1 only)
        Composite Gauss–Legendre labels instead: that many equal panels, or the panel edges
        (strictly increasing, spanning one turn). ``nodes`` is then panels × order.
    order : int >= 2, nodes per panel (default 8).
    estimate : bool
        Carry the coarser companion rule and record ``error_estimate`` (W1 between the two node
        measures) at every saved time (default True; costs about 25% more per step). Its spectral sums
        run at ε = 1e-10 (`COMPANION_EPSILON`, docs/lagrangian.md).
    cluster_tol : float > 0
        Geodesic distance (radians) that links nodes into one cluster (default 1e-3).
    min_mass : float in (0, 1]
        Smallest mass of a counted cluster (default 1e-2).
    diagnostics : "full" | "none" | a sequence of names among ``Lagrangian.diagnostic_names``
        What is recorded at each saved time (default "full": every diagnostic of the Notes). A run
        that needs only E_β gives ``("energy",)`` and skips the kernel sums of the energy rate, the
        clusters and the W1 distances.
    chunk : block size of the kernel sums.
    sums : "auto" | "direct" | "spectral"
        The kernel sums of the velocity and its divergence: "direct" (n² exponentials), "spectral"
        (ducc0's nonuniform FFT on S^1 / SHT on S^2, O(n + L² log L); relative error at label j at
        most about ε/max(w_j, e^{−2β}) with ε = 3e-13, `meanfield.sums.spectralsums`), or "auto": spectral
        where it is faster and its bound is at most ``sums_tol``. Recorded in ``sol.stats``
        (``sums``, ``sums_error_bound``). With ``positions``: the spectral prefix sums of docs/causal.md
        (`solvers.layered_lagrangian.layered_spectral_field`, their own bound).
    sums_tol : float > 0, the largest bound "auto" accepts (default 1e-6).
    positions : int, optional
        Masked models only (docs/causal.md): the number of position nodes in σ ∈ (0, 1]; the labels
        then live in (σ, x) (`LayeredLagrangian`).
    {threads}

    Raises
    ------
    UnsupportedModel
        ``dim`` other than 2 or 3, noise, or a model part the solver does not take.
    ValueError
        ``nodes`` too few for the kernel (the message names the minimum), bad ``panels``, ``order``,
        ``sums`` or tolerances.

    Notes
    -----
    Normalisation (docs/normalization.md): every scheme. "pre", "mix" and "peri" (zonal models, direct
    sums): each label carries its radius r and ∇_S r (`meanfield.transformer.normalization.label_rates`), from the
    solve option ``radii`` (a number or a function r0(x) > 0, default 1); ``sol.radii`` (T, n).

    Steppers "dopri5" (default, rtol 1e-10, atol 1e-12 by default) and "bs32". Initial states: a
    density callable (evaluated at the labels), a `Solution` of any density solver (continued
    from its last saved time: its density at the labels becomes the new ρ_0, e.g. a spectral run
    handed over when it becomes under-resolved), or a Lagrangian Solution (continued exactly).

    Diagnostics at every saved time: ``mass`` (Σ w_j, constant), ``energy`` (E_β (3.5) of the node
    measure), ``energy_rate_identity`` ((3.6): s Σ_i w_i Z_i |X_i|² for (SA), s Σ_i w_i |X_i|² for
    (USA); the exact dE/dt of the discrete flow), ``n_clusters``, ``largest_cluster`` and
    ``clustered_mass`` (the masses in clusters, `LagrangianNodes.clusters`), ``w1_to_dirac``,
    ``max_density``, ``min_density`` (at the nodes), ``error_estimate`` (every saved time on S^1,
    the last one on S^2, where it is a linear program), ``nodes``. Cluster masses and positions:
    ``sol.representation.clusters(sol.data[i])``.

    Examples
    --------
    The density carried along the characteristics agrees with the Fourier solver:

    >>> import numpy as np
    >>> import meanfield as mf, solvers
    >>> model = mf.Model(beta=1.0, dim=2)
    >>> rho0 = mf.densities.von_mises_fisher([1.0, 0.0], 2.0)
    >>> sol = solvers.Lagrangian(model, nodes=256).solve(rho0, [0.0, 1.0], progress=False)
    >>> ref = solvers.FourierCircle(model, modes=64).solve(rho0, [0.0, 1.0], progress=False)
    >>> x = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])
    >>> bool(np.allclose(sol.density(x), ref.density(x), rtol=1e-5)), np.round(sol.mass, 12).tolist()
    (True, [1.0, 1.0])
    """

    steppers = ("dopri5", "bs32")
    policy = ResolutionPolicy("nodes", low=1)     # S^2 needs more: checked with the kernel
    config_name = "lagrangian"
    stepper_defaults = {"rtol": 1e-10, "atol": 1e-12}
    run_type = LagrangianRun
    mass_by_construction = True     # the labels' weights do not change: a report notes the mass
    normalizations = ("post", "pre", "mix", "peri", "ngpt", "sqrt-depth")     # docs/normalization.md
    solve_options = {"radii": None}     # the initial radius of the labels (schemes whose radius moves)
    takes_mask = True          # with `positions`: labels in (σ, x) (`LayeredLagrangian`)
    takes_mlp, mlp_normalizations = True, ("post", "sqrt-depth")    # P_x F and its divergence (docs/feedforward.md)
    takes_schedule = True                                            # a piece's attention at each breakpoint
    diagnostic_names = ("mass", "energy", "energy_rate_identity", "n_clusters", "largest_cluster", "clustered_mass",
                        "w1_to_dirac", "max_density", "min_density", "error_estimate", "nodes")

    @classmethod
    def examples(cls):
        """Small runs (`solvers.Solver.examples`): on S^1 and on S^2."""
        from meanfield.measures import densities
        from meanfield.transformer.model import Model

        return {"Lagrangian": (lambda: cls(Model(beta=3.0, dim=2), nodes=64),
                               [densities.von_mises_fisher([1.0, 0.0], 2.0), densities.perturbed_uniform(0.2, 2)], {}),
                "Lagrangian-S2": (lambda: cls(Model(beta=2.0, dim=3), nodes=200),
                                  [densities.von_mises_fisher([0.0, 0.6, 0.8], 2.0),
                                   densities.perturbed_uniform(0.2, 2, order=1)], {})}

    def __new__(cls, *args, positions=None, **options):
        if cls is Lagrangian and positions is not None:       # its module imports this one: found by name
            cls = importlib.import_module(LAYERED_MODULE).LayeredLagrangian
        return super().__new__(cls)

    def __init__(self, model, nodes=None, *, panels=None, order=8, estimate=True, cluster_tol=1e-3, min_mass=1e-2,
                 chunk=512, sums="auto", sums_tol=1e-6, diagnostics="full", positions=None, threads=None):
        Solver.__init__(self, model, threads)
        check_positions_model(model, positions)
        d = model.dim
        if d not in (2, 3):
            raise UnsupportedModel(f"Lagrangian solves on S^1 and S^2: `model.dim` must be 2 or 3, got {d} "
                                   "(use solvers.Particles in higher dimension).")
        if model.noise > 0:
            raise UnsupportedModel(
                f"Lagrangian needs noise = 0, got noise={model.noise:g}: with diffusion the density is not "
                "transported by a flow map, so the characteristics do not carry it (each label would spread "
                "into a law). Use solvers.FourierCircle / solvers.SphericalHarmonics, or solvers.Particles.")
        reach = self._set_attention()
        self.estimate = bool(estimate)
        self.cluster_tol = check_real(cluster_tol, "cluster_tol", low=0.0, low_open=True, high=np.pi)
        self.min_mass = check_real(min_mass, "min_mass", low=0.0, low_open=True, high=1.0)
        self.chunk = check_int(chunk, "chunk", low=1)
        self.radial = carries_radius(model)            # each label carries its radius and ∇_S r
        self.diagnostics = self._check_diagnostics(diagnostics)
        self.sums = self._check_sums(sums)
        self.sums_tol = check_real(sums_tol, "sums_tol", low=0.0, low_open=True)
        self.order = check_int(order, "order", low=2, high=64)
        need = minimum_degree(reach, d, LABEL_TOL) + 2
        self.panels = None
        if d == 2:
            if panels is not None and np.ndim(panels) == 0:
                P = check_int(panels, "panels", low=1)
                check_memory(BYTES_PER_NODE * self.order * P, "panels", P)
            self.panels = None if panels is None else self._check_panels(panels)
            if self.panels is None:
                n = check_int(1024 if nodes is None else nodes, "nodes", low=1)
                check_memory(BYTES_PER_NODE * n, "nodes", n)
                if n - 1 < need:
                    raise InvalidInput(f"`nodes`={n} is too few for beta={model.beta:g}: the trapezoid rule must "
                                     f"integrate the kernel's moments (degree {need}); use nodes >= {need + 1}.")
                rule = trapezoid(n)
                self.labels, self.q = rule.points, rule.weights
                self.label_degree = n - 1
                coarse = trapezoid(n // 2, offset=0.25) if n % 2 == 0 else trapezoid(max(n // 2, 1))
                self.coarse = (coarse.points, coarse.weights)
            else:
                P = len(self.panels) - 1
                if nodes is not None and check_int(nodes, "nodes", low=1) != P * self.order:
                    raise InvalidInput(f"`nodes`={nodes} does not match panels × order = {P} × {self.order}; "
                                     "omit `nodes` when giving `panels`.")
                if P * self.order - 1 < need:
                    raise InvalidInput(f"`panels` × `order` = {P * self.order} nodes are too few for beta={model.beta:g} "
                                     f"(the kernel's moments need degree {need}); use more panels.")
                theta, self.q = circle_panels(self.panels, self.order)
                self.labels = circle_points(theta)
                self.label_degree = P * self.order - 1
                merged = self.panels[::2] if P % 2 == 0 else np.append(self.panels[::2], self.panels[-1])
                ct, cq = circle_panels(merged, self.order)
                self.coarse = (circle_points(ct), cq)
        else:
            if panels is not None:
                raise InvalidInput("`panels` applies on S^1 only (dim 2).")
            n = check_int(2048 if nodes is None else nodes, "nodes", low=8)
            check_memory(BYTES_PER_NODE * n, "nodes", n)
            nt = max(2, int(round(np.sqrt(n / 2))))
            if 2 * nt - 1 < need:
                raise InvalidInput(f"`nodes`={n} is too few for beta={model.beta:g}: Gauss–Legendre × trapezoid with "
                                 f"{nt} rings integrates degree {2 * nt - 1}, the kernel's moments need {need}; use "
                                 f"nodes >= {2 * ((need + 2) // 2) ** 2}.")
            rule = gauss_legendre(nt, 2 * nt)
            self.labels, self.q = rule.points, rule.weights
            self.label_degree = 2 * nt - 1
            ntc = max(2, int(round(nt / np.sqrt(2))))
            coarse = gauss_legendre(ntc, 2 * ntc)
            self.coarse = (coarse.points, coarse.weights)
        self.nodes = len(self.q)

    def _check_sums(self, sums):
        """``sums`` checked (`meanfield.sums.spectralsums.check_sums`); direct for labels that carry their radius."""
        sums = check_sums(sums, self.model)
        if self.radial and sums == "spectral":
            raise InvalidInput(f"`sums`='spectral' cannot give the Jacobian of A that normalization="
                             f"{self.model.normalization!r} needs; use 'auto' or 'direct'.")
        return "direct" if self.radial else sums

    def _set_attention(self):
        """(SA)/(USA), the heads (M_h, V_h) = (Q_hᵀK_h, V_h) of general attention or v of a zonal model, from
        ``self.model``; returns the kernel's largest exponent β‖M_h‖₂ (what the labels must resolve)."""
        model = self.model
        self.normalized = model.normalized
        _check_ngpt(model)
        self.heads = None if model.is_zonal else [(Q.T @ K, V) for Q, K, V in model.heads]
        self.v = float(model.v) if model.is_zonal else np.nan
        return abs(model.beta) * max((np.linalg.norm(M, 2) for M, _ in self.heads or ()), default=1.0)

    def _adopt_model(self):
        """A piece of the schedule: its attention (`_set_attention`), its diagnostics and sums checked, and
        the labels still integrating its kernel's moments (ValueError naming `nodes` otherwise)."""
        need = minimum_degree(self._set_attention(), self.model.dim, LABEL_TOL) + 2
        if self.label_degree < need:
            raise InvalidInput(f"`nodes`={self.nodes} is too few for the schedule's piece with beta={self.model.beta:g}: "
                             f"the labels integrate degree {self.label_degree}, its kernel's moments need {need}.")
        self.diagnostics = self._check_diagnostics("full" if self.diagnostics == frozenset(self.diagnostic_names)
                                                   else tuple(self.diagnostics))
        self.sums = self._check_sums(self.sums)

    def _enter_piece(self, run, t):
        """The next piece: its solver, and the sums chosen for its β."""
        super()._enter_piece(run, t)
        run.solver._choose_sums(run)

    def _check_diagnostics(self, diagnostics):
        """The names of the recorded diagnostics: "full" (every one the model has), "none" or names."""
        full = isinstance(diagnostics, str) and diagnostics == "full"
        if isinstance(diagnostics, str):
            diagnostics = {"full": self.diagnostic_names, "none": ()}.get(diagnostics, (diagnostics,))
        unknown = sorted(set(diagnostics) - set(self.diagnostic_names))
        if unknown:
            raise InvalidInput(f"`diagnostics` must be 'full', 'none' or names among {self.diagnostic_names}, got "
                             f"{unknown}.")
        if self.heads is not None:
            if full:                                   # "full": every diagnostic that the model has
                diagnostics = [k for k in diagnostics if k not in ZONAL_DIAGNOSTICS]
            elif ZONAL_DIAGNOSTICS & set(diagnostics):
                raise InvalidInput(f"`diagnostics` {sorted(ZONAL_DIAGNOSTICS & set(diagnostics))} need a zonal model: "
                                 "for general Q, K, V the flow is not the gradient flow of E_β (3.5).")
        if self.radial and "energy_rate_identity" in diagnostics:
            if not full:
                raise InvalidInput("`diagnostics` 'energy_rate_identity' holds for speeds of t and of the field; under "
                                 f"normalization={self.model.normalization!r} each label has its own.")
            diagnostics = [k for k in diagnostics if k != "energy_rate_identity"]
        return frozenset(diagnostics)

    @staticmethod
    def _check_panels(panels):
        if np.isscalar(panels) or np.ndim(panels) == 0:
            P = check_int(panels, "panels", low=1)
            return np.linspace(0.0, 2 * np.pi, P + 1)
        edges = np.asarray(panels, dtype=float)
        if edges.ndim != 1 or edges.size < 2 or not np.all(np.isfinite(edges)) or np.any(np.diff(edges) <= 0):
            raise InvalidInput("`panels` must be a panel count or strictly increasing finite panel edges.")
        if abs(edges[-1] - edges[0] - 2 * np.pi) > 1e-12:
            raise InvalidInput(f"`panels` edges must span one turn (edges[-1] − edges[0] = 2π), got "
                             f"{edges[-1] - edges[0]!r}.")
        return edges

    # -- the vector field -----------------------------------------------------------------------------
    def velocity(self, z, x, weights):
        """(X(z), div_S X(z)) for the node measure Σ w_k δ_{x_k} (see `velocity_divergence`)."""
        return velocity_divergence(z, x, weights, self.model.beta, normalized=self.normalized, v=self.v,
                                   heads=self.heads, chunk=self.chunk)

    def _scaled(self, t, z, w, X, div):
        """(X/s, div_S(X/s), s⁻¹) under the normalisation at time t (docs/normalization.md):
        div_S(X/s) = s⁻¹ div_S X + ⟨∇_S s⁻¹, X⟩, with s = √(t + 1) ("sqrt-depth") or ‖A‖/α(t) ("ngpt",
        ∇_S‖A‖ from `attention_norm`)."""
        scheme = self.model.normalization
        if scheme == "post":
            return X, div, 1.0
        if scheme == "sqrt-depth":
            inverse = 1.0 / np.sqrt(t + 1.0)
            return X * inverse, div * inverse, inverse
        a = alpha(self.model, t)
        norm, grad = attention_norm(z, z, w, self.model.beta, normalized=self.normalized, v=self.v, chunk=self.chunk)
        inverse = a / norm
        div = inverse * div - a * np.einsum("nd,nd->n", grad, X) / norm ** 2
        return X * inverse[:, None], div, inverse

    def _rhs(self, run, t, y):
        """ẋ_i = X(x_i), ℓ̇_i = div_S X(x_i) for the fine labels and, separately, the companion's (X/s
        under a normalisation scheme, `_scaled`; the companion's spectral sums to `COMPANION_EPSILON`)."""
        d = self.model.dim
        plain = self.model.normalization == "post" and self.model.feedforward is None and not self.radial
        x, out = None, np.empty_like(y)
        for k, ((sl, w), sums) in enumerate(zip(run.systems, run.system_sums)):
            epsilon = EPSILON if k == 0 else COMPANION_EPSILON
            if plain and sums == "spectral":        # [X, div] written in place, from the labels' directions
                z = y[sl, :d]
                spectral_rates(z, z, w, self.model.beta, self.normalized, self.v, self.threads, out[sl], epsilon)
                continue
            if x is None:
                x = y[:, :d] / np.linalg.norm(y[:, :d], axis=1, keepdims=True)
            xs = x[sl]
            if self.radial:
                out[sl] = self._radial_rates(t, xs, w, y[sl])
                continue
            X, div = velocity_divergence(xs, xs, w, self.model.beta, normalized=self.normalized, v=self.v,
                                         heads=self.heads, chunk=self.chunk, sums=sums, threads=self.threads,
                                         epsilon=epsilon)
            X, div = self._with_feedforward(xs, *self._scaled(t, xs, w, X, div))
            out[sl, :d] = X
            out[sl, d] = div
        return out

    def _radial_rates(self, t, x, w, y):
        """[θ̇, ℓ̇, ṙ, Ġ] of labels [θ, ℓ, r, G = ∇_S r] (`meanfield.transformer.normalization.label_rates`, A and DA from
        one pass of the moment sums, `attention_jacobian`)."""
        d = self.model.dim
        A, DA = attention_jacobian(x, x, w, self.model.beta, normalized=self.normalized, v=self.v, chunk=self.chunk)
        velocity, rate, h, dG = label_rates(self.model, t, x, y[:, d + 1], y[:, d + 2:], A, DA)
        return np.concatenate([velocity, rate[:, None], h[:, None], dG], axis=1)

    def _radius_columns(self, run, points):
        """The columns [r, ∇_S r] (n, d + 1) of a run whose labels carry their radius (else (n, 0)), from the
        solve option ``radii`` (`radius_field`; default 1)."""
        radii = run.options.get("radii")
        if not self.radial:
            return np.zeros((len(points), 0))
        r, grad = radius_field(1.0 if radii is None else radii, points)
        return np.concatenate([r[:, None], grad], axis=1)

    def _configure(self, run):
        if run.options.get("radii") is not None and not self.radial:
            raise InvalidInput(f"`radii` (the initial token norms) apply to the schemes whose radius moves ('pre', "
                             f"'mix', 'peri'), not to normalization={self.model.normalization!r}.")
        return super()._configure(run)

    def _with_feedforward(self, x, X, div, inverse):
        """(X + s⁻¹P_x F, div + s⁻¹div_S(P_x F)) at the labels x (..., n, d) with the model's feed-forward
        term (local, its divergence in closed form, `meanfield.transformer.feedforward`), or (X, div) without one."""
        ff = self.model.feedforward
        if ff is None:
            return X, div
        F, divF = ff.tangent_divergence(x)
        return X + inverse * F, div + inverse * divF

    @classmethod
    def from_segment(cls, segment):
        return cls(segment.model, segment.representation.n, diagnostics="none", sums=segment.stats.get("sums", "auto"))

    def _tracer_velocity(self, run, t, y, points):
        """X(z) at the tracers z for the fine labels' measure (the field that moves them, `_rhs`)."""
        d = self.model.dim
        (sl, w), sums = run.systems[0], run.system_sums[0]
        x = y[sl, :d] / np.linalg.norm(y[sl, :d], axis=1, keepdims=True)
        return velocity_divergence(points, x, w, self.model.beta, normalized=self.normalized, v=self.v,
                                   heads=self.heads, chunk=self.chunk, sums=sums, threads=self.threads)[0]

    # -- initial states -------------------------------------------------------------------------------
    def _start_run(self, run, values, coarse_values, labels=None, coarse_labels=None, state=None):
        """Per-run weights, representation and the initial state from the density at the labels."""
        labels = self.labels if labels is None else labels
        w = self.q * values
        reps = dict(panels=self.panels, cluster_tol=self.cluster_tol, min_mass=self.min_mass)
        n = len(w)
        run.systems = [(slice(0, n), w)]
        companion = None
        if coarse_values is not None:
            cl = self.coarse[0] if coarse_labels is None else coarse_labels
            wc = self.coarse[1] * coarse_values
            companion = (cl, wc, coarse_values)
            run.systems.append((slice(n, n + len(wc)), wc))
        run.rep = LagrangianNodes(labels, w, values, companion=companion, **reps)
        self._choose_sums(run)
        if state is not None:
            return state
        pts = labels if companion is None else np.concatenate([labels, companion[0]])
        return np.concatenate([pts, np.zeros((len(pts), 1)), self._radius_columns(run, pts)], axis=1)

    def _choose_sums(self, run):
        """The sums of each system of labels (`meanfield.sums.spectralsums.choose_sums`, the bound at ε = 3e-13 for
        both: the companion's spectral sums then run at `COMPANION_EPSILON`); the fine one's are recorded."""
        chosen = [choose_sums(self.sums, self.model, len(w), w, tol=self.sums_tol) for _, w in run.systems]
        run.system_sums = [kind for kind, _ in chosen]
        run.sums, run.sums_error_bound = chosen[0]

    def _values(self, f, pts, name):
        try:
            vals = np.asarray(f(pts), dtype=float)
        except (TypeError, ValueError) as exc:
            raise InvalidInput(f"`{name}` could not be evaluated on points of shape {pts.shape}: {exc}") from None
        if vals.shape != (len(pts),):
            raise InvalidInput(f"`{name}` must return one value per point (shape ({len(pts)},)), got {vals.shape}.")
        return vals

    def _initial_from_callable(self, run, rho0, normalize):
        """ρ_0 at the labels (and the companion's), checked non-negative with mass 1 within 1e-6."""
        check_callable(rho0, "rho0")
        vals, mass = check_density_values(self._values(rho0, self.labels, "rho0"), "rho0",
                                          quadrature_weights=self.q, normalize=normalize)
        coarse = None
        if self.estimate:
            coarse = self._values(rho0, self.coarse[0], "rho0")
            coarse = coarse / mass if normalize else coarse
        return self._start_run(run, vals, coarse)

    def _initial_from_solution(self, run, sol):
        """Continue a Lagrangian Solution exactly, or any density Solution from its density at the labels."""
        rep = sol.representation
        if isinstance(rep, LagrangianNodes):
            data = np.array(sol.data[-1], dtype=float)
            run.systems = [(slice(0, rep.n), rep.weights)]
            if rep.companion is not None:
                run.systems.append((slice(rep.n, data.shape[0]), rep.companion[1]))
            run.rep = rep
            self._choose_sums(run)
            d = self.model.dim
            if data.shape[1] == d + 1:          # a run without radii goes on with the radii given
                data = np.concatenate([data, self._radius_columns(run, data[:, :d])], axis=1)
            return data if self.radial else data[:, :d + 1]
        if not rep.is_density:
            raise InvalidInput("`initial`: Lagrangian continues density Solutions (spectral, finite elements or "
                             "Lagrangian); for particles pass a density callable.")
        mass = rep.mass(sol.data[-1])
        vals = carry_mass(self._density_values(sol, self.labels), self.q, mass)
        coarse = carry_mass(self._density_values(sol, self.coarse[0]), self.coarse[1], mass) if self.estimate else None
        return self._start_run(run, vals, coarse)

    @staticmethod
    def _density_values(sol, pts):
        """The Solution's last density at the labels; round-off negatives (|ρ| <= 1e-8 max ρ) become 0."""
        vals = np.asarray(sol.density(pts, -1), dtype=float)
        if not np.all(np.isfinite(vals)):
            raise InvalidInput("`initial`: the Solution's density is not finite at the labels.")
        top = float(vals.max())
        if vals.min() < -1e-8 * top:
            raise InvalidInput(f"`initial`: the Solution's density is negative at the labels (min {vals.min():.3g}, "
                             f"max {top:.3g}); continue from an earlier, resolved time.")
        return np.clip(vals, 0.0, None)

    def _initial_from_grid(self, run, grid, normalize):
        """Grid values (`meanfield.measures.densities.on_grid`) on exactly the labels (the midpoints with n = nodes on
        S^1, the Gauss–Legendre grid (ntheta, 2·ntheta) on S^2) are the exact ρ_0 at the labels (the
        companion's labels take the interpolant); other grids go through their interpolant."""
        g = grid.unit_mass(normalize, self.model.dim)
        points = g.points.reshape(-1, self.model.dim)
        if points.shape != self.labels.shape or not np.allclose(points, self.labels, rtol=0, atol=1e-14):
            return Solver._initial_from_grid(self, run, g, False)
        coarse = g(self.coarse[0]) if self.estimate else None
        return self._start_run(run, g.values.ravel(), coarse)

    def _initial_from_data(self, run, data, normalize):
        raise InvalidInput("`initial`: a Lagrangian state needs its labels and weights; pass the Solution "
                         "(or its path), not its data array.")

    # -- protocol -------------------------------------------------------------------------------------
    def _representation(self, run):
        return run.rep

    def _to_data(self, run, y):
        d = self.model.dim
        out = np.array(y, dtype=float, copy=True)
        out[:, :d] /= np.linalg.norm(out[:, :d], axis=1, keepdims=True)
        return out

    def _diagnostics(self, run, t, y):
        """Mass, energy and its rate (3.6), clusters, W1 to the nearest Dirac, ρ range, error estimate:
        those named by ``diagnostics``."""
        wanted = self.diagnostics
        rep = run.rep
        data = self._to_data(run, y)
        out = {}
        if "mass" in wanted:
            out["mass"] = rep.mass(data)
        if "energy" in wanted:
            out["energy"] = rep.energy(self.model.beta, data)
        if "energy_rate_identity" in wanted:
            x, _ = rep.nodes(data)
            w = rep.weights
            X, _, Z = velocity_divergence(x, x, w, self.model.beta, normalized=self.normalized, v=self.v,
                                          chunk=self.chunk, partition=True, sums=run.sums)
            A = X if self.model.feedforward is None else X + self.model.feedforward.tangent(x)
            speed2 = np.einsum("nd,nd->n", X, A) * self._scaled(t, x, w, X, np.zeros(len(x)))[2]   # ⟨X, (X + P_xF)/s⟩
            out["energy_rate_identity"] = self.v * float(np.sum(w * speed2 * (Z if self.normalized else 1.0)))
        if wanted & {"n_clusters", "largest_cluster", "clustered_mass"}:
            masses, _ = rep.clusters(data)
            out.update({"n_clusters": float(len(masses)), "largest_cluster": float(masses[0]) if len(masses) else 0.0,
                        "clustered_mass": float(masses.sum())})
        if "w1_to_dirac" in wanted:
            out["w1_to_dirac"] = rep.w1_to_dirac(data)
        if wanted & {"max_density", "min_density"}:
            rho = rep.node_density(data)
            out.update({"max_density": float(rho.max()), "min_density": float(rho.min())})
        if "error_estimate" in wanted:
            # W1 to the companion: every saved time on S^1 (O(n log n)); the last one on S^2 (a linear program)
            est = np.nan
            if self.model.dim == 2 or t >= run.t_eval[-1]:
                est = run.last_estimate = rep.error_estimate(data)
            out["error_estimate"] = est
        if "nodes" in wanted:
            out["nodes"] = float(rep.n)
        return {k: v for k, v in out.items() if k in wanted}

    def _stats(self, run):
        return {"nodes": int(run.rep.n), "error_estimate": float(run.last_estimate),
                "sums": run.sums, "sums_error_bound": float(run.sums_error_bound)}

    # -- label refinement on S^1 ------------------------------------------------------------------------
    def solve_adaptive(self, initial, t_eval, *, tol=1e-4, gap=0.05, max_rounds=10, progress=False, **options):
        """Refine the panels where the label map steepens, re-running from the start, until two
        successive rounds agree to ``tol`` in W1 at the last saved time (S^1, ``panels`` labels).

        Each round splits every panel at the labels on both sides of each gap wider than ``gap``
        (radians) between consecutive nodes at the final time: the steep step of the map y ↦ Φ_t(y)
        near a separatrix between clusters is confined to a panel ~5–30 times smaller (the spacing
        of its Gauss nodes), while the smooth parts stay as they are. The run is then repeated
        from the initial state on the new labels — exact, no interpolation. ``initial`` is the
        initial state of `solve` (a density callable or a density Solution).

        Returns the last round's Solution; its ``error_estimate`` diagnostic is the W1 distance to
        the previous round at each saved time (exact on S^1, `meanfield.observables.wasserstein`), an estimate of
        the previous round's error and so, while rounds converge, a bound for this one. ``stats``
        holds ``rounds``, ``nodes_per_round``, ``estimate_per_round`` and the total ``wall_time``.
        """

        if self.panels is None:
            raise InvalidInput("`solve_adaptive` refines composite Gauss–Legendre panels: build the solver with "
                             "`panels` (S^1).")
        tol = check_real(tol, "tol", low=0.0, low_open=True)
        gap = check_real(gap, "gap", low=0.0, low_open=True, high=np.pi)
        max_rounds = check_int(max_rounds, "max_rounds", low=1)
        edges, prev = self.panels, None
        history, wall = [], 0.0
        opts = dict(order=self.order, cluster_tol=self.cluster_tol, min_mass=self.min_mass, chunk=self.chunk)
        for _ in range(max_rounds):
            sol = Lagrangian(self.model, panels=edges, estimate=False, **opts).solve(initial, t_eval,
                                                                                   progress=progress, **options)
            wall += sol.stats.get("wall_time", 0.0)
            est = np.full(len(sol.t), np.nan)
            if prev is not None:
                est = np.array([wasserstein(sol.measure(i), prev.measure(i)) for i in range(len(sol.t))])
            history.append((int(sol.representation.n), float(est[-1])))
            new = refine_panels(edges, self.order, sol.representation.nodes(sol.data[-1])[0], gap)
            if (prev is not None and est[-1] <= tol) or len(new) == len(edges):
                break
            prev, edges = sol, new
        sol.diagnostics["error_estimate"] = est
        sol.stats.update({"rounds": len(history), "nodes_per_round": [h[0] for h in history],
                          "estimate_per_round": [h[1] for h in history], "wall_time": wall,
                          "error_estimate": history[-1][1]})
        return sol


Lagrangian.__signature__ = signature_of_init(Lagrangian)


def refine_panels(edges, order, positions, gap):
    """New panel edges: split at the labels on both sides of every gap > ``gap`` between consecutive
    nodes (cyclic, at ``positions`` (n, 2) of the composite Gauss–Legendre labels on ``edges``)."""
    theta, _ = circle_panels(edges, order)
    Theta = monotone_lift(np.arctan2(positions[:, 1], positions[:, 0]))
    gaps = np.diff(np.append(Theta, Theta[0] + 2 * np.pi))
    big = np.nonzero(gaps > gap)[0]
    n = len(theta)
    cuts = np.concatenate([theta[big], theta[(big + 1) % n]])
    cuts = cuts[(cuts > edges[0] + _SPAN_TOL) & (cuts < edges[-1] - _SPAN_TOL)]
    return np.unique(np.concatenate([edges, cuts]))


def lagrangian_continuation(solution, t_eval, nodes=None, **options):
    """Continue a density `Solution` (e.g. a spectral run that became under-resolved) with `Lagrangian`.

    The last saved density of ``solution`` is evaluated at the labels and becomes ρ_0 of the
    characteristics from ``t_eval[0]`` = ``solution.t[-1]`` on. ``nodes`` defaults to 4(2K + 1)
    trapezoid labels for a `FourierSeries` with K modes on S^1 (1024 otherwise) and to
    2(lmax + 2)² Gauss–Legendre labels on S^2, at most `MAX_DEFAULT_NODES` (a step costs O(n²)).
    Further ``options`` go to `Lagrangian` (``panels``, ``order``, ``estimate``, ``cluster_tol``,
    ``min_mass``) or to `Lagrangian.solve` (``rtol``, ``atol``, ``progress`` ...). Returns the
    Lagrangian Solution over ``t_eval``.
    """
    ctor = {k: options.pop(k) for k in ("panels", "order", "estimate", "cluster_tol", "min_mass", "chunk")
            if k in options}
    return continuation_solver(solution, nodes, **ctor).solve(solution, t_eval, **options)


def continuation_solver(solution, nodes=None, **options):
    """The `Lagrangian` discretisation that continues ``solution``: ``nodes`` labels (default from the
    spectral resolution, see `lagrangian_continuation`) and the constructor ``options``."""
    rep = solution.segments[-1].representation
    dim = solution.model.dim
    cap = MAX_DEFAULT_NODES[dim]
    if rep.layered:                 # labels in (σ, x) on the run's own position rule
        options.setdefault("positions", rep.rule)
        cap = LAYERED_MAX_NODES[dim]
    if nodes is None and "panels" not in options:
        if isinstance(rep, LayeredNodes):
            nodes = rep.n
        elif dim == 2:
            nodes = 4 * (2 * rep.modes + 1) if hasattr(rep, "modes") else 1024
        else:
            nodes = 2 * (rep.lmax + 2) ** 2 if hasattr(rep, "lmax") else 2048
        nodes = min(nodes, cap)
    return Lagrangian(solution.model, nodes, **options)


__all__ = ["Lagrangian", "velocity_divergence", "moment_field", "moment_values", "spectral_field", "spectral_rates",
           "heads_field", "circle_panels", "refine_panels", "lagrangian_continuation", "continuation_solver"]
