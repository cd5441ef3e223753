"""The workflows users come for (docs/experiments.md), each also a subcommand of the ``meanfield`` command.

* `run` — one simulation from a TOML configuration (`meanfield.experiments.config`);
* `verify_prop34` — Proposition 3.4: coefficients, landscape, flows, discrete contrast;
* `mean_field_limit` — particles against the continuum: W1 against N, rates, Wasserstein decay;
* `phase_diagram` — the Figure 3 experiment with the curve Γ of the equiangular ODE (6.9)/(6.10);
* `noise_transition` — the phase transition with noise: stationary branches, dynamics, hysteresis;
* `metastability` — the number of clusters: k*(β), continuum and particles through merging, Figure 4, staircase.

Each returns a `Report`: ``report.passed``, ``report.results`` (numbers), ``report.checks`` and,
with ``out=DIR``, the files (NetCDF, PNG, ``summary.json``) it wrote there. This layer may import
`solvers`; the model layer never does.
"""
# The functions share their modules' names; importing them here binds the package attributes
# to the functions (use importlib.import_module("meanfield.experiments.<name>") for a module).
from .report import Report
from .config import RunConfig, load_config, parse_config
from .mean_field_limit import mean_field_limit
from .metastability import metastability
from .noise_transition import noise_transition
from .phase_diagram import phase_diagram
from .run import run
from .verify_prop34 import verify_prop34

__all__ = ["run", "verify_prop34", "mean_field_limit", "phase_diagram", "noise_transition", "metastability",
           "load_config", "parse_config", "RunConfig", "Report"]
