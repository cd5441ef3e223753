"""Where the layer normalisation sits: a speed factor on each token's direction (docs/normalization.md).

Karagodin, Ge, Polyanskiy, Rigollet, *Normalization in attention dynamics* (2025): with the token
x_j = r_j θ_j (direction θ_j on the sphere, radius r_j) and A_j the attention output on the
directions (unprojected; Σ over heads), every scheme moves the direction along the paper's
field at its own speed:

    θ̇_j = s_j⁻¹ P_{θ_j} A_j,        ṙ_j = g_j,

    "post"        s = 1                         g = 0
    "pre"         s = r                         g = ⟨θ, A⟩
    "mix"         "post" for t <= τ, "pre" after (τ = ``mix_depth``)
    "peri"        s = r‖A‖                      g = ⟨θ, A⟩/‖A‖
    "ngpt"        s = ‖A‖/α(t)                  g = 0
    "sqrt-depth"  s = √(t + 1)                  g = 0

In the coordinates x = rθ of R^d, ẋ = g θ + (r/s) P_θ A, which is simply ẋ = A for "pre" and
ẋ = A/‖A‖ for "peri". The schemes whose radius moves ("pre", "mix", "peri": `carries_radius`)
are integrated in these coordinates; the others keep the directions on the sphere and their
radii fixed. A token with A = 0 (a silent token under a mask) does not move.
"""
import numpy as np
from ..errors import InvalidInput

RADIAL = ("pre", "mix", "peri")


def carries_radius(model):
    """Whether the radii of the tokens move under ``model.normalization`` ("pre", "mix", "peri")."""
    return model.normalization in RADIAL


def alpha(model, t):
    """α(t) of "ngpt" (``model.ngpt_alpha``, a number or a function of t)."""
    a = model.ngpt_alpha
    return float(a(t)) if callable(a) else float(a)


def scheme_at(model, t):
    """The scheme in force at time t: "mix" is "post" for t <= τ and "pre" after."""
    if model.normalization == "mix":
        return "post" if t <= model.mix_depth else "pre"
    return model.normalization


def _norm(a):
    return np.sqrt(np.einsum("...d,...d->...", a, a))[..., None]


def _safe_inverse(a):
    """1/a, and 0 where a = 0 (a token with no attention output stays put)."""
    with np.errstate(divide="ignore"):
        return np.where(a > 0, 1.0 / np.where(a > 0, a, 1.0), 0.0)


def inverse_speed(model, t, radii, A):
    """s_j⁻¹ (..., n, 1) of the table above at time t, for radii (..., n, 1) and outputs A (..., n, d)."""
    scheme = scheme_at(model, t)
    if scheme == "post":
        return np.ones(A.shape[:-1] + (1,))
    if scheme == "pre":
        return 1.0 / radii
    if scheme == "peri":
        return _safe_inverse(radii * _norm(A))
    if scheme == "ngpt":
        return alpha(model, t) * _safe_inverse(_norm(A))
    return np.full(A.shape[:-1] + (1,), 1.0 / np.sqrt(t + 1.0))       # "sqrt-depth"


def radius_rate(model, t, theta, A):
    """ṙ_j (..., n, 1): ⟨θ, A⟩ ("pre"), ⟨θ, A⟩/‖A‖ ("peri"), else 0."""
    scheme = scheme_at(model, t)
    if scheme not in ("pre", "peri"):
        return np.zeros(A.shape[:-1] + (1,))
    g = np.einsum("...d,...d->...", theta, A)[..., None]
    return g * _safe_inverse(_norm(A)) if scheme == "peri" else g


def direction_velocity(model, t, theta, radii, A):
    """θ̇ = s⁻¹ P_θ A at the directions θ (..., n, d)."""
    tangent = A - np.einsum("...d,...d->...", theta, A)[..., None] * theta
    return inverse_speed(model, t, radii, A) * tangent


def position_velocity(model, t, theta, radii, A):
    """ẋ = ṙ θ + r θ̇ for x = r θ (the coordinates of the schemes that carry the radius)."""
    return radius_rate(model, t, theta, A) * theta + radii * direction_velocity(model, t, theta, radii, A)


def field_inverse_speed(model, t, tangent_sq, radial):
    """s⁻¹ of a continuum at time t for the schemes whose speed is a function of t and of the field
    ("post", "ngpt", "sqrt-depth"): ``tangent_sq`` = |P_x A|² and ``radial`` = ⟨x, A⟩ on a grid
    (only read for "ngpt", where ‖A‖² = |P_x A|² + ⟨x, A⟩²)."""
    scheme = model.normalization
    if scheme == "post":
        return 1.0
    if scheme == "sqrt-depth":
        return 1.0 / np.sqrt(t + 1.0)
    if scheme == "ngpt":
        return alpha(model, t) * _safe_inverse(np.sqrt(tangent_sq + np.square(radial)))
    raise InvalidInput(f"`normalization`={scheme!r} has a speed that depends on the radius of each token; "
                     "a density on the sphere does not carry it (use solvers.Lagrangian, whose labels do, or "
                     "solvers.Particles).")


def _dot(a, b):
    return np.einsum("nd,nd->n", a, b)


def label_rates(model, t, theta, radii, G, A, DA):
    """The characteristics of a density of directions whose tokens carry a radius (docs/normalization.md).

    A label at θ carries its radius r and G = ∇_S r (the radii form a field r(t, θ) while the flow is a
    diffeomorphism and r_0 is smooth). With X = P_θ A, the scheme's s⁻¹ and radius rate h (both of θ, r, A):

        θ̇ = s⁻¹X,   ℓ̇ = div_S(s⁻¹X) = s⁻¹ div_S X + ⟨∇_S s⁻¹, X⟩,   ṙ = h,
        Ġ = ∇_S h − θ⟨θ̇, G⟩ − ∇_S s⁻¹ ⟨X, G⟩ − s⁻¹(P_θ DAᵀG − ⟨θ, A⟩G),

    with div_S X = tr DA − θᵀDAθ − (d − 1)⟨θ, A⟩ (docs/mathematics.md §9). Ġ is the gradient of the transport
    equation ∂_t r + ⟨θ̇, ∇r⟩ = h along the flow (the 1-homogeneous extension of θ̇ to R^d, whose Jacobian
    at θ is θ̇θᵀ + D(s⁻¹X)); ∇_S s⁻¹ = −G/r² ("pre"), −G/(r²‖A‖) − ∇_S‖A‖/(r‖A‖²) ("peri"), 0 ("post",
    "mix" up to τ); ∇_S h = P_θ(A + DAᵀθ) ("pre"), its quotient by ‖A‖ for "peri"; ∇_S‖A‖ = P_θ DAᵀA/‖A‖.

    theta, G, A (n, d); radii (n,); DA (n, d, d). Returns (θ̇ (n, d), ℓ̇ (n,), ṙ (n,), Ġ (n, d)).
    """
    scheme = scheme_at(model, t)
    d = theta.shape[1]

    def tangent(u):
        return u - _dot(theta, u)[:, None] * theta

    G = tangent(G)
    radial = _dot(theta, A)
    X = A - radial[:, None] * theta
    div = np.einsum("nii->n", DA) - np.einsum("na,nab,nb->n", theta, DA, theta) - (d - 1) * radial
    zero = np.zeros_like(radii)
    inv, grad_inv, h, grad_h = np.ones_like(radii), np.zeros_like(G), zero, np.zeros_like(G)
    if scheme in ("pre", "peri"):
        inv = 1.0 / radii
        grad_inv = -G * (inv ** 2)[:, None]
        h = radial
        grad_h = tangent(A + np.einsum("nab,na->nb", DA, theta))
    if scheme == "peri":
        norm = np.sqrt(_dot(A, A))
        grad_norm = tangent(np.einsum("nab,na->nb", DA, A)) / norm[:, None]
        grad_inv = (grad_inv - (inv / norm)[:, None] * grad_norm) / norm[:, None]
        inv = inv / norm
        grad_h = (grad_h - (h / norm)[:, None] * grad_norm) / norm[:, None]
        h = h / norm
    velocity = inv[:, None] * X
    rate = inv * div + _dot(grad_inv, X)
    dG = (grad_h - _dot(velocity, G)[:, None] * theta - grad_inv * _dot(X, G)[:, None]
          - inv[:, None] * (tangent(np.einsum("nab,na->nb", DA, G)) - radial[:, None] * G))
    return velocity, rate, h, dG


def check_radii(radii, shape):
    """The initial radii: None (all 1), a number, or an array of the token shape (n,) or (B, n); > 0."""
    if radii is None:
        return np.ones(shape + (1,))
    try:
        r = np.asarray(radii, dtype=float)
    except (TypeError, ValueError):
        raise InvalidInput("`radii` must be positive numbers, one per token.") from None
    try:
        r = np.broadcast_to(r, shape).copy()
    except ValueError:
        raise InvalidInput(f"`radii` must have the shape of the tokens {shape} (or broadcast to it), "
                         f"got shape {r.shape}.") from None
    if not np.all(np.isfinite(r)) or not np.all(r > 0):
        raise InvalidInput("`radii` must be finite and > 0 (the token norms).")
    return r[..., None]
