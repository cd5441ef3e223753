"""The function spaces a state lives on: quadrature rules on S^{d-1}, the spectral bases (one per space:
`fourier.FourierBasis` on S^1, `harmonics.SphericalHarmonicBasis` on S^2, `gegenbauer.GegenbauerBasis` for
zonal functions on S^{d-1}, held by the representations and the solvers alike), the geodesics of the
sphere and the coordinates of gridded output (the xarray layout of saved densities).

Floor: on the ground modules only (docs/architecture.md, "The floor plan").
"""
