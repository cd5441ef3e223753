"""Threads for causal work (docs/threads.md, docs/causal.md): the masked particle sums (the direct triangle
and the blocked spectral ones) and the layered spectral solvers' batches of positions give the same bits on
one thread and on two (every block, tile and map is computed whole on one thread, in the same order)."""
import numpy as np
import pytest

import meanfield as mf
import solvers


def _tokens(n, d, seed=0):
    x = np.random.default_rng(seed).standard_normal((n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.mark.parametrize("d, n, sums", [(2, 3000, "spectral"), (3, 5000, "spectral"), (3, 1500, "direct")])
def test_masked_particle_field_does_not_depend_on_threads(d, n, sums):
    """Several blocks of positions (512 on S^1, 1536 on S^2 at β = 2) and two heads with their own slopes."""
    eye = np.eye(d)
    model = mf.Model(2.0, d, mask="causal", heads=[(eye, eye, eye), (0.5 * eye, eye, eye)], position_bias=[1.0, 3.0])
    x = _tokens(n, d)
    one, two = (solvers.Particles(model, sums=sums, threads=k).velocity(x) for k in (1, 2))
    assert np.array_equal(one, two)


def test_layered_harmonics_do_not_depend_on_threads():
    """A layered S^2 run (lmax 20, 16 positions): its maps are shared among the threads in parts."""
    model = mf.Model(2.0, 3, mask="causal", position_bias=1.0)

    def rho0(x, s):
        return 1 + 0.5 * (x[..., 0] * np.cos(2 * s) + x[..., 2] * np.sin(2 * s))

    one, two = (solvers.SphericalHarmonics(model, 20, positions=16, threads=k).solve(rho0, [0.0, 0.2]).data[-1]
                for k in (1, 2))
    assert np.array_equal(one, two)


def test_layered_fourier_does_not_depend_on_threads():
    model = mf.Model(2.0, 2, mask="causal", position_bias=1.0)

    def rho0(x, s):
        return 1 + 0.5 * (x[..., 0] * np.cos(2 * s) + x[..., 1] * np.sin(2 * s))

    one, two = (solvers.FourierCircle(model, 32, positions=16, threads=k).solve(rho0, [0.0, 0.2]).data[-1]
                for k in (1, 2))
    assert np.array_equal(one, two)
