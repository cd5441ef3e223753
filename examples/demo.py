"""README demonstration: kernel multipliers and Proposition 3.4 energies (docs/mathematics.md §3–§4)."""
import numpy as np

import meanfield as mf

beta = 4.0
for dim in (2, 3):
    a = mf.kernel_multipliers(beta, dim, 6)
    print(f"S^{dim - 1}: a_l({beta:g}) for l = 0..6:", np.array2string(a, precision=6))

rng = np.random.default_rng(0)
x, w = mf.sample(mf.densities.von_mises_fisher([0, 0, 1], 2.0), 2000, 3, rng=rng)
print(f"E_beta(uniform) = {mf.uniform_energy(beta, 3):.6f}  <=  E_beta(vMF sample) = "
      f"{mf.interaction_energy(beta, (x, w)):.6f}  <=  E_beta(Dirac) = {mf.dirac_energy(beta):.6f}")
