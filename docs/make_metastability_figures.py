"""Pictures for docs/metastability.md (run once; the PNGs under docs/img/ are committed).

    python docs/make_metastability_figures.py [--from DIR [--replot]] [--workers N]

Runs ``meanfield metastability`` with its default settings (or reads the output directory DIR of
such a run) and copies its figures to docs/img/metastability_*.png:

* metastability_continuum.png: the S^1 continuum (β = 4, seed 0) through clustering and merging
  (cell-averaged density, `LagrangianNodes.space_time`), the cluster counts of every run (continuum
  and quasi particles, n = 4000) and the normalised energy staircases;
* metastability_figure4.png: the mean number of clusters of iid particles over (t, β), with k*(β);
* metastability_staircase.png: n = 5 particles, β = 4 on S^1, E_β against log t, plateaus shaded;
* metastability_prediction.png: ς_l(β) and k*(β) on S^1 and S^2;
* metastability_iid.png: the first cluster count of iid particles against the white-noise theory.

``--replot`` redraws the Figure 4 analogue from DIR/summary.json with the current plotting code.
Prints the figures quoted in the page (from summary.json).
"""
import json
import pathlib
import shutil
import sys
import tempfile

IMG = pathlib.Path(__file__).resolve().parent / "img"
FIGURES = {"continuum": "continuum", "figure4": "figure4", "staircase": "staircase", "prediction": "prediction",
           "particles_iid": "iid"}


def main(argv):
    if "--from" in argv:
        out = pathlib.Path(argv[argv.index("--from") + 1])
    else:
        from meanfield.experiments import metastability

        workers = int(argv[argv.index("--workers") + 1]) if "--workers" in argv else None
        out = pathlib.Path(tempfile.mkdtemp(prefix="metastability-"))
        metastability(out, progress=True, workers=workers)
    summary = json.loads((out / "summary.json").read_text())
    res = summary["results"]
    for src, dst in FIGURES.items():
        shutil.copy(out / f"{src}.png", IMG / f"metastability_{dst}.png")
    if "--replot" in argv:                         # the figures drawn from summary.json, with today's code
        from meanfield.experiments.report import pyplot
        from meanfield.results.plotting import plot_mean_clusters

        plot_mean_clusters(res["figure4"]).savefig(IMG / "metastability_figure4.png", dpi=110)
        pyplot().close("all")
    print(f"wall time {summary['wall_time']:.0f} s; checks passed: {summary['passed']}")
    for c in summary["checks"]:
        print(f"  [{'PASS' if c['passed'] else 'FAIL'}] {c['name']}: {c['detail']}")
    for key, r in res["continuum"].items():
        print(key, "t_form", r["t_form"], "merges", [[round(m[0], 1) for m in ms] for ms in r["merges"]])
    for key, r in res["particles_quasi"].items():
        print(key, "t_form rel. diff", r["t_form_rel_diff"], "merge rel. diff", r["merge_rel_diff"])
    for key, r in res.get("particles_iid", {}).items():
        print(key, r["first_count_distribution"], {k: round(v, 2) for k, v in r["white_noise_prediction"].items()},
              "t_form median", r["t_form_median"])
    for p in res["staircase"]:
        print("staircase seed", p["seed"], [(round(q["start"], 1), round(q["end"], 1), round(q["energy"], 4),
                                             q["clusters"]) for q in p["plateaus"]])


if __name__ == "__main__":
    main(sys.argv[1:])
