"""Pictures of clustered states: clusters narrower than a pixel are drawn (the pictures draw cell means
of the measure, mass per cell), the same state gives the same picture, and the colour bar of ρ − 1
stays within [−1, max]."""
import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.collections import QuadMesh  # noqa: E402
from scipy import ndimage  # noqa: E402

import meanfield as mf  # noqa: E402
from meanfield.results import plotting  # noqa: E402
from meanfield.representations.base import State  # noqa: E402
from meanfield.representations.lagrangian import LagrangianNodes  # noqa: E402
from meanfield.representations.particles import ParticleCloud  # noqa: E402

WIDTH = 1e-6                      # radians: far below a pixel (2π/1024 on S^1, π/90 on S^2)
MASSES = np.array([0.5, 0.3, 0.2])


def _centres(dim):
    if dim == 2:
        a = np.array([0.4, 2.5, 4.6])
        return np.stack([np.cos(a), np.sin(a)], -1)
    return np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [-0.5, -0.5, -np.sqrt(0.5)]])


def _labels(dim, n):
    if dim == 2:
        a = 2 * np.pi * (np.arange(n) + 0.5) / n
        return np.stack([np.cos(a), np.sin(a)], -1)
    k = np.arange(n) + 0.5
    z, phi = 1 - 2 * k / n, np.pi * (1 + 5 ** 0.5) * k
    r = np.sqrt(1 - z ** 2)
    return np.stack([r * np.cos(phi), r * np.sin(phi), z], -1)


def _contract(y, centres, width):
    """Each label moved to within ``width`` of its nearest centre, the offsets scaled by one factor s per
    cluster: (positions, the cluster of each label, s)."""
    k = np.argmax(y @ centres.T, axis=1)
    c = centres[k]
    off = y - np.sum(y * c, -1, keepdims=True) * c
    s = width / np.max(np.linalg.norm(off, axis=1))
    x = c + s * off
    return x / np.linalg.norm(x, axis=1, keepdims=True), k, s


def lagrangian_solution(dim, n=600, width=WIDTH):
    """Lagrangian labels of σ (uniform, weights 1/n) whose flow map has squeezed each third into a
    cluster of ``width`` radians: ℓ = (d − 1)·log s (the σ-measure of a label's cell shrinks by s^{d−1})."""
    y = _labels(dim, n)
    x, _, s = _contract(y, _centres(dim), width)
    ell = np.full(n, (dim - 1) * np.log(s))
    rep = LagrangianNodes(y, np.full(n, 1.0 / n), np.ones(n))
    data = np.stack([np.concatenate([y, np.zeros((n, 1))], 1), np.concatenate([x, ell[:, None]], 1)])
    return mf.Solution([0.0, 10.0], mf.Model(beta=5.0, dim=dim), rep, data)


def particle_solution(dim, n=300, width=WIDTH, seed=0):
    """Particles: weights MASSES over three clusters of ``width`` radians."""
    rng = np.random.default_rng(seed)
    centres = _centres(dim)
    k = np.repeat(np.arange(3), n // 3)
    x = centres[k] + width * rng.standard_normal((k.size, dim)) / 3
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    w = MASSES[k] / (n // 3)
    y = _labels(dim, k.size)
    return mf.Solution([0.0, 10.0], mf.Model(beta=5.0, dim=dim), ParticleCloud(w, dim), np.stack([y, x]))


def _image(fig, index=0):
    meshes = [c for ax in fig.axes for c in ax.collections if isinstance(c, QuadMesh)]
    return meshes[index]


def _circle_peaks(row):
    """The connected runs (circularly) of cells above 1/100 of the row's maximum."""
    hot = row > 0.01 * row.max()
    labels, count = ndimage.label(hot)
    if count > 1 and hot[0] and hot[-1]:
        count -= 1
    return count


def _sphere_peaks(image):
    """The connected regions of cells above the floor of the log scale (the empty cells), the cells
    of the longitude seam joined and each polar band one region (a pole is one point)."""
    hot = image > image.min()
    labels, count = ndimage.label(hot, structure=np.ones((3, 3)))
    groups = [{a, b} for a, b in zip(labels[:, 0], labels[:, -1]) if a and b]
    groups += [set(labels[row][labels[row] > 0]) for row in (0, -1) if hot[row].any()]
    merged = []
    for g in groups:
        joined = [m for m in merged if m & g]
        merged = [m for m in merged if not m & g] + [g.union(*joined)]
    return count - sum(len(m) - 1 for m in merged)


@pytest.mark.parametrize("make", [lagrangian_solution, particle_solution], ids=["lagrangian", "particles"])
def test_three_clusters_narrower_than_a_pixel_on_the_circle(make):
    sol = make(2)
    fig = plotting.pyplot().figure()
    plotting.space_time_panel(fig.add_subplot(), sol, scale="perturbation")
    mesh = _image(fig)
    drawn = np.asarray(mesh.get_array()).reshape(2, -1)
    assert drawn.shape[1] == 1024
    assert _circle_peaks(drawn[-1] + 1.0) == 3
    # the cells drawn hold the clusters' masses: Σ ρ̄ σ(cell) over each peak is its mass
    rho = drawn[-1] + 1.0
    masses = np.sort([rho[np.abs(np.mod(np.arange(1024) * 2 * np.pi / 1024 - a + np.pi, 2 * np.pi) - np.pi) < 0.05]
                      .sum() / 1024 for a in (0.4, 2.5, 4.6)])
    expected = np.sort(MASSES) if make is particle_solution else np.full(3, 1 / 3)
    np.testing.assert_allclose(masses, expected, atol=2e-3)
    # the colour bar of ρ − 1 runs from −1 (an empty cell) to the largest cell mean − 1, not below
    assert mesh.norm.vmin == -1.0
    assert mesh.norm.vmax == pytest.approx(rho.max() - 1.0)
    assert mesh.norm(0.0) == pytest.approx(0.5)
    plotting.pyplot().close(fig)


@pytest.mark.parametrize("make", [lagrangian_solution, particle_solution], ids=["lagrangian", "particles"])
def test_three_clusters_narrower_than_a_pixel_on_the_sphere(make):
    sol = make(3)
    fig = plotting.pyplot().figure()
    gs = fig.add_gridspec(2, 1, height_ratios=[1, 0.1])
    plotting.sphere_maps(fig, [gs[0, 0]], gs[1, 0], sol, [1], scale="log")
    image = np.asarray(_image(fig).get_array()).reshape(90, 180)
    assert _sphere_peaks(image) == 3
    plotting.pyplot().close(fig)


@pytest.mark.parametrize("make", [lagrangian_solution, particle_solution], ids=["lagrangian", "particles"])
@pytest.mark.parametrize("dim", [2, 3])
def test_to_grid_of_a_clustered_state_is_the_same_at_every_call(make, dim):
    sol = make(dim)
    state = State(sol.representation, sol.data[1])
    first = state.to_grid(512 if dim == 2 else 32, kind="means").values
    for _ in range(2):
        np.testing.assert_array_equal(state.to_grid(512 if dim == 2 else 32, kind="means").values, first)


@pytest.mark.parametrize("shift", np.linspace(0.0, 2 * np.pi / 512, 7)[1:-1])
def test_lagrangian_cell_means_keep_a_narrow_cluster_in_its_cell(shift):
    """Labels within 1.5e-8 rad of three centres moved together by ``shift``: each cluster's whole mass
    (its labels' weights) is in the one cell holding its centre, at every shift (no spread into the gaps)."""
    sol = lagrangian_solution(2, n=512, width=1.5e-8)
    x = sol.data[1][:, :2]
    rot = np.array([[np.cos(shift), -np.sin(shift)], [np.sin(shift), np.cos(shift)]])
    data = np.concatenate([x @ rot.T, sol.data[1][:, 2:]], 1)
    rho = State(sol.representation, data).to_grid(512, kind="means").values
    cells = np.floor(np.mod(np.array([0.4, 2.5, 4.6]) + shift, 2 * np.pi) * 512 / (2 * np.pi)).astype(int)
    masses = np.bincount(_contract(_labels(2, 512), _centres(2), 1.5e-8)[1]) / 512
    np.testing.assert_allclose(rho[cells] / 512, masses, rtol=0, atol=1e-12)
    np.testing.assert_allclose(rho.sum() / 512, 1.0, rtol=0, atol=1e-13)


def _mass_labels(fig):
    return [t.get_text() for ax in fig.axes for t in ax.texts]


@pytest.mark.parametrize("make", [lagrangian_solution, particle_solution], ids=["lagrangian", "particles"])
@pytest.mark.parametrize("dim", [2, 3])
def test_clusters_narrower_than_a_pixel_are_marked_with_their_mass(make, dim):
    """The picture of three clusters of width 1e-6 labels each with its mass (heaviest first): the masses
    labelled are the clusters' to 1e-9 and sum to the clustered mass, here all of it."""
    sol = make(dim)
    if make is particle_solution:
        expected = MASSES
    else:
        expected = np.sort(np.bincount(_contract(_labels(dim, 600), _centres(dim), WIDTH)[1]) / 600)[::-1]
    masses, centres = plotting.cluster_marks(sol, 1)
    np.testing.assert_allclose(masses, expected, rtol=0, atol=1e-9)
    clustered = mf.diagnostics.find_clusters(sol.measure(1)).clustered_mass
    assert abs(masses.sum() - clustered) <= 1e-9 and abs(clustered - 1.0) <= 1e-9
    k = np.argmax(centres @ _centres(dim).T, axis=1)
    assert sorted(k) == [0, 1, 2]
    assert np.max(np.abs(centres - _centres(dim)[k])) <= 1e-5
    fig = plotting.plot_solution(sol)
    assert _mass_labels(fig) == [f"{m:.3g}" for m in masses]
    plotting.pyplot().close(fig)


def test_many_or_no_clusters_are_not_labelled():
    """13 clusters are more than a picture labels legibly (MAX_MARKED = 12); a uniform cloud has none."""
    a = np.repeat(2 * np.pi * np.arange(13) / 13, 2) + np.tile([0.0, 1e-6], 13)     # two particles a cluster
    x = np.stack([np.cos(a), np.sin(a)], -1)
    many = mf.Solution([0.0, 1.0], mf.Model(beta=5.0, dim=2), ParticleCloud(np.full(26, 1 / 26), 2), np.stack([x, x]))
    assert mf.diagnostics.find_clusters((x, np.full(26, 1 / 26))).count == 13
    assert plotting.cluster_marks(many, 1)[0].size == 0
    fig = plotting.plot_solution(many)
    assert _mass_labels(fig) == []
    plotting.pyplot().close(fig)
    sphere = particle_solution(3)
    assert plotting.cluster_marks(sphere, 0)[0].size == 0        # t = 0: Fibonacci points, not clustered


@pytest.mark.parametrize("beta", [-0.75, 4.0])
def test_energy_reference_lines_are_named_for_the_sign_of_beta(beta):
    """β < 0: the uniform state is a saddle, the minimum cosh β/2β is a balanced antipodal pair; β > 0:
    the uniform state is the minimum a_0/2β (its value from the closed form on S^1, a_0 = I_0(β))."""
    x = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0]])
    sol = mf.Solution([0.0, 1.0], mf.Model(beta=beta, dim=2), ParticleCloud(np.full(3, 1 / 3), 2), np.stack([x, x]))
    fig = plotting.pyplot().figure()
    ax = plotting.plot_energy(sol, fig.add_subplot())
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    uniform = float(np.i0(beta) / (2 * beta))
    if beta < 0:
        assert any(f"uniform state (a saddle) $a_0/2\\beta$ = {uniform:.6g}" in s for s in labels)
        assert any(f"antipodal minimum $\\cosh\\beta/2\\beta$ = {np.cosh(beta) / (2 * beta):.6g}" in s for s in labels)
        assert not any("uniform minimum" in s for s in labels)
    else:
        assert any(f"uniform minimum $a_0/2\\beta$ = {uniform:.6g}" in s for s in labels)
        assert not any("antipodal" in s for s in labels)
    assert any(f"Dirac maximum $e^\\beta/2\\beta$ = {np.exp(beta) / (2 * beta):.6g}" in s for s in labels)
    plotting.pyplot().close(fig)


def test_the_legend_of_particles_on_the_sphere_is_off_the_sphere():
    """The legend of the S^2 particle picture lies inside the figure, off the 3-D box and its labels."""
    sol = particle_solution(3)
    fig = plotting.plot_solution(sol, show_energy=False)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    ax = next(a for a in fig.axes if a.name == "3d")
    (leg,) = fig.legends
    drawn = ax.get_tightbbox(renderer)                  # the sphere, its ticks and axis labels
    box, page = leg.get_window_extent(renderer), fig.bbox
    assert page.x0 <= box.x0 and box.x1 <= page.x1 and page.y0 <= box.y0 and box.y1 <= page.y1
    assert box.y1 <= drawn.y0 and box.y1 <= ax.get_window_extent(renderer).y0
    plotting.pyplot().close(fig)


def test_the_circle_picture_shows_three_clusters_at_every_time_after_they_form():
    """β = 5 from a perturbation of degree 3 to t = 40: spectral, then along the characteristics after the
    hand-over; every saved row from t = 6 on draws three separated clusters of equal mass (their cells'
    Σ ρ̄ σ(cell); the start is symmetric under rotations by 2π/3), each 1/3 at t = 40."""
    import solvers

    sol = solvers.FourierCircle(mf.Model(beta=5.0, dim=2), modes=128, w1=False).solve(
        mf.densities.perturbed_uniform(0.05, 3), np.linspace(0.0, 40.0, 41), progress=False,
        on_underresolved="lagrangian")
    assert sol.solver == "FourierCircle+Lagrangian"
    fig = plotting.plot_solution(sol)
    rho = np.asarray(_image(fig).get_array()).reshape(sol.t.size, -1) + 1.0
    late = sol.t >= 6.0
    assert [_circle_peaks(row) for row in rho[late]] == [3] * int(late.sum())
    for row in rho[late]:
        labels, _ = ndimage.label(row > 0.01 * row.max())
        masses = ndimage.sum(row, labels, np.unique(labels[labels > 0])) / row.size
        if masses.size == 4:                      # a cluster across θ = 0 is counted in two runs
            masses = np.sort(np.r_[masses[0] + masses[-1], masses[1:-1]])
        np.testing.assert_allclose(masses, masses.mean(), atol=2e-3)      # the start is 2π/3-symmetric
    np.testing.assert_allclose(masses, 1 / 3, atol=1e-3)                  # at t = 40 all mass is clustered
    plotting.pyplot().close(fig)


def test_figure5_says_that_gamma_belongs_to_the_identity_parameters():
    from meanfield.experiments.phase_diagram import gamma_label, parameters_label

    assert "identity parameters" not in gamma_label(parameters_label("identity", "identity"))
    assert "Q = K = V = I" in gamma_label(parameters_label("gaussian", "wishart"))
