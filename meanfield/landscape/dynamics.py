"""The dynamics near a critical point: the ascent flow of E_β from a perturbed critical point stays near a
strict local maximum and leaves a strict saddle along the unstable direction (docs/landscape.md).

The flow is ẋ_i = (1/w_i) P_{x_i} ∂E/∂x_i = P_{x_i} Σ_j w_j A_ij e^{β⟨x_i,x_j⟩} x_j: with all-ones A this is
(USA) (`solvers.Particles` with ``Model(beta, dim, normalized=False)``), the gradient ascent of E_β for
the metric Σ_i w_i|v_i|². (SA) divides the velocity of token i by Z_i = Σ_j w_j e^{β⟨x_i,x_j⟩} > 0: the
ascent of the same E_β for the metric Σ_i w_i Z_i(x)|v_i|², so the two flows have the same critical points
and, at each, the same number of unstable directions (docs/mathematics.md §17.1).
"""
import numpy as np
from scipy.integrate import solve_ivp

from .energy import reduced_hessian, tangent_basis


def velocity(energy, x):
    """(1/w_i) P_{x_i} ∂E/∂x_i, (n, d)."""
    g = energy.euclidean_gradient(x) / energy.w[:, None]
    return g - np.sum(g * x, axis=1, keepdims=True) * x


def ascent(energy, x0, t_eval, rtol=1e-11, atol=1e-13):
    """The ascent flow from x0 (n, d) at the times ``t_eval``: positions (T, n, d) (DOP853)."""
    n, d = x0.shape

    def rhs(_, y):                       # at x/|x|: tangent to the sphere, so |x| is conserved (neutral)
        x = y.reshape(n, d)
        return velocity(energy, x / np.linalg.norm(x, axis=1, keepdims=True)).ravel()

    sol = solve_ivp(rhs, (t_eval[0], t_eval[-1]), x0.ravel(), method="DOP853", t_eval=t_eval, rtol=rtol, atol=atol)
    x = sol.y.T.reshape(-1, n, d)
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def distance_modulo_rotation(x, y):
    """min over Q ∈ O(d) of max_i |Q x_i − y_i| (Q from the orthogonal Procrustes problem)."""
    u, _, vt = np.linalg.svd(x.T @ y)
    return float(np.max(np.linalg.norm(x @ (u @ vt) - y, axis=1)))


def perturb(energy, x, direction, eps):
    """x moved by eps (max-norm over tokens) along the tangent vector ``direction`` ((n, d−1) coordinates)."""
    B = tangent_basis(x)
    step = np.einsum("ida,ia->id", B, direction.reshape(x.shape[0], -1))
    step *= eps / np.max(np.linalg.norm(step, axis=1))
    y = x + step
    return y / np.linalg.norm(y, axis=1, keepdims=True)


def stays_near(energy, x, eps=1e-6, t_end=50.0, rng=0, samples=101):
    """The largest distance (modulo rotation) from the critical point x over t in [0, t_end] of the flow
    started at x plus a random perturbation of size eps; at a strict local maximum it stays O(eps)."""
    direction = np.random.default_rng(rng).standard_normal(energy.n * (energy.dim - 1))
    t = np.linspace(0.0, t_end, samples)
    path = ascent(energy, perturb(energy, x, direction, eps), t)
    return max(distance_modulo_rotation(p, x) for p in path)


def departure(energy, x, eps=1e-6, leave=1e-3, t_end=200.0):
    """The flow from x plus eps times the unstable eigenvector of the Hessian, until its distance to x
    first exceeds ``leave``: returns (cos, rate, predicted), with ``cos`` the cosine between the
    displacement then and the unstable direction, ``rate`` the measured growth rate of the distance and
    ``predicted`` the top eigenvalue of the linearised flow (W^{−1}H on the complement of the rotations)."""
    Hr, comp = reduced_hessian(energy, x)
    winv = np.repeat(1.0 / energy.w, energy.dim - 1)
    # W^{-1}H restricted: generalised eigenproblem H v = μ W v on the complement
    W = comp.T @ (comp / winv[:, None])
    mu, vecs = np.linalg.eig(np.linalg.solve(W, Hr))
    k = int(np.argmax(mu.real))
    v = comp @ vecs[:, k].real
    t = np.linspace(0.0, t_end, 4001)
    path = ascent(energy, perturb(energy, x, v, eps), t)
    dist = np.array([distance_modulo_rotation(p, x) for p in path])
    j = int(np.argmax(dist > leave)) if np.any(dist > leave) else len(t) - 1
    i = int(np.argmax(dist > 10 * eps))
    rate = np.log(dist[j] / dist[i]) / (t[j] - t[i]) if j > i else float("nan")
    B = tangent_basis(x)
    u, _, vt = np.linalg.svd(path[j].T @ x)
    disp = path[j] @ (u @ vt) - x
    coords = np.einsum("ida,id->ia", B, disp).ravel()
    cos = abs(coords @ v) / (np.linalg.norm(coords) * np.linalg.norm(v))
    return float(cos), float(rate), float(mu[k].real)
