"""Stationary states of the noisy mean-field equation, their branches and the phase transition.

With noise ν > 0 the mean-field equation (docs/mathematics.md §6.1; Geshkovski, Letrouit,
Polyanskiy, Rigollet, *A mathematical perspective on Transformers* (2023), (3.4) with the
Laplacian of their Problem 7) reads

    ∂_t ρ + div_S(ρ v∇Φ[ρ]) = ν Δ_S ρ,    Φ = (K*ρ)/β  (USA, (3.10)),   Φ = log(K*ρ)/β  (SA, (3.7)),

with (K*ρ)(x) = ∫ e^{β⟨x,y⟩} ρ(y) dσ(y) and V = v·I. A density with zero flux, ρ v∇Φ = ν∇ρ, is
stationary; it solves the **self-consistency equation**

    ρ = e^{vΦ[ρ]/ν} / Z,    Z = ∫ e^{vΦ[ρ]/ν} dσ.                                         (SC)

For (USA), (SC) is the Euler–Lagrange equation (Gibbs form) of the free energy

    F[ρ] = ν ∫ ρ log ρ dσ − v·(1/2β) ∬ e^{β⟨x,y⟩} ρ(x)ρ(y) dσ dσ   (ν × entropy − v·E_β, (3.5)),

and every stationary state solves it. For (SA) (no free energy) every *zonal* stationary state
solves (SC) with Φ = log(K*ρ)/β: the flux of a zonal state is a meridional field with zero
divergence, hence zero (docs/mathematics.md §6.4). The package solves (SC) by Newton's method and
follows its solutions in ν; docs/noise.md shows the results.

Exact anchors (degree-l multipliers a_l(β) of `meanfield.kernel_multipliers`):

* **Critical noise.** Linearising (SC) at ρ = 1, the degree-l part is multiplied by
  v·a_l/(βν) (USA) or v·a_l/(βνa_0) (SA); degree 1 becomes unstable first, at
  ν_c = a_1/β (USA), a_1/(β a_0) (SA) — the zero of the exact linear rate of degree 1
  (docs/mathematics.md §5).
* **Landau expansion.** Write ρ = 1 + ε s + ρ_2 + …, s = ⟨x, e⟩, so that the order parameter is
  r = |∫ x ρ dσ| = ε/d. Expanding (SC) to third order in ε, with q = a_2/a_1, g = a_1/a_0,
  α = 2(d−1)/(d(d+2)) (= d∫s·s(s²−1/d)dσ) and γ = 3/(d+2) (= d∫s⁴dσ), gives ν_c/ν = 1 − C ε² + O(ε⁴):

      (USA)  C = α q / (2(1−q)) + γ/6 − 1/(2d) = [(d−1) q/(1−q) − 1] / (d(d+2)),
      (SA)   C = α q (1−g)² / (2(1−q)) − α g/2 + γ (1 + 2g²)/6 − 1/(2d),

  so that along the branch ν = ν_c (1 + c r² + O(r⁴)) with the Landau coefficient c = d² C.
  c < 0: supercritical (continuous transition, clustered states for ν < ν_c, r² ∝ ν_c − ν);
  c > 0: subcritical (discontinuous: clustered states coexist with the stable uniform state up
  to the fold ν_fold > ν_c). For (USA) c changes sign where q = a_2/a_1 = I_{d/2+1}(β)/I_{d/2}(β)
  equals 1/d: β_* = 2.4469… (d = 2), 1.8162… (d = 3) (`beta_star`).
* **Stability.** The eigenvalues of the McKean–Vlasov equation linearised at a zonal state ρ̄,

      L δρ = −v div(δρ ∇Φ̄ + ρ̄ ∇δΦ) + ν Δδρ,    div(f∇g) = ½[Δ(fg) + fΔg − gΔf],

  computed in the same spectral basis, sector by sector: a zonal state commutes with the
  rotations about its axis, so the perturbations g(s)·Y_m(ξ) (x = s e + (1−s²)^{1/2} ξ, Y_m a
  degree-m harmonic on S^{d−2}) form invariant sectors m = 0, 1, 2, … (on S^1: cos and sin). The
  neutral rotation mode √(1−s²)ρ̄'(s) of sector 1 is factored out; the largest real part of
  what is left is ``leading_eigenvalue`` (< 0: linearly stable).

Numerics (the bases of `meanfield.spaces`). Zonal states use the orthonormal basis of sector m,
G_l^m(s) ∝ (1−s²)^{m/2} P_{l−m}^{(α_m, α_m)}(s), α_m = (d−3)/2 + m (Gegenbauer/Jacobi; √2 cos lθ
on S^1, √(2l+1) P_l on S^2), with Gauss–Gegenbauer quadrature in s (`GegenbauerBasis`). Non-zonal
states use `FourierBasis` on S^1 and `SphericalHarmonicBasis` on S^2. Single states:
`scipy.optimize.newton_krylov`. Branches: pseudo-arclength continuation with dense Newton
correctors and the exact Jacobian of (SC), started along the Landau direction at ν_c, refined at
folds by maximising ν over the order parameter.

Modules: `anchors` (the closed forms), `zonal` (the zonal equation, its Jacobian and linearised
dynamics), `state` (`StationaryState`), `self_consistency` (one state), `branches` (continuation).
"""
from .anchors import beta_star, critical_noise, landau_coefficient
from .branches import Fold, branch, branch_state, fold_point
from .self_consistency import self_consistent
from .state import StationaryState

__all__ = ["critical_noise", "beta_star", "landau_coefficient", "fold_point", "branch", "branch_state",
           "self_consistent", "StationaryState", "Fold"]
