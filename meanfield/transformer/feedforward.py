"""The feed-forward term of a transformer layer as a local field on the sphere (docs/mathematics.md §15).

A layer's MLP adds to every token the field

    F(x) = W act(Ux + b),     W (d, w), U (w, d), b (w,),

moved along the sphere by its tangent part P_x F(x) = F − ⟨x, F⟩x (Lu et al. 2019 read it as a
convection term beside the attention's interaction term). It does not depend on the other tokens,
so the continuity equation gains div_S(ρ P_x F) = ⟨∇_S ρ, P_x F⟩ + ρ div_S(P_x F) with the closed form

    div_S(P_x F) = tr(DF) − ⟨x, DF x⟩ − (d − 1)⟨x, F⟩,     DF = W diag(act'(Ux + b)) U,

(the surface divergence of P_x F for F extended to R^d; docs/mathematics.md §15). `FeedForward` holds
the value, the Jacobian and this divergence, used by the particles and by every continuum solver.
"""
import numpy as np
from scipy.special import erf
from ..errors import InvalidInput

_SQRT2 = np.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / np.sqrt(2.0 * np.pi)


def _gelu(z):
    return 0.5 * z * (1.0 + erf(z / _SQRT2))


def _gelu_and_slope(z):
    cdf = 0.5 * (1.0 + erf(z / _SQRT2))
    return z * cdf, cdf + z * _INV_SQRT_2PI * np.exp(-0.5 * z * z)


def _tanh_and_slope(z):
    a = np.tanh(z)
    return a, 1.0 - a * a


def _relu_and_slope(z):
    return np.maximum(z, 0.0), (z > 0).astype(float)


# act and (act, act'): GELU in its exact erf form
ACTIVATIONS = {"gelu": (_gelu, _gelu_and_slope), "tanh": (np.tanh, _tanh_and_slope),
               "relu": (lambda z: np.maximum(z, 0.0), _relu_and_slope)}


def check_mlp(mlp, dim, name="mlp", batch=None):
    """(W, U, b) as read-only float arrays of shapes (d, w), (w, d), (w,), each possibly with a leading
    axis of ``batch`` realisations (one MLP per realisation); ValueError naming ``name`` and the shapes."""
    try:
        W, U, b = mlp
    except (TypeError, ValueError):
        raise InvalidInput(f"`{name}` must be a triple (W, U, b) with W (d, w), U (w, d) and b (w,).") from None
    try:
        W, U, b = (np.array(a, dtype=float) for a in (W, U, b))
    except (TypeError, ValueError):
        raise InvalidInput(f"`{name}` = (W, U, b) must hold real arrays.") from None
    lead = W.shape[:1] if batch is not None and W.ndim == 3 else ()
    w = W.shape[-1] if W.ndim >= 2 else -1
    if W.shape != lead + (dim, w) or U.shape != lead + (w, dim) or b.shape != lead + (w,) or lead not in ((), (batch,)):
        many = "" if batch is None else f", or with a leading axis of {batch} realisations"
        raise InvalidInput(f"`{name}` = (W, U, b) must have shapes (d, w), (w, d), (w,) with d = {dim}{many}, got "
                         f"{W.shape}, {U.shape}, {b.shape}.")
    if not all(np.all(np.isfinite(a)) for a in (W, U, b)):
        raise InvalidInput(f"`{name}` contains NaN or inf.")
    for a in (W, U, b):
        a.flags.writeable = False
    return W, U, b


class FeedForward:
    """F(x) = W act(Ux + b) on points x (..., n, d): ``value``, ``jacobian``, ``tangent`` (P_x F) and
    ``divergence`` (div_S(P_x F) in closed form). W, U, b may carry leading axes (one MLP per
    realisation, (B, d, w), ...) that broadcast against those of x. ``model.feedforward`` builds it from
    ``Model(mlp=...)``."""

    def __init__(self, W, U, b, activation="gelu"):
        self.W, self.U, self.b = W, U, b
        self.activation = activation
        self._act, self._act_and_slope = ACTIVATIONS[activation]
        self._Ut, self._Wt = np.swapaxes(U, -1, -2), np.swapaxes(W, -1, -2)      # matmul broadcasts the batch axes
        self._diagonal = np.einsum("...kd,...dk->...k", U, W)[..., None, :]    # (UW)_kk: tr(DF) = Σ_k act'_k (UW)_kk
        self.dim, self.width = W.shape[-2:]

    def _pre(self, x):
        return x @ self._Ut + self.b[..., None, :]

    def value(self, x):
        """F(x) (..., n, d)."""
        return self._act(self._pre(x)) @ self._Wt

    def jacobian(self, x):
        """DF(x) = W diag(act'(Ux + b)) U (..., n, d, d)."""
        return np.einsum("...dk,...nk,...ke->...nde", self.W, self._act_and_slope(self._pre(x))[1], self.U)

    def tangent(self, x):
        """P_x F(x) = F − ⟨x, F⟩x (..., n, d) for unit x."""
        F = self.value(x)
        return F - np.einsum("...d,...d->...", x, F)[..., None] * x

    def tangent_divergence(self, x):
        """(P_x F, div_S(P_x F)) at unit points x (..., n, d): one evaluation of Ux + b for both, and
        div_S(P_x F) = tr(DF) − ⟨x, DF x⟩ − (d − 1)⟨x, F⟩ without forming DF:
        tr(DF) = Σ_k act'_k (UW)_kk and ⟨x, DF x⟩ = Σ_k act'_k (Wᵀx)_k (Ux)_k."""
        z = self._pre(x)
        act, slope = self._act_and_slope(z)
        F = act @ self._Wt
        radial = np.einsum("...d,...d->...", x, F)
        div = np.einsum("...k,...k->...", slope, self._diagonal - (x @ self.W) * (z - self.b[..., None, :])) \
            - (x.shape[-1] - 1) * radial
        return F - radial[..., None] * x, div

    def divergence(self, x):
        """div_S(P_x F) (..., n) at unit points x (..., n, d)."""
        return self.tangent_divergence(x)[1]


def tangent_components(field, frame):
    """The components ⟨field, e_a⟩ (..., a, grid) of ambient vectors ``field`` (grid..., d) along the
    tangent frame ``frame`` (a, grid..., d) of a spectral grid (e_θ on S^1; e_θ, e_φ on S^2)."""
    return np.einsum("a...d,...d->a...", frame, field)
