"""Representation base class and the registry used by `meanfield.load`."""
import importlib

_REGISTRY = {
    "fourier": "meanfield.representations.fourier:FourierSeries",
    "harmonics": "meanfield.representations.harmonics:SphericalHarmonicSeries",
    "p1": "meanfield.representations.p1:P1Field",
    "particles": "meanfield.representations.particles:ParticleCloud",
}


def register(name, target):
    """Register a representation class (``"module:Class"`` or the class itself) under ``name``."""
    _REGISTRY[name] = target


def _lookup(name):
    target = _REGISTRY.get(name)
    if target is None:
        raise ValueError(f"unknown representation {name!r}; known: {sorted(_REGISTRY)}")
    if isinstance(target, str):
        mod, cls = target.split(":")
        target = getattr(importlib.import_module(mod), cls)
    return target


def from_dataset(ds):
    """Rebuild (representation, data) from a Dataset written by `Representation.to_dataset`."""
    cls = _lookup(ds.attrs["representation"])
    return cls.from_dataset(ds)


class Representation:
    """Contract for a state representation (one time slice is ``data``; a run stacks them on axis 0).

    Subclasses set ``name`` (the registry key) and ``dim`` and implement:

    1. ``evaluate(data, x)``: density values at points x of shape (..., d).
    2. ``mass(data)``: ∫ρ dσ (or the total weight).
    3. ``energy(beta, data)``: E_β (3.5), with the β = 0 convention of SPEC L5.
    4. ``measure(data, n=None)``: a weighted discrete measure (points, weights) approximating ρσ.
    5. ``to_dataset(data_all)`` -> dict of data variables {name: (dims, array)} (the time axis is
       called "time"), coords and attrs; ``from_dataset(ds)`` (classmethod) inverts it exactly.
    6. ``plot_state(ax, data_all, t)``: the natural picture of the whole run (optional).
    """

    name = None
    dim = None
    is_density = True

    def evaluate(self, data, x):
        raise NotImplementedError

    def mass(self, data):
        raise NotImplementedError

    def energy(self, beta, data):
        raise NotImplementedError

    def measure(self, data, n=None):
        raise NotImplementedError

    def to_dataset(self, data_all):
        raise NotImplementedError

    @classmethod
    def from_dataset(cls, ds):
        raise NotImplementedError

    def plot_state(self, fig, data_all, t, times=None):
        raise NotImplementedError(f"no picture for representation {self.name!r}")
