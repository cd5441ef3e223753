"""The resolution rule of the solvers, and the spectral bases they use.

The bases themselves live on the floor of the function spaces, one per space, held by the
representations and the solvers alike (docs/architecture.md, "Spectral bases"):
`meanfield.spaces.fourier.FourierBasis` (S^1), `meanfield.spaces.harmonics.SphericalHarmonicBasis` (S^2)
and `meanfield.spaces.gegenbauer.GegenbauerBasis` (zonal functions on S^{d−1}); they are re-exported here.

`ResolutionPolicy` is the one rule for an automatic resolution (``modes="auto"`` / ``lmax="auto"``):
where it starts, how it grows on refinement, and the checks of a fixed resolution. Each solver states
its numbers as ``Solver.policy`` (with its memory estimate, `ResolutionPolicy.with_memory`).

How a solver uses a basis: build it in ``_setup(resolution)``; synthesise the fields it needs on
``basis.points`` (``synthesis``, ``gradient``), form the nonlinear products there, come back with
``analysis`` (or ``divergence`` on S^2); on refinement, ``basis.pad(state, finer_basis)``.
"""
from dataclasses import dataclass, replace
from typing import Callable, Optional

import numpy as np

from meanfield.errors import InvalidInput
from meanfield.spaces.fourier import FourierBasis, fourier_grid_size, midpoint_coefficients
from meanfield.spaces.gegenbauer import GegenbauerBasis, node_count
from meanfield.spaces.harmonics import SphericalHarmonicBasis, harmonic_grid_shape
from meanfield.transformer.kernels import minimum_degree
from meanfield.validation import check_int, check_memory
from .spectral import check_kernel_resolution


# -- resolution policy --------------------------------------------------------------------------------
@dataclass(frozen=True)
class ResolutionPolicy:
    """The resolution of a spectral solver: a fixed integer, or "auto" (start coarse, refine).

    The refined quantity is the bandwidth n = resolution + ``offset`` (the number of Fourier modes
    K, or of degrees L + 1 with ``offset`` = 1 on S^2). Refinement doubles it, up to the cap:
    ``refine(r, cap) = min(2(r + offset) − offset, cap)``. The automatic start is the smallest
    resolution that resolves the kernel (`meanfield.transformer.kernels.minimum_degree`: a_l(β)/a_0(β) < 1e-14
    beyond it), at least ``auto_start``; with ``round_start`` its bandwidth is rounded up to a power
    of two, so that the refinements stay on powers of two. Without it (spherical harmonics, whose
    transforms cost O(L³)) the start is the kernel's minimum itself.

    Every solver states its resolution this way (``Solver.policy``), so that a configuration reads
    it: a solver without "auto" gives only ``name`` and ``low`` (e.g. ``ResolutionPolicy("nodes", low=1)``).

    Parameters
    ----------
    name, cap_name : the solver's argument names ("modes"/"max_modes", "lmax"/"max_lmax"); ``cap_name``
        None: no "auto".
    low, high : the accepted range of a resolution (``high`` None: no upper bound).
    auto_start : the smallest automatic start; auto_cap : the default cap of "auto".
    offset : bandwidth − resolution (0 or 1).
    round_start : round the automatic start up to a power-of-two bandwidth.
    memory : estimated working memory in bytes of a run at a resolution (None: not checked).
    """

    name: str
    cap_name: Optional[str] = None
    low: int = 1
    auto_start: Optional[int] = None
    auto_cap: Optional[int] = None
    high: Optional[int] = None
    offset: int = 0
    round_start: bool = True
    memory: Optional[Callable[[int], float]] = None

    @property
    def automatic(self):
        """Whether the resolution may be "auto"."""
        return self.cap_name is not None

    def check(self, value):
        """An integer in [low, high], or "auto" where the policy has a cap (ValueError naming ``name``)."""
        if isinstance(value, str) and self.automatic:
            if value != "auto":
                raise InvalidInput(f"`{self.name}` must be an integer >= {self.low} or 'auto', got {value!r}.")
            return value
        return check_int(value, self.name, low=self.low, high=self.high)

    def fixed(self, value, beta, dim):
        """Check a fixed resolution: an integer in [low, high], within the machine's memory, and
        resolving the kernel e^{β⟨x,y⟩} (ValueError naming the argument otherwise)."""
        r = check_int(value, self.name, low=self.low)
        if self.memory is not None:
            check_memory(self.memory(r), self.name, r)
        if self.high is not None:
            r = check_int(r, self.name, high=self.high)
        check_kernel_resolution(beta, dim, r, self.name)
        return r

    def start(self, beta, dim):
        """The first resolution of "auto" for the kernel e^{β⟨x,y⟩} on S^{dim−1}."""
        need = minimum_degree(beta, dim)
        if self.round_start:
            bandwidth = 1 << int(np.ceil(np.log2(max(need + self.offset, 2))))
            need = bandwidth - self.offset
        return max(self.auto_start, need)

    def choose(self, value, cap, beta, dim):
        """(resolution, cap, automatic) for the solver's arguments ``value`` (an integer or "auto")
        and ``cap`` (used with "auto"; a fixed resolution is its own cap, but a cap given with it must
        still be an integer >= low: a misspelt cap is refused, not ignored)."""
        if not isinstance(value, str):
            r = self.fixed(value, beta, dim)
            if cap is not None and self.cap_name is not None:
                check_int(cap, self.cap_name, low=self.low)
            return r, r, False
        if value != "auto":
            raise InvalidInput(f"`{self.name}` must be an integer >= {self.low} or 'auto', got {value!r}.")
        cap = check_int(cap, self.cap_name, low=self.low, high=self.high)
        r = self.start(beta, dim)
        if r > cap:
            raise InvalidInput(f"`{self.cap_name}`={cap} is below the resolution {self.name}={r} needed to resolve "
                             f"the kernel at beta={beta:g}.")
        return r, cap, True

    def refine(self, resolution, cap):
        """The next resolution: the bandwidth doubled, at most ``cap``."""
        return min(2 * (int(resolution) + self.offset) - self.offset, int(cap))

    def with_memory(self, memory):
        """The same policy with a solver's estimate ``memory(resolution)`` of its working memory in bytes."""
        return replace(self, memory=memory)


__all__ = ["ResolutionPolicy", "FourierBasis", "SphericalHarmonicBasis", "GegenbauerBasis", "fourier_grid_size",
           "harmonic_grid_shape", "midpoint_coefficients", "node_count"]
