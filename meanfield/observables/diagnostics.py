"""Clustering diagnostics (Figure 3, Figure 4, Lemma 6.4; docs/mathematics.md §7–§9).

The clusters of one configuration (`meanfield.observables.clusters`: pair fractions, counts, sizes,
Rényi centres, `find_clusters`) are offered here too; this module follows them through a run: the
cluster count against time (`cluster_history`), its events and the energy's plateaus, the trajectories
of the clusters (`cluster_trajectories`, `follow_clusters`) and their variables in a file, the maxima of
a harmonic and the white-noise prediction of the count. This module imports no solver.
"""
import json

import numpy as np

from ..validation import check_int
from ..spaces.harmonics import real_sh
from ..transformer.kernels import linear_growth_rates
from ..transformer.model import Model
from ..spaces.quadrature import fibonacci
from ..serialization import jsonable
from .clusters import (Clusters, LARGE, cap_fraction, chord_geodesic, cluster_sizes, clustered_pair_fraction,
                       count_clusters, count_maxima, expected_renyi_centres, find_clusters, linked_components,
                       renyi_centres, span_dimension, sphere_neighbours, w1_to_nearest_dirac)


def cluster_history(measures, tol=1e-3, min_mass=1e-2, stray=0.05):
    """`find_clusters` along a sequence of weighted measures (e.g. ``sol.measure(i)`` for every i): the
    cluster count against time through formation and merging (Section 6.3, Figure 4 of the paper;
    docs/mathematics.md §9).

    Returns a dict of arrays: ``count`` (float; NaN where not separated), ``clustered_mass``, and the
    lists ``masses`` and ``positions`` (per saved time, heaviest first).
    """
    out = {"count": [], "clustered_mass": [], "masses": [], "positions": []}
    for m in measures:
        c = find_clusters(m, tol, min_mass=min_mass, stray=stray)
        out["count"].append(np.nan if c.count is None else float(c.count))
        out["clustered_mass"].append(c.clustered_mass)
        out["masses"].append(c.masses)
        out["positions"].append(c.positions)
    out["count"] = np.array(out["count"])
    out["clustered_mass"] = np.array(out["clustered_mass"])
    return out


def history_events(t, count, energy=None):
    """The formation time, the first count, the changes of count and the plateaus of a count history
    (metastability: long plateaus between merges, Section 6.3 of the paper; docs/mathematics.md §9).

    ``count`` is NaN where the measure is not separated; changes are read between separated times
    (a NaN transient in between does not end a plateau). Returns a dict: ``t_form`` (first separated
    time), ``first_count``, ``merges`` [(t, from, to)] (the first saved time with the new count),
    ``plateaus`` [{count, start, end, duration, censored, energy}] (``censored``: still running at
    the last time; ``energy``: the mean of ``energy`` over the plateau's separated times).
    """
    t = np.asarray(t, dtype=float)
    count = np.asarray(count, dtype=float)
    ok = np.nonzero(np.isfinite(count))[0]
    out = {"t_form": float("nan"), "first_count": float("nan"), "merges": [], "plateaus": []}
    if ok.size == 0:
        return out
    out["t_form"], out["first_count"] = float(t[ok[0]]), float(count[ok[0]])
    starts = [ok[0]]
    for i, j in zip(ok[:-1], ok[1:]):
        if count[j] != count[i]:
            out["merges"].append((float(t[j]), float(count[i]), float(count[j])))
            starts.append(j)
    bounds = starts + [None]
    for a, b in zip(bounds[:-1], bounds[1:]):
        end = float(t[-1]) if b is None else float(t[b])
        sel = ok[(ok >= a) & (ok < (len(t) if b is None else b))]
        e = float(np.mean(np.asarray(energy)[sel])) if energy is not None else float("nan")
        out["plateaus"].append({"count": float(count[a]), "start": float(t[a]), "end": end,
                                "duration": end - float(t[a]), "censored": b is None, "energy": e})
    return out


def energy_plateaus(t, energy, rel_slope=0.01, min_ratio=1.5, t_min=1.0):
    """Plateaus of E_β (3.5) against log t, the staircase of metastability (Geshkovski, Koubbi,
    Polyanskiy, Rigollet (2024); docs/mathematics.md §9): maximal intervals of t >= ``t_min`` on which |dE/d log t| <=
    ``rel_slope``·(E_max − E_min) and t_end/t_start >= ``min_ratio``. (Before the particles move,
    t ≪ 1, E is flat in log t too; ``t_min`` leaves that out.) Returns [{start, end, duration,
    energy}] (``energy``: the mean over the plateau)."""
    t = np.asarray(t, dtype=float)
    e = np.asarray(energy, dtype=float)
    keep = t >= t_min
    t, e = t[keep], e[keep]
    if t.size < 3:
        return []
    span = float(e.max() - e.min()) or 1.0
    slope = np.abs(np.gradient(e, np.log(t))) / span
    flat = slope <= rel_slope
    out = []
    i = 0
    while i < t.size:
        if not flat[i]:
            i += 1
            continue
        j = i
        while j + 1 < t.size and flat[j + 1]:
            j += 1
        if t[j] / t[i] >= min_ratio:
            out.append({"start": float(t[i]), "end": float(t[j]), "duration": float(t[j] - t[i]),
                        "energy": float(np.mean(e[i:j + 1]))})
        i = j + 1
    return out


def compare_events(reference, other, merge_before=200.0):
    """Relative differences |t' − t|/t of the formation time and of each merge time before ``merge_before``
    (merges paired in order) between two `history_events` (e.g. the continuum and particles, the
    mean-field limit of docs/mathematics.md §8); None for a merge the other lacks."""
    tf = abs(other["t_form"] - reference["t_form"]) / reference["t_form"]
    merges = []
    for k, (tm, _, _) in enumerate(reference["merges"]):
        if tm >= merge_before:
            break
        if k < len(other["merges"]):
            merges.append(abs(other["merges"][k][0] - tm) / tm)
        else:
            merges.append(None)
    return float(tf), merges


def harmonic_maxima(density, l, n=20000):
    """The number of local maxima of the degree-l term Y_l of a `meanfield.measures.densities.SeededPerturbation`
    (its ``component(l, x)``): l on S^1; on S^2 counted on a Fibonacci set of n points (neighbours from
    its Delaunay triangulation), the number of clusters the linear theory predicts when degree l grows
    fastest (docs/mathematics.md §5; Problem 1 of the paper)."""

    if density.dim == 2:
        return int(l)
    x = fibonacci(n).points
    return count_maxima(density.component(l, x), sphere_neighbours(x))


def white_noise_prediction(beta, dim, n, samples=None, lmax=16, rng=0, normalized=True, grid=4000):
    """The linear theory for iid initial data: the distribution of the first cluster count.

    For n iid points the empirical measure has degree-l components of size ~n^{-1/2} (white noise):
    on S^1 the amplitude A_l = 2|ĉ_l| with ĉ_l = n^{-1}Σ_j e^{-ilθ_j} ≈ complex Gaussian of variance
    1/n; on S^2 the coefficients of the orthonormal Y_{lm} are ≈ N(0, 1/n). Each grows like e^{ς_l t}
    (docs/mathematics.md §5); the first to reach size 1, l̂ = argmin_l log(1/A_l)/ς_l, dominates
    when the clusters form. The predicted count is l̂ on S^1 and, on S^2, the number of maxima of that
    random degree-l̂ harmonic (`count_maxima` on a Fibonacci set of ``grid`` points). Returns
    {count: probability} over ``samples`` Gaussian draws (default 4000 on S^1, 400 on S^2).
    """

    rng = np.random.default_rng(rng)
    samples = check_int((4000 if dim == 2 else 400) if samples is None else samples, "samples", low=1)
    rates = linear_growth_rates(Model(beta=float(beta), dim=dim, normalized=normalized), lmax)[1:]
    ls = np.arange(1, lmax + 1)
    grow = rates > 0
    if dim == 2:
        amp = 2.0 * np.abs(rng.standard_normal((samples, lmax)) + 1j * rng.standard_normal((samples, lmax))) \
            / np.sqrt(2.0 * n)
        coef = None
    else:
        coef = [rng.standard_normal((samples, 2 * l + 1)) / np.sqrt(n) for l in ls]
        amp = np.stack([np.linalg.norm(c, axis=1) for c in coef], axis=1)
    t_reach = np.where(grow, np.log(1.0 / np.minimum(amp, 1.0 - 1e-12)) / np.where(grow, rates, 1.0), np.inf)
    dominant = ls[np.argmin(t_reach, axis=1)]
    if dim == 2:
        counts = dominant
    else:
        x = fibonacci(grid).points
        edges = sphere_neighbours(x)
        counts = np.empty(samples, dtype=int)
        for l in np.unique(dominant):
            idx = np.nonzero(dominant == l)[0]
            Y = np.stack([real_sh(int(l), m, x) for m in range(-l, l + 1)], axis=1)    # (grid, 2l+1)
            counts[idx] = [count_maxima(v, edges) for v in coef[l - 1][idx] @ Y.T]
    values, freq = np.unique(counts, return_counts=True)
    return {int(v): float(f) / samples for v, f in zip(values, freq)}


CLUSTER_TOLERANCES = (1e-3, 1e-2, 1e-1)      # radians: the linking distances tried at each time, smallest first


def cluster_trajectories(t, measures, tolerances=CLUSTER_TOLERANCES, *, min_mass=1e-2, stray=0.05,
                         same_points=None):
    """Clusters followed through time: their count, centres, masses and widths, and the merge events
    (metastability: plateaus between merges, Section 6.3 and Figure 4 of the paper; docs/mathematics.md §9).

    At each saved time the clusters are those of `find_clusters` at the smallest linking distance of
    ``tolerances`` at which the measure is separated (none where it is not). A cluster keeps its index
    (a *track*) from one separated time to the next: each earlier cluster goes on as the later
    cluster that receives most of its points' mass when the points keep their identity
    (``same_points[i]``: the points of measure i are those of the separated time before it, in the
    same order, as for particles and Lagrangian nodes), else as the later cluster nearest to its
    centre. When several earlier clusters go on as one later cluster, that is a *merge*: the track of
    the heaviest goes on, the others end. A later cluster that no earlier one goes on as starts a
    new track.

    Parameters
    ----------
    t : (T,) saved times.
    measures : sequence of T weighted measures (points, weights), or None where there is no state.
    tolerances, min_mass, stray : as `find_clusters`.
    same_points : (T,) booleans, or None (all False).

    Returns
    -------
    dict with ``t``; ``count`` (T,) float, NaN where not separated; ``centre`` (T, K, d), ``mass``,
    ``width`` (T, K) (width: the mass-weighted RMS geodesic radius, radians), NaN where track k does not
    exist; ``tolerance`` (T,) the linking distance used (NaN where not separated); ``merges``, a list
    of {"t", "tracks", "masses" (the merging clusters' masses at the time before), "into" (the
    track that goes on), "mass" (its mass after), "t_before"}.
    """
    t = np.asarray(t, dtype=float)
    same_points = np.zeros(t.size, dtype=bool) if same_points is None else np.asarray(same_points, dtype=bool)
    found = [_separated(m, tolerances, min_mass, stray) for m in measures]
    dims = max((np.shape(m[0])[-1] for m in measures if m is not None), default=0)
    tracks = []                                        # per time: the track index of each cluster
    merges, prev, count, origin = [], None, 0, {}      # origin: the track a track split from
    for i, item in enumerate(found):
        if item is None:
            tracks.append(None)
            continue
        ids, split_from = np.full(len(item[1].masses), -1), {}
        if prev is not None:
            j, (_, p), pids = prev
            merges += _link(item[1], p, pids, ids, split_from, origin, same_points[i], (float(t[i]), float(t[j])))
        for b in np.nonzero(ids < 0)[0]:
            ids[b] = count
            if split_from.get(b, -1) >= 0:
                origin[count] = split_from[b]
            count += 1
        tracks.append(ids)
        prev = (i, item, ids)
    return _track_arrays(t, found, tracks, count, dims, merges)


def _separated(m, tolerances, min_mass, stray):
    """(linking distance, `find_clusters`) at the smallest of ``tolerances`` separating ``m``, or None."""
    if m is None:
        return None
    for tol in tolerances:
        c = find_clusters(m, tol, min_mass=min_mass, stray=stray)
        if c.separated:
            return tol, c
    return None


def _link(c, p, pids, ids, split_from, origin, same, times):
    """Give the clusters ``c`` the tracks ``pids`` of the earlier clusters ``p`` they continue (``ids``,
    in place; ``split_from``: where a new one came from); returns the merge events."""
    k = len(c.masses)
    identity = same and len(c.labels) == len(p.labels)
    to = np.empty(len(p.masses), dtype=int)           # the later cluster each earlier one goes on as
    for a in range(len(p.masses)):
        moved = c.labels[p.labels == a] if identity else np.empty(0, dtype=int)
        moved = moved[moved >= 0]
        to[a] = int(np.argmax(np.bincount(moved, minlength=k))) if moved.size else \
            int(np.argmin(chord_geodesic(c.positions, p.positions[a][None, :])))
    merges = []
    for b in range(k):
        parents = np.nonzero(to == b)[0]
        if parents.size == 0:                          # a split (or a new cluster): where did it come from?
            if identity:
                came = p.labels[c.labels == b]
                came = came[came >= 0]
                src = int(np.argmax(np.bincount(came))) if came.size else -1
            else:
                src = int(np.argmin(chord_geodesic(p.positions, c.positions[b][None, :])))
            split_from[b] = int(pids[src]) if src >= 0 else -1
            continue
        heir = parents[np.argmax(p.masses[parents])]
        ids[b] = pids[heir]
        # a cluster seen as two at one time and as one again is no merge
        real = [a for a in parents if a != heir and origin.get(int(pids[a])) != int(pids[heir])
                and origin.get(int(pids[heir])) != int(pids[a])]
        if real:
            merges.append({"t": times[0], "t_before": times[1], "tracks": [int(pids[a]) for a in parents],
                           "masses": [float(p.masses[a]) for a in parents], "into": int(pids[heir]),
                           "mass": float(c.masses[b])})
    return merges


def _track_arrays(t, found, tracks, K, dims, merges):
    """The result of `cluster_trajectories`: per time and track, NaN where a track does not exist."""
    T = t.size
    out = {"t": t, "count": np.full(T, np.nan), "tolerance": np.full(T, np.nan), "centre": np.full((T, K, dims), np.nan),
           "mass": np.full((T, K), np.nan), "width": np.full((T, K), np.nan), "merges": merges}
    for i, (item, ids) in enumerate(zip(found, tracks)):
        if item is None:
            continue
        tol, c = item
        out["count"][i], out["tolerance"][i] = len(ids), tol
        out["centre"][i, ids] = c.positions
        out["mass"][i, ids] = c.masses
        out["width"][i, ids] = c.spread
    return out


def follow_clusters(sol, **kwargs):
    """The clusters of a `Solution` ``sol`` followed through its saved times (`cluster_trajectories`):
    count, centres, masses, widths per track and the merge events. The measure at each time is
    ``measure(i)`` (PDE solutions: a quadrature of ρσ; Lagrangian runs: the moving nodes;
    particles: their positions, realisation 0 of a batch); nodes and particles keep their identity
    between saved times, so a cluster goes on where its mass goes. ``kwargs``: ``tolerances``,
    ``min_mass``, ``stray``. Returns None for a cloud in d > 3 of more than 10^6 coordinates."""

    measures, same = [], []
    for seg in sol.segments:
        rep = seg.representation
        keeps = rep.keeps_identity
        for data in seg.data:
            same.append(keeps)
            if getattr(rep, "domain", "sphere") != "sphere" or data is None:
                measures.append(None)
            elif rep.is_density:
                measures.append(rep.measure(data))
            else:
                x = np.asarray(data)
                measures.append((x[0] if x.ndim == 3 else x, rep.weights))
    sizes = [np.size(m[0]) for m in measures if m is not None]
    if sol.model.dim > 3 and sizes and max(sizes) > 10 ** 6:
        return None
    if "min_mass" not in kwargs and not sol.representation.is_density and sizes:
        n = max(sizes) // sol.model.dim
        kwargs["min_mass"] = min(1.0, max(0.01, 1.5 / n))     # a lone particle is not a cluster
    return cluster_trajectories(sol.t, measures, same_points=same, **kwargs)


def add_cluster_variables(ds, traj):
    """Put the cluster trajectories ``traj`` (`follow_clusters`, `cluster_trajectories`) into ``ds``."""
    ds["cluster_count"] = (("time",), traj["count"], {
        "long_name": "number of clusters (NaN where the mass is not separated into clusters)", "units": "1"})
    ds["cluster_linking_distance"] = (("time",), traj["tolerance"], {
        "long_name": "linking distance at which the clusters were found (meanfield.observables.diagnostics.find_clusters)",
        "units": "radian"})
    if traj["mass"].shape[1]:
        ds["cluster_mass"] = (("time", "cluster"), traj["mass"], {
            "long_name": "mass of each cluster (track), NaN where it does not exist", "units": "1"})
        ds["cluster_centre"] = (("time", "cluster", "component"), traj["centre"], {
            "long_name": "centre of each cluster (track): normalised weighted mean of its points", "units": "1"})
        ds["cluster_width"] = (("time", "cluster"), traj["width"], {
            "long_name": "mass-weighted RMS geodesic radius of each cluster about its centre", "units": "radian"})
    ds.attrs["cluster_merges_json"] = json.dumps(jsonable(traj["merges"]))
    return ds
