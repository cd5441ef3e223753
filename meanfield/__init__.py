"""meanfield: self-attention dynamics as a mean-field PDE on the sphere.

The model layer: parameters, kernels, energies, densities, measures, Wasserstein distances and
the `Solution` type. It imports no solver; the numerical methods live in the `solvers` package.
"""
from .version import __version__
from . import causal, densities, quadrature
from .errors import Interrupted, InvalidInput, NonFiniteState, SolverError, UnderResolved, UnsupportedModel
from .energy import dirac_energy, energy_from_spectrum, interaction_energy, uniform_energy
from .kernels import fastest_mode, kernel_multipliers, linear_growth_rates, velocity_multipliers
from .model import Model
from .schedule import Schedule
from .densities import from_file, from_pyshtools
from .quadrature import sphere_quadrature
from .sampling import sample, sample_tokens
from .solution import Solution, load
from .spectralsums import kernel_distance
from .wasserstein import w1_to_dirac, w1_to_uniform, wasserstein
from .w1bracket import W1Bracket, w1_bracket
from .threads import default_threads, use_threads

__all__ = [
    "Model", "Schedule", "kernel_multipliers", "velocity_multipliers", "linear_growth_rates", "fastest_mode", "interaction_energy",
    "energy_from_spectrum", "uniform_energy", "dirac_energy", "causal", "densities", "sample", "sample_tokens", "sphere_quadrature", "quadrature",
    "wasserstein", "kernel_distance", "from_pyshtools", "from_file", "w1_to_dirac", "w1_to_uniform", "w1_bracket", "W1Bracket", "Solution", "load", "default_threads", "use_threads", "UnsupportedModel", "InvalidInput", "SolverError",
    "UnderResolved", "NonFiniteState", "Interrupted", "__version__",
]
