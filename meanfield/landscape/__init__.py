"""The energy landscape of n tokens (Problem 3 of the paper; docs/landscape.md, docs/mathematics.md §17)."""
from .energy import Energy, ring_adjacency
from .critical import CriticalPoint
from .census import critical_points

__all__ = ["Energy", "ring_adjacency", "CriticalPoint", "critical_points"]
from .branches import (Branch, first_spurious_maximum, follow, polygon_eigenvalues, polygon_threshold,
                       polygon_top_eigenvalue, stability_threshold)

__all__ += ["Branch", "first_spurious_maximum", "follow", "polygon_eigenvalues", "polygon_threshold",
            "polygon_top_eigenvalue", "stability_threshold"]
