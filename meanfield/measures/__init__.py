"""The initial laws and how to draw from them: densities (uniform, von Mises–Fisher, mixtures,
harmonics, read from files) and samplers of points and tokens.

Floor: above the representations (a density read from a file is a representation's state); below
the results (docs/architecture.md, "The floor plan").
"""
