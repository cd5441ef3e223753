"""The one kernel-sum engine: the sums Σ_j w_j K(x_i, x_j) of a point cloud (kernelsums, with the
compiled loops of compiled/_fused) and of a spectrum (spectralsums); L2 and Sinkhorn attention on top of
them (sinkhorn).

Floor: above the transformer (it reads the kernels); below the observables (docs/architecture.md,
"The floor plan").
"""
