"""Small independent references that share no code with the solvers they check.

* `legendre_zonal`: zonal flows on S^2, Legendre–Galerkin in z = x_3, exact in time;
* `fourier_collocation`: flows on S^1, plain (not dealiased) Fourier collocation on M points.

Both integrate by DOP853 at rtol 1e-12; they are meant for tests, figures and benchmarks.

For ρ depending on z only, the continuity equation ((3.4); docs/mathematics.md §10) reduces to

    ∂_t ρ = −v ∂_z((1 − z²) ρ ∂_z ψ),   ψ = (1/β) log(K*ρ)  (SA)   or   e^β (K*ρ)/β  (USA, scaled),

with (K*ρ)_l = i_l(β) ρ_l on the Legendre coefficients (Funk–Hecke, docs/mathematics.md §3, i_l(β)e^{-β} =
sqrt(π/2β)·I_{l+1/2}(β)e^{-β}). The products are taken on 2L + 2 Gauss–Legendre nodes and the ODE is
integrated by DOP853 at rtol 1e-12.
"""
import numpy as np
from numpy.polynomial import legendre as leg
from scipy.integrate import solve_ivp
from scipy.special import ive

from meanfield.validation import check_callable, check_int, check_real
from meanfield.spaces.quadrature import gauss_gegenbauer
from meanfield.errors import InvalidInput


def legendre_zonal(beta, rho_of_z, t_end, *, v=1.0, normalized=True, L=48, tail_tol=1e-8):
    """ρ(z, t_end) for a zonal initial density ``rho_of_z`` (a callable of z ∈ [−1, 1]).

    Parameters
    ----------
    beta : float > 0
    rho_of_z : callable, the σ-relative initial density as a function of z = x_3.
    t_end : float > 0
    v : float, V = v·I (+1 attractive, −1 repulsive).
    normalized : bool, (SA) if True, (USA) otherwise.
    L : int >= 4, highest Legendre degree.
    tail_tol : float, the four highest coefficients at t_end must stay below it (else ValueError:
        the reference is under-resolved; raise ``L``).

    Returns
    -------
    callable z -> ρ(z, t_end)
    """
    beta = check_real(beta, "beta", low=0.0, low_open=True)
    check_callable(rho_of_z, "rho_of_z")
    t_end = check_real(t_end, "t_end", low=0.0, low_open=True)
    v = check_real(v, "v")
    L = check_int(L, "L", low=4)
    z, wz = gauss_gegenbauer(2 * L + 2, 3)                 # Gauss–Legendre in z, weights of dσ = dz/2
    Vq = leg.legvander(z, L)
    norm = 2 * np.arange(L + 1) + 1
    a = np.sqrt(np.pi / (2 * beta)) * ive(np.arange(L + 1) + 0.5, beta)     # i_l(β) e^{-β}

    def proj(f):
        return norm * (Vq.T @ (wz * f))

    def rhs(t, c):
        kc = a * c
        K, dK = Vq @ kc, leg.legval(z, leg.legder(kc))
        dpsi = dK / (beta * K) if normalized else np.exp(beta) * dK / beta
        return -v * np.concatenate([leg.legder(proj((1 - z * z) * (Vq @ c) * dpsi)), [0.0]])

    c = solve_ivp(rhs, (0.0, t_end), proj(np.asarray(rho_of_z(z), dtype=float)), method="DOP853",
                  rtol=1e-12, atol=1e-13).y[:, -1]
    tail = float(np.abs(c[-4:]).max())
    if tail > tail_tol:
        raise InvalidInput(f"`L`={L} does not resolve the zonal reference at t_end={t_end:g} (top coefficients "
                         f"{tail:.1e} > {tail_tol:.0e}); raise `L`.")
    return lambda zz: leg.legval(zz, c)


def fourier_collocation(beta, rho0, t_end, *, v=1.0, normalized=True, M=256):
    """ρ(θ, t_end) on S^1 by Fourier collocation on M equispaced angles ((7.1); docs/mathematics.md §2).

    ρ_t = −∂_θ(ρX), X = v∂_θψ with ψ = (1/β) log(K*ρ) (SA) or e^β(K*ρ)/β (USA, scaled), and
    (K*ρ)_k = I_k(β)ρ_k. ``rho0`` is a σ-relative density, a callable of points (n, 2) on S^1.
    Returns a callable θ -> ρ(θ, t_end) (the trigonometric interpolant).
    """
    beta = check_real(beta, "beta", low=0.0, low_open=True)
    check_callable(rho0, "rho0")
    t_end = check_real(t_end, "t_end", low=0.0, low_open=True)
    v = check_real(v, "v")
    M = check_int(M, "M", low=8)
    theta = 2 * np.pi * np.arange(M) / M
    k = np.fft.fftfreq(M, 1.0 / M)
    Ik = ive(np.abs(k), beta)                                               # I_k(β) e^{-β}

    def rhs(t, r):
        c = np.fft.fft(r)
        Kr, dKr = np.fft.ifft(Ik * c).real, np.fft.ifft(1j * k * Ik * c).real
        X = v * dKr / (beta * Kr) if normalized else v * np.exp(beta) * dKr / beta
        return -np.fft.ifft(1j * k * np.fft.fft(r * X)).real

    y0 = np.asarray(rho0(np.stack([np.cos(theta), np.sin(theta)], -1)), dtype=float)
    y = solve_ivp(rhs, (0.0, t_end), y0, method="DOP853", rtol=1e-12, atol=1e-13).y[:, -1]
    c = np.fft.rfft(y) / M
    return lambda th: c[0].real + 2 * np.real(np.exp(1j * np.outer(th, np.arange(1, c.size))) @ c[1:])
