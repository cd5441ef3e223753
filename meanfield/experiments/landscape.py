"""``meanfield landscape``: the critical points of the interaction energy of n tokens (Problem 3 of the
paper; docs/landscape.md, docs/mathematics.md §17).

For each n, on a grid of β:

* **Census.** `meanfield.landscape.census.census` at every β, seeded with the points of the previous β
  (continuation on the grid): the counts of synchronised points, strict local maxima, strict saddles and
  degenerate points, certified or not (`meanfield.landscape.certify`; ``certify`` says which points are
  tested). Points are followed from one β to the next (same clusters, nearest signature) into branches,
  whose top non-trivial Hessian eigenvalue is drawn against β.
* **Thresholds.** For each branch that is a strict local maximum somewhere on the grid, the β at which
  it gains or loses being one (`stability_threshold`, S^1), and the largest β with a non-synchronised
  strict local maximum (first spurious maximum).
* **Gallery.** The local maxima drawn on the circle (or the sphere).

It checks the closed forms (docs/mathematics.md §17.5): the regular n-gon becomes a strict local
maximum at β = −2/3 for n = 3 and at the computed thresholds for odd n, never for even n <= 30; the
threshold found by continuation agrees with the closed form to 1e-8; the first spurious maximum for
n = 6 is at −2/3 (the triangle of pairs). On S^1 it also checks the theorem of Polyanskiy, Rigollet
and Yao (no non-synchronised strict local maximum for β >= −0.16) on a grid, every point certified, and
proves the census complete by branch-and-bound for small n (`meanfield.landscape.branchbound`).
"""
from dataclasses import dataclass

import numpy as np

from ..errors import InvalidInput
from ..landscape import Energy, ring_adjacency
from ..landscape.branches import first_spurious_maximum, polygon_threshold, stability_threshold
from ..landscape.census import census
from ..landscape.certify import certify_point
from ..landscape.critical import KINDS, equivalent
from ..results.plotting import suptitle
from .options import FIRST, Options, Quick, at_most, experiment, option
from .report import Report, show_progress

PRY_BETA = -0.16                # Polyanskiy, Rigollet, Yao: synchronisation for every β >= −0.16
COMPLETE_BETAS = (-3.0, -1.0, -0.5, 0.5, 2.0)


def parse_graph(graph, n):
    """The adjacency of ``graph``: "complete" (None) or "ring:k" (`ring_adjacency`)."""
    if graph == "complete":
        return None
    head, _, k = graph.partition(":")
    if head == "ring" and k.isdigit() and 1 <= int(k) and 2 * int(k) < n:
        return ring_adjacency(n, int(k))
    raise InvalidInput(f"`graph` must be 'complete' or 'ring:k' with 1 <= k < n/2 (n = {n}), got {graph!r}.")


def beta_grid(betas, count):
    """Two values: the ends of a grid of ``count`` values; more: the values themselves (sorted)."""
    if len(betas) == 2:
        if not betas[0] < betas[1]:
            raise InvalidInput(f"`betas` as a range low:high needs low < high, got {betas[0]:g}:{betas[1]:g}.")
        return np.linspace(betas[0], betas[1], count)
    return np.sort(np.array(betas, float))


# -------------------------------------------------------------------------------------------------
# the census over β, with branches
# -------------------------------------------------------------------------------------------------
def census_over_beta(n, betas, dim=2, adjacency=None, random_starts=4, certify="maxima", progress=None, placements=1):
    """The census at every β of ``betas`` (descending continuation), as a list of rows (one per point and
    β) with ``branch`` ids that follow a point from one β to the next. Each β is seeded with the points
    of the previous one, so one random placement of each composition (`census.scattered`) suffices."""
    energy = Energy(betas[-1], n, dim, None, adjacency)
    rows, previous, prev_ids, next_id = [], [], [], 0
    for b in betas[::-1]:
        e = energy.at(b)
        found = census(e, extra=[p.points for p in previous], random_starts=random_starts, placements=placements)
        pts = found.points
        ids = []
        for p, sig in zip(pts, found.signatures):
            match = None
            for q, qsig, qid in zip(previous, prev_sigs if previous else [], prev_ids):
                if q.clusters == p.clusters and qid not in ids and equivalent(sig, qsig, tol=0.2):
                    match = qid
                    break
            if match is None:
                match, next_id = next_id, next_id + 1
            ids.append(match)
        for p, bid in zip(pts, ids):
            if dim == 2 and (certify == "all" or (certify == "maxima" and p.kind in ("local max", "synchronised"))):
                certify_point(e, p)
            rows.append({"n": n, "beta": float(b), "branch": bid, "kind": p.kind, "morse_index": p.morse_index,
                         "energy": p.energy, "top": p.top_eigenvalue, "scale": e.scale(p.points), "certified": p.certified,
                         "tested": dim == 2 and (certify == "all" or (certify == "maxima" and p.kind in
                                                                      ("local max", "synchronised"))),
                         "radius": p.radius, "clusters": "-".join(map(str, p.clusters)), "point": p})
        previous, prev_sigs, prev_ids = pts, found.signatures, ids
        if progress is not None:
            progress.update(1)
    return rows


def counts(rows):
    """Counts by kind at each β: {beta: {kind: (found, certified)}}."""
    out = {}
    for r in rows:
        c = out.setdefault(r["beta"], {k: [0, 0] for k in KINDS})
        c[r["kind"]][0] += 1
        c[r["kind"]][1] += bool(r["certified"])
    return out


def branch_thresholds(rows, betas, adjacency=None):
    """For each branch that is a strict local maximum on the grid (S^1): the threshold β in the range."""
    out = []
    seen = set()
    for r in sorted(rows, key=lambda r: r["beta"]):
        if r["kind"] != "local max" or r["branch"] in seen:
            continue
        seen.add(r["branch"])
        p = r["point"]
        theta = np.arctan2(p.points[:, 1], p.points[:, 0])
        try:
            b = stability_threshold(theta, (float(betas[0]), float(betas[-1])), beta=r["beta"], adjacency=adjacency)
        except (InvalidInput, np.linalg.LinAlgError):
            b = None
        out.append({"n": r["n"], "branch": r["branch"], "clusters": r["clusters"], "threshold": b,
                    "at_beta": r["beta"]})
    return out


# -------------------------------------------------------------------------------------------------
# checks
# -------------------------------------------------------------------------------------------------
def _check_closed_forms(report, max_n):
    table = {n: polygon_threshold(n) for n in range(2, max(max_n, 30) + 1)}
    report.results["polygon_thresholds"] = {str(n): b for n, b in table.items()}
    report.check("closed form: the triangle becomes a strict local maximum at β = −2/3",
                 abs(table[3] + 2 / 3) < 1e-8, f"β = {table[3]:.15f}",
                 compared="root of the circulant Hessian's top eigenvalue λ_1(β) for n = 3 against −2/3",
                 tolerance="<= 1e-8")
    even = [n for n in table if n % 2 == 0]
    report.check("closed form: the regular n-gon is never a strict local maximum for even n <= 30",
                 all(table[n] is None for n in even),
                 f"even n with a threshold: {[n for n in even if table[n] is not None]}",
                 compared="sign of max_m λ_m(β) on β in [−(20 + n²/4), 0] (step 0.01) and the proof for "
                          "β >= 0 (docs/mathematics.md §17.5)", tolerance="no sign change")
    odd = [n for n in range(3, min(max_n, 9) + 1, 2)]
    diffs = []
    for n in odd:
        b = stability_threshold(2 * np.pi * np.arange(n) / n, (table[n] - 1.0, table[n] + 1.0))
        diffs.append(abs(b - table[n]) if b is not None else np.inf)
    report.check("closed form: continuation finds the polygon thresholds", max(diffs, default=0.0) < 1e-8,
                 "; ".join(f"n = {n}: {table[n]:.12f} (|Δ| = {d:.1e})" for n, d in zip(odd, diffs)),
                 compared="stability_threshold along the polygon's branch against the closed form, odd n <= 9",
                 tolerance="<= 1e-8")


def _check_first_spurious(report):
    beta, where = first_spurious_maximum(6, (-3.0, 0.0))
    report.results["first_spurious_maximum_n6"] = {"beta": beta, "clusters": list(where.clusters),
                                                   "certified": where.certified}
    report.check("n = 6: the first spurious maximum appears at β = −2/3 (three pairs on a triangle)",
                 beta is not None and abs(beta + 2 / 3) < 1e-8 and where.clusters == (2, 2, 2),
                 f"β = {beta:.12f}, clusters {where.clusters}, certified {where.certified}",
                 compared="first_spurious_maximum(6, (−3, 0)) against −2/3", tolerance="<= 1e-8")


def _check_theorem(report, max_n, count, progress):
    betas = np.linspace(PRY_BETA, 10.0, count)
    bad, uncertified, total = [], 0, 0
    for n in range(2, max_n + 1):
        rows = census_over_beta(n, betas, certify="all", random_starts=2)
        total += len(rows)
        uncertified += sum(not r["certified"] for r in rows)
        bad += [(n, r["beta"], r["clusters"]) for r in rows if r["kind"] == "local max"]
        if progress is not None:
            progress.update(1)
    report.results["theorem"] = {"n_max": max_n, "betas": count, "points": total, "uncertified": uncertified,
                                 "spurious_maxima": bad}
    report.check(f"no non-synchronised strict local maximum for n <= {max_n}, β in [−0.16, 10]",
                 not bad and uncertified == 0,
                 f"{total} critical points over {count} β, {uncertified} uncertified, spurious maxima: {bad[:5]}",
                 compared="kinds of every census point (Polyanskiy, Rigollet and Yao 2025)",
                 tolerance="none is a local max; every point certified")


def _check_complete(report, ns):
    from ..landscape.branchbound import enclose
    from ..landscape.census import critical_points

    rows = []
    for n in ns:
        for b in COMPLETE_BETAS:
            e = enclose(n, b)
            found = critical_points(n, b, certify=False)
            same = len(found) == len(e.classes) and all(
                p.clusters == q.clusters and p.morse_index == q.morse_index and abs(p.energy - q.energy) < 1e-10
                for p, q in zip(found, e.classes))
            rows.append({"n": n, "beta": b, "complete": e.complete, "zeros": len(e.zeros), "classes": len(e.classes),
                         "boxes": e.boxes, "seconds": e.seconds, "census_agrees": same,
                         "list": [[list(p.clusters), p.morse_index, p.energy] for p in e.classes]})
    report.results["completeness"] = rows
    report.check(f"branch-and-bound proves the census complete for n in {list(ns)}, β in {list(COMPLETE_BETAS)}",
                 all(r["complete"] and r["census_agrees"] for r in rows),
                 "; ".join(f"n = {r['n']}, β = {r['beta']:g}: {r['classes']} classes ({r['zeros']} zeros), "
                           f"{r['boxes']} boxes, {r['seconds']:.1f} s" for r in rows),
                 compared="the interval branch-and-bound's list against the census",
                 tolerance="every box decided; same clusters, indices and energies (1e-10)")


# -------------------------------------------------------------------------------------------------
# figures
# -------------------------------------------------------------------------------------------------
def _figures(report, all_rows, ns, dim):
    fig, axes = report.subplots(1, len(ns), figsize=(3.2 * len(ns), 3.4), squeeze=False)
    suptitle(fig, "top non-trivial Hessian eigenvalue λ_top of each branch (< 0: strict local maximum; red: a "
                  "maximum somewhere), s = max_i Σ_j w_i w_j e^{β⟨x_i,x_j⟩}")
    for ax, n in zip(axes[0], ns):
        rows = [r for r in all_rows if r["n"] == n and r["kind"] != "synchronised"]
        for bid in sorted({r["branch"] for r in rows}):
            br = sorted((r for r in rows if r["branch"] == bid), key=lambda r: r["beta"])
            top = np.array([r["top"] for r in br])
            scale = np.array([r["scale"] for r in br])
            ax.plot([r["beta"] for r in br], np.arcsinh(100 * top / scale), lw=0.8,
                    color="C3" if any(r["kind"] == "local max" for r in br) else "0.6")
        ax.axhline(0, color="k", lw=0.6)
        ax.set(title=f"n = {n}", xlabel="β", ylabel="asinh(100 λ_top/s)" if n == ns[0] else None)
    fig.tight_layout()
    report.save_figure(fig, "eigenvalues.png")
    maxima = [r for r in all_rows if r["kind"] == "local max"]
    shown = {}
    for r in sorted(maxima, key=lambda r: r["beta"]):
        shown.setdefault((r["n"], r["branch"]), r)
    shown = list(shown.values())[:24]
    if shown:
        cols = min(6, len(shown))
        rows_ = -(-len(shown) // cols)
        fig = report.figure(figsize=(2.0 * cols, 2.2 * rows_))
        suptitle(fig, "local maxima (non-synchronised), each at the lowest grid β where it is one")
        for k, r in enumerate(shown):
            x = r["point"].points
            if dim == 2:
                ax = fig.add_subplot(rows_, cols, k + 1)
                t = np.linspace(0, 2 * np.pi, 200)
                ax.plot(np.cos(t), np.sin(t), color="0.7", lw=0.6)
                where, size = np.unique(np.round(x, 6), axis=0, return_counts=True)
                ax.scatter(where[:, 0], where[:, 1], s=18 * size, color="C3", zorder=3)
                ax.set_aspect("equal")
                ax.axis("off")
            else:
                ax = fig.add_subplot(rows_, cols, k + 1, projection="3d")
                ax.scatter(*x.T, color="C3")
                ax.set_axis_off()
            ax.set_title(f"n={r['n']} β={r['beta']:.2f}\n{r['clusters']}", fontsize=7)
        fig.tight_layout()
        report.save_figure(fig, "maxima.png")


def _dataset(report, all_rows, thresholds):
    import xarray as xr  # deferred: xarray is heavy

    keys = ("n", "beta", "branch", "morse_index", "energy", "top", "certified", "tested")
    data = {k: (("point",), np.array([r[k] for r in all_rows])) for k in keys}
    data["radius"] = (("point",), np.array([np.nan if r["radius"] is None else r["radius"] for r in all_rows]))
    data["kind"] = (("point",), np.array([r["kind"] for r in all_rows], dtype=str))
    data["clusters"] = (("point",), np.array([r["clusters"] for r in all_rows], dtype=str))
    ds = xr.Dataset(data)
    ds["certified"] = ds["certified"].astype("i1")
    ds["tested"] = ds["tested"].astype("i1")
    ds["top"].attrs["long_name"] = "largest non-trivial eigenvalue of the Riemannian Hessian"
    ds["radius"].attrs["long_name"] = "certified radius of the Krawczyk box (angles, max-norm); NaN: uncertified"
    ds.attrs["description"] = "critical points of E_beta for n tokens (docs/landscape.md)"
    report.save_dataset(ds, "landscape.nc")


# -------------------------------------------------------------------------------------------------
# the experiment
# -------------------------------------------------------------------------------------------------
@dataclass
class LandscapeOptions(Options):
    """The energy landscape of n tokens (Problem 3): the census of critical points of E_beta over a beta
    grid (counts by type, certified or not), the thresholds where branches become strict local maxima,
    the top Hessian eigenvalue of each branch, a gallery of the local maxima; checks of the closed forms,
    of the theorem for beta >= -0.16 and of completeness by branch-and-bound.

    The options of `landscape` and of ``meanfield landscape``.
    """

    n: tuple[int, ...] = option((3, 4, 5, 6, 7, 8), "numbers of tokens (3..12 is 3, 4, ..., 12)", low=2, high=16,
                                flags=("--n",), quick=(3, 4, 5, 6))
    betas: tuple[float, ...] = option((-6.0, 2.0), "beta range low:high (beta_count values), or three or more "
                                      "values")
    beta_count: int = option(100, "values of beta in the range", low=2, quick=31)
    dim: int = option(2, "ambient dimension (tokens on S^(dim-1))", choices=(2, 3))
    graph: str = option("complete", "who sees whom: complete, or ring:k (k neighbours on each side)")
    random_starts: int = option(4, "random starts per beta (each with deflated restarts)", low=0)
    certify: str = option("maxima", "which census points the interval tests certify (S^1)",
                          choices=("all", "maxima", "none"))
    theorem_n: int = option(10, "the theorem check runs n = 2..theorem_n (0: skip)", low=0, quick=5)
    theorem_betas: int = option(200, "beta values of the theorem check in [-0.16, 10]", low=2, quick=20)
    complete_n: tuple[int, ...] = option((3, 4), "n of the branch-and-bound completeness proof (S^1), at beta "
                                         "in -3, -1, -0.5, 0.5, 2", low=2, high=6, nonempty=False,
                                         quick=Quick("those <= 3", lambda ns: tuple(n for n in ns if n <= 3)))


@experiment("landscape", LandscapeOptions, parallel=False,
            help="critical points of the energy of n tokens: census, thresholds, certification (Problem 3)")
def landscape(out, o, *, quick, progress):
    """Run the census, thresholds and checks (see the module docstring); returns the `Report`."""
    from tqdm.auto import tqdm

    progress = show_progress(progress)
    betas = beta_grid(o.betas, o.beta_count)
    ns = sorted(set(o.n))
    settings = {"quick": quick, "n": ns, "betas": betas, "dim": o.dim, "graph": o.graph,
                "random_starts": o.random_starts, "certify": o.certify, "theorem_n": o.theorem_n,
                "theorem_betas": o.theorem_betas, "complete_n": list(o.complete_n)}
    report = Report("landscape", out, settings)
    adjacency = {n: parse_graph(o.graph, n) for n in ns}
    report.write()
    with report.guard():
        bar = tqdm(total=len(ns) * len(betas), desc="census", unit="β") if progress else None
        all_rows, thresholds, summary = [], [], {}
        for n in ns:
            rows = census_over_beta(n, betas, o.dim, adjacency[n], o.random_starts, o.certify, bar)
            all_rows += rows
            if o.dim == 2:
                thresholds += branch_thresholds(rows, betas, adjacency[n])
            spurious = [r for r in rows if r["kind"] == "local max"]
            summary[str(n)] = {
                "counts": {f"{b:.12g}": {k: {"found": v[0], "certified": v[1]} for k, v in c.items()}
                           for b, c in sorted(counts(rows).items())},
                "points": len(rows), "certified": sum(r["certified"] for r in rows),
                "tested": sum(r["tested"] for r in rows),
                "largest_beta_with_spurious_max": max((r["beta"] for r in spurious), default=None),
                "thresholds": [t for t in thresholds if t["n"] == n]}
            report.note(f"n = {n}: {len(rows)} critical points over {len(betas)} β, "
                        f"{summary[str(n)]['certified']} certified of {summary[str(n)]['tested']} tested; "
                        f"spurious maxima up to β = {summary[str(n)]['largest_beta_with_spurious_max']}")
        if bar is not None:
            bar.close()
        report.results["census"] = summary
        report.results["thresholds"] = thresholds
        tested = [r for r in all_rows if r["tested"]]
        report.check("every tested census point is certified", all(r["certified"] for r in tested),
                     f"{sum(r['certified'] for r in tested)} of {len(tested)}",
                     compared="Krawczyk test and interval eigenvalue signs of the tested points",
                     tolerance="all certified")
        if out is not None:
            _dataset(report, all_rows, thresholds)
            _figures(report, all_rows, ns, o.dim)
        report.write()
        _check_closed_forms(report, max(ns))
        if o.graph == "complete" and o.dim == 2:
            _check_first_spurious(report)
            report.write()
            if o.theorem_n >= 2:
                _check_theorem(report, o.theorem_n, o.theorem_betas, None)
                report.write()
            if o.complete_n:
                _check_complete(report, o.complete_n)
        report.finish()
    return report
