"""The function spaces a state lives on: quadrature rules on S^{d-1}, the geodesics of the sphere and
the coordinates of gridded output (the xarray layout of saved densities).

Floor: on the ground modules only (docs/architecture.md, "The floor plan").
"""
