"""Pictures for docs/experiments.md (run once; the PNGs under docs/img/ are committed).

    python docs/make_experiments_figures.py [--quick] [run] [prop34] [mfl] [phase]

(default: all four groups)

Runs each experiment into a temporary directory and copies its pictures to
docs/img/experiments_*.png:

* experiments_run.png                       meanfield run examples/circle.toml
* experiments_prop34_{coefficients,landscape,flows,designs}.png   verify-prop34 (full settings)
* experiments_mean_field_limit_d{2,3}.png   mean-field-limit (--quick settings)
* experiments_phase_diagram.png             phase-diagram (full settings: d = 3, n = 32, B = 1024, 10 β)
"""
import os
import pathlib
import shutil
import sys
import tempfile

os.environ.setdefault("MPLBACKEND", "Agg")

from meanfield.experiments import mean_field_limit, phase_diagram, run, verify_prop34  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
IMG = ROOT / "docs" / "img"


def copy(src_dir, name, target):
    shutil.copyfile(pathlib.Path(src_dir) / name, IMG / target)
    print("wrote", IMG / target)


def main(quick=False, groups=("run", "prop34", "mfl", "phase")):
    IMG.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        if "run" in groups:
            run(ROOT / "examples" / "circle.toml", tmp / "run", progress=False)
            copy(tmp / "run", "circle.png", "experiments_run.png")
        if "prop34" in groups:
            verify_prop34(tmp / "p34", quick=quick, progress=False)
            for part in ("coefficients", "landscape", "flows", "designs"):
                copy(tmp / "p34", f"{part}.png", f"experiments_prop34_{part}.png")
        if "mfl" in groups:
            mean_field_limit(tmp / "mfl", quick=True, progress=False)
            for d in (2, 3):
                copy(tmp / "mfl", f"mean_field_limit_d{d}.png", f"experiments_mean_field_limit_d{d}.png")
        if "phase" in groups:
            phase_diagram(tmp / "pd", quick=quick, progress=False)
            copy(tmp / "pd", "phase_diagram.png", "experiments_phase_diagram.png")


if __name__ == "__main__":
    args = sys.argv[1:]
    chosen = tuple(a for a in args if not a.startswith("--")) or ("run", "prop34", "mfl", "phase")
    main(quick="--quick" in args, groups=chosen)
