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


@pytest.mark.parametrize("dim, make", [(3, lambda m, k: solvers.SphericalHarmonics(m, 20, positions=16, threads=k)),
                                       (2, lambda m, k: solvers.FourierCircle(m, 32, positions=16, threads=k))])
def test_layered_runs_do_not_depend_on_threads(dim, make):
    """Layered runs (16 positions): the S^2 maps are shared among the threads in parts, the S^1 rows among
    pocketfft's workers."""
    model = mf.Model(2.0, dim, mask="causal", position_bias=1.0)

    def rho0(x, s):
        return 1 + 0.5 * (x[..., 0] * np.cos(2 * s) + x[..., -1] * np.sin(2 * s))

    one, two = (make(model, k).solve(rho0, [0.0, 0.2]).data[-1] for k in (1, 2))
    assert np.array_equal(one, two)
