"""How a `Solution` stores the state at one time, and what can be computed from it.

A representation is a function space with its normalisation attached (like pyshtools' SHCoeffs):
it evaluates the density, integrates it, computes E_β, discretises it as a weighted measure, and
writes/reads itself to/from an xarray Dataset. Solutions never guess a normalisation.

Registered kinds (the ``representation`` attribute of a saved file):
    "fourier"      `FourierSeries`       trigonometric polynomial on S^1 (σ-relative coefficients)
    "harmonics"    `SphericalHarmonicSeries` real SH on S^2, orthonormal in L²(σ) (pyshtools '4pi')
    "p1"           `P1Field`             continuous piecewise-linear nodal field on a surface mesh
    "particles"    `ParticleCloud`       weighted particles (positions, weights)
    "sampled-particles" `SampledParticleCloud` particles with positions kept at some saved times only
    "layered"      `LayeredDensity`      densities at the nodes of a rule in the token position (causal runs)
    "layered-lagrangian" `LayeredNodes`  labels in (σ, x): moving nodes at each position node (causal runs)
    "segments"     `Segments`            consecutive segments of one run in different representations
                                         (a spectral run handed over to the characteristics)
"""
from ..errors import NoCellMeans
from .base import Representation, State, from_dataset, register

__all__ = ["NoCellMeans", "Representation", "State", "from_dataset", "register"]
