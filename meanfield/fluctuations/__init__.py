"""Fluctuations of n tokens about the mean field (Problem 4 of the paper; docs/fluctuations.md).

* `ensemble`: R realisations of n i.i.d. tokens run with `solvers.Particles` (batched), of which it keeps
  the statistics: the Fourier or harmonic power E P_l(t) with standard errors, the pair correlation
  g_2(t, ψ), the order parameter's law, and on S^1 the first moments and pair moments of the Fourier
  coefficients that the closure tests need;
* `linear_prediction`, `onset_time`: the linear theory about the uniform state (docs/mathematics.md §18);
* `first_equation`: the interaction term of the first BBGKY equation on S^1 from the measured pair
  moments and from molecular chaos (f_2 = f_1 ⊗ f_1);
* `second_equation`: the three-token term of the second equation from the measured f_3 and from
  Kirkwood's superposition.

This floor runs the solvers (it sits above `solvers` in the floor plan, docs/architecture.md).
"""
from .linear import linear_prediction, onset_time
from .ensemble import Ensemble, ensemble
from .closure import first_equation, second_equation

__all__ = ["ensemble", "Ensemble", "linear_prediction", "onset_time", "first_equation", "second_equation"]
