"""The workflows users come for (docs/experiments.md), each also a subcommand of the ``meanfield`` command.

* `run` — one simulation from a TOML configuration (`meanfield.experiments.config`);
* `verify_prop34` — Proposition 3.4: coefficients, landscape, flows, discrete contrast;
* `mean_field_limit` — particles against the continuum: W1 against N, rates, Wasserstein decay;
* `phase_diagram` — the Figure 3 experiment with the curve Γ of the equiangular ODE (6.9)/(6.10);
* `noise_transition` — the phase transition with noise: stationary branches, dynamics, hysteresis;
* `metastability` — the number of clusters: k*(β), continuum and particles through merging, Figure 4, staircase;
* `lost_in_the_middle` — causal attention: the U-shaped response profile S_τ(s) and its threshold τ_crit(β);
* `landscape` — the critical points of the energy of n tokens (Problem 3): census, thresholds, certification;
* `fluctuations` — n tokens about the mean field (Problem 4): ensembles, linear theory, onset, BBGKY closure;
* `hardmax_limit` — softmax against its hardmax limit (Problem 6): sup-distance, exit times, Frank–Wolfe cells.

Each declares its options once (`meanfield.experiments.options`: a dataclass such as
`PhaseDiagramOptions`), from which come its keyword arguments, its subcommand's flags and the keys a
sweep accepts; `EXPERIMENTS` lists them by subcommand. Each returns a `Report`: ``report.passed``, ``report.results`` (numbers), ``report.checks`` and,
with ``out=DIR``, the files (NetCDF, PNG, ``summary.json``) it wrote there. This layer may import
`solvers`; the model layer never does.
"""
# The functions share their modules' names; importing them here binds the package attributes
# to the functions (use importlib.import_module("meanfield.experiments.<name>") for a module).
# The experiments register in this order, the order of the ``meanfield`` help.
from .report import Report
from .config import RunConfig, load_config, parse_config
from .options import EXPERIMENTS
from .verify_prop34 import VerifyProp34Options, verify_prop34
from .mean_field_limit import MeanFieldLimitOptions, mean_field_limit
from .phase_diagram import PhaseDiagramOptions, phase_diagram
from .noise_transition import NoiseTransitionOptions, noise_transition
from .metastability import MetastabilityOptions, metastability
from .lost_in_the_middle import LostInTheMiddleOptions, lost_in_the_middle
from .landscape import LandscapeOptions, landscape
from .fluctuations import FluctuationsOptions, fluctuations
from .hardmax_limit import HardmaxLimitOptions, hardmax_limit
from .run import run

__all__ = ["run", "verify_prop34", "mean_field_limit", "phase_diagram", "noise_transition", "metastability",
           "lost_in_the_middle", "landscape", "fluctuations", "hardmax_limit", "load_config", "parse_config", "RunConfig",
           "Report", "EXPERIMENTS", "VerifyProp34Options", "MeanFieldLimitOptions", "PhaseDiagramOptions",
           "NoiseTransitionOptions", "MetastabilityOptions", "LostInTheMiddleOptions", "LandscapeOptions",
           "FluctuationsOptions", "HardmaxLimitOptions"]
