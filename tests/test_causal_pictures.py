"""The pictures of issue 48, item 7, checked on the figure objects: the S^1 particle legend off the θ axis at
the markers' own sizes, titles that fit the figure, the S^2 position map in the principal plane of the
density, movies of layered (causal) runs over σ, and the cluster masses of the S^2 particle picture legible."""
import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402

import meanfield as mf  # noqa: E402
import solvers  # noqa: E402
from meanfield.results import movies, plotting  # noqa: E402
from meanfield.representations.layered import principal_plane  # noqa: E402
from test_cluster_pictures import particle_solution  # noqa: E402


def close(fig):
    plotting.pyplot().close(fig)


def inside(box, page):
    return page.x0 <= box.x0 and box.x1 <= page.x1 and page.y0 <= box.y0 and box.y1 <= page.y1


def test_circle_particle_legend_sits_off_the_axis_at_the_markers_sizes():
    """The legend of the S^1 particle panel lies below the panel (nothing of it over the θ axis, where a
    large triangle read as a cluster at θ ≈ 4.2), inside the figure; the cluster triangle is drawn at the
    size it has on the panel, and only the particles' dots (1.5 pt) are enlarged."""
    sol = particle_solution(2)
    fig = plotting.plot_solution(sol)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    ax = next(a for a in fig.axes if a.get_title().startswith("particles on $S^1$"))
    leg = ax.get_legend()
    box, panel = leg.get_window_extent(renderer), ax.get_window_extent(renderer)
    assert box.y1 <= panel.y0 and inside(box, fig.bbox)
    sizes = {h.get_marker(): h.get_markersize() for h in leg.legend_handles if hasattr(h, "get_marker")}
    drawn = {line.get_marker(): line.get_markersize() for line in ax.get_lines()}
    assert sizes["v"] == drawn["v"] == 7 and sizes["."] == 6
    close(fig)


def test_long_titles_are_wrapped_inside_the_figure():
    """A title longer than the figure is wrapped at the words and fits (it was clipped at both ends)."""
    plt = plotting.pyplot()
    with plotting.style():
        fig = plt.figure(figsize=(plotting.WIDTH, 4), layout="constrained")
        head = "LayeredSphericalHarmonics+LayeredLagrangian: " + ", ".join(f"item {k} = {k ** 2}" for k in range(30))
        title = plotting.suptitle(fig, head + "\nt from 0 to 10, 11 saved times")
        fig.canvas.draw()
        assert inside(title.get_window_extent(fig.canvas.get_renderer()), fig.bbox)
        assert title.get_text().count("\n") >= 2 and title.get_text().replace("\n", " ").startswith(head[:60])
    close(fig)


def turning(x, s):
    """A bump in the plane x_3 = 0 whose direction turns with the position s (mass 1 at every s)."""
    return 1 + 0.8 * (x[..., 0] * np.cos(3 * s) + x[..., 1] * np.sin(3 * s))


def layered_sphere():
    model = mf.Model(1.0, 3, mask="causal", position_bias=1.0)
    return solvers.SphericalHarmonics(model, 13, positions=8).solve(turning, [0.0, 0.1])


def test_the_sphere_position_map_lies_in_the_principal_plane():
    """The map over (α, σ) on S^2 follows the great circle of the plane of the two leading principal
    directions of the joint measure: for a bump turning in x_3 = 0 that is the plane of e_1, e_2, and at
    every σ the map reaches the density's maximum over the sphere (the great circle x_2 = 0 used before
    missed it by a factor up to 1.8/1.0 where the bump points along e_2). The picture says which plane."""
    sol = layered_sphere()
    e1, e2 = principal_plane(sol.measure(-1))
    assert abs(e1[2]) < 1e-8 and abs(e2[2]) < 1e-8
    sigma, angle, rho = sol.representation.position_map(sol.data[0], n=360, position_count=16)
    for s, row in zip(sigma, rho):
        assert row.max() > 0.999 * (1 + 0.8)
    fig = plotting.plot_solution(sol)
    assert any("principal plane" in ax.get_xlabel() for ax in fig.axes)
    close(fig)


def test_a_movie_of_a_layered_run_shows_the_position():
    """A layered (causal) run is drawn over (angle, σ) (`movies.PositionMap`), frame by frame the map of
    that time, and the still of a frame is that frame."""
    sol = layered_sphere()
    assert movies.painter_for(sol) is movies.PositionMap
    movie = movies.Movie([sol])
    frame = movie.render(len(sol.t) - 1)
    mesh = movie.painters[0].mesh
    plane = principal_plane(sol.measure(-1))
    want = sol.representation.position_map(sol.data[-1], 180, 64, plane=plane)[2]
    np.testing.assert_allclose(np.asarray(mesh.get_array()).reshape(want.shape), want, rtol=1e-12)
    assert "σ" in movie.fig.axes[0].get_ylabel()
    np.testing.assert_array_equal(frame, movies.still(sol, -1))
    movie.close()
    circle = solvers.FourierCircle(mf.Model(1.0, 2, mask="causal", position_bias=1.0), 16, positions=8).solve(
        lambda x, s: 1 + 0.5 * x[..., 0] * s, [0.0, 0.1])
    assert movies.painter_for(circle) is movies.PositionMap


def test_cluster_masses_on_the_sphere_are_readable():
    """The mass labels of the S^2 particle picture are black on a white box, above everything else of the
    3-D axes (they were coloured text among the trajectories)."""
    fig = plotting.plot_solution(particle_solution(3), show_energy=False)
    ax = next(a for a in fig.axes if a.name == "3d")
    labels = [t for t in ax.texts if t.get_text()]
    assert len(labels) == 3
    others = max(a.get_zorder() for a in ax.get_children() if a not in labels)
    for t in labels:
        box = t.get_bbox_patch()
        assert box is not None and box.get_facecolor()[:3] == (1.0, 1.0, 1.0) and t.get_color() == "k"
        assert t.get_zorder() > others
    close(fig)
