"""Initial densities on S^{d-1}, relative to σ (the uniform probability measure; docs/mathematics.md §2).

Each is a callable ``f(x) -> array`` on points ``x`` of shape (..., d); any user callable with the
same signature works too. Every density here integrates to exactly 1 against σ. This module offers
them all (``mf.densities``): the laws (`meanfield.measures.laws`: uniform, von Mises–Fisher,
mixtures, perturbations, zonal laws), the densities given by data (`meanfield.measures.tabulated`:
grids, coefficients, saved states) and those read from files (`meanfield.measures.files`).
"""
from ..spaces.harmonics import real_sh   # re-exported: mf.densities.real_sh
from .laws import (BandLimited, Density, Mixture, PerturbedUniform, SeededPerturbation, Uniform, VonMisesFisher, Zonal,
                   band_limited, mixture, perturbed_uniform, seeded_perturbation, uniform, von_mises_fisher, zonal,
                   zonal_profile)
from .tabulated import (CellMeans, FourierModes, GridValues, HarmonicSeries, LayeredStateDensity, StateDensity,
                        fourier_modes, on_grid, spherical_harmonics)
from .files import density_from_grid, from_file, from_pyshtools, grid_from_file, read_density_file, saved_state

__all__ = ["real_sh", "BandLimited", "Density", "Mixture", "PerturbedUniform", "SeededPerturbation", "Uniform",
           "VonMisesFisher", "Zonal", "band_limited", "mixture", "perturbed_uniform", "seeded_perturbation", "uniform",
           "von_mises_fisher", "zonal", "zonal_profile", "CellMeans", "FourierModes", "GridValues", "HarmonicSeries",
           "LayeredStateDensity", "StateDensity", "density_from_grid", "fourier_modes", "from_file", "from_pyshtools",
           "grid_from_file", "on_grid", "read_density_file", "saved_state", "spherical_harmonics"]
