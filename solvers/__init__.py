"""The numerical methods: each turns a `meanfield.Model` plus a resolution into a `Solution`.

    FourierCircle        Fourier pseudo-spectral solver on S^1            (solvers.fourier)
    SphericalHarmonics   spherical-harmonic solver on S^2 (pyshtools/ducc0) (solvers.harmonics)
    FiniteElements       dolfinx aggregation-equation solver (fem extra)  (solvers.fem)
    Particles            N-particle solver on S^{d-1}                     (solvers.particles)
    Gegenbauer           zonal densities on S^{d-1}, any d (Gegenbauer)   (solvers.gegenbauer)
    Lagrangian           characteristics with exact densities, S^1, S^2   (solvers.lagrangian)
    Gaussian             the exact Gaussian continuum of (SA) in R^d      (solvers.gaussian)
    Hardmax              the limit β → ∞ (hardmax), exact event to event  (solvers.hardmax)

Imports are lazy so that a missing optional dependency (dolfinx) only affects its own solver.
"""
import functools
import importlib

from meanfield.errors import Interrupted, NonFiniteState, SolverError, UnderResolved, UnsupportedModel
from meanfield.results.solution import register_flow_map

from .base import Solver
from .tracers import flow_map

_LAZY = {
    "FourierCircle": "solvers.fourier",
    "SphericalHarmonics": "solvers.harmonics",
    "FiniteElements": "solvers.fem",
    "Particles": "solvers.particles",
    "Lagrangian": "solvers.lagrangian",
    "Gegenbauer": "solvers.gegenbauer",
    "Gaussian": "solvers.gaussian",
    "Hardmax": "solvers.hardmax",
    "CovarianceBlowUp": "solvers.gaussian",
}

__all__ = ["Solver", "UnderResolved", "UnsupportedModel", "SolverError", "NonFiniteState", "Interrupted",
           *_LAZY]


def __getattr__(name):
    if name in _LAZY:
        try:
            module = importlib.import_module(_LAZY[name])
        except ModuleNotFoundError as exc:
            if exc.name == _LAZY[name]:
                raise AttributeError(f"solvers.{name} is not available yet") from None
            raise
        value = getattr(module, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'solvers' has no attribute {name!r}")


# `Solution.flow` re-runs a Solution on the solver named in it, found through this lazy registry
register_flow_map(functools.partial(flow_map, classes=__getattr__))
