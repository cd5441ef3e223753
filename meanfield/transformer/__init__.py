"""The transformer as a dynamical system: `Model` (beta, dimension, value matrix, normalization,
feed-forward, depth schedule), its interaction kernels and their spectra, attention masks and token
positions, and the causal (masked) continuum. Nothing here knows a discretisation.

Floor: above the ground modules (errors, validation); below the sums, the observables and all that
follows (docs/architecture.md, "The floor plan").
"""
