"""meanfield: self-attention dynamics as a mean-field PDE on the sphere.

The model layer: parameters, kernels, energies, densities, measures, Wasserstein distances and
the `Solution` type. It imports no solver; the numerical methods live in the `solvers` package.
The modules are grouped into floors (transformer, spaces, sums, observables, representations,
measures, results; docs/architecture.md); their old flat names (``meanfield.transformer.kernels``) stay valid.
"""
from . import _aliases
from .version import __version__
from .transformer import causal
from .measures import densities
from .spaces import quadrature
from .errors import Interrupted, InvalidInput, NonFiniteState, SolverError, UnderResolved, UnsupportedModel
from .observables.energy import dirac_energy, energy_from_spectrum, interaction_energy, uniform_energy
from .transformer.kernels import fastest_mode, kernel_multipliers, linear_growth_rates, velocity_multipliers
from .transformer.model import Model
from .transformer.schedule import Schedule
from .measures.densities import from_file, from_pyshtools
from .spaces.quadrature import sphere_quadrature
from .measures.sampling import sample, sample_tokens
from .results.solution import Solution, load
from .sums.spectralsums import kernel_distance
from .observables.wasserstein import w1_to_dirac, w1_to_uniform, wasserstein
from .observables.w1bracket import W1Bracket, w1_bracket
from .threads import default_threads, use_threads

__all__ = [
    "Model", "Schedule", "kernel_multipliers", "velocity_multipliers", "linear_growth_rates", "fastest_mode", "interaction_energy",
    "energy_from_spectrum", "uniform_energy", "dirac_energy", "causal", "densities", "sample", "sample_tokens", "sphere_quadrature", "quadrature",
    "wasserstein", "kernel_distance", "from_pyshtools", "from_file", "w1_to_dirac", "w1_to_uniform", "w1_bracket", "W1Bracket", "Solution", "load", "default_threads", "use_threads", "UnsupportedModel", "InvalidInput", "SolverError",
    "UnderResolved", "NonFiniteState", "Interrupted", "__version__",
]

_aliases.install()


def __getattr__(name):
    """``mf.kernels``, ``mf.solution``, ...: the modules under their names from before the floor plan."""
    return _aliases.attribute(name)
