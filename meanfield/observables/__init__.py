"""What is measured on a state: the interaction energy, Wasserstein distances (exact, to a Dirac, to
the uniform law, and the W1 bracket) and the cluster diagnostics.

Floor: above the transformer, the spaces and the sums; below the representations, which report
these quantities for their states (docs/architecture.md, "The floor plan").
"""
