"""The phase-diagram workload on 2 dask workers against the serial run (target: >= 1.7x on 2 cores).

    python benchmarks/bench_sweep.py            # the full default: 10 β, B = 1024, n = 32, d = 3, t ∈ [0, 30]
    python benchmarks/bench_sweep.py --repeat 5 # alternating repeats (default 3)
    python benchmarks/bench_sweep.py --quick    # 5 β, B = 128
    python benchmarks/bench_sweep.py --figure3  # the 16 β of the paper's Figure 3 grid (0.5, 1, ..., 8)

Each measurement runs in a fresh process with the BLAS/OpenMP thread pools pinned to one thread
(the variables `meanfield.experiments.parallel.THREAD_VARIABLES`), as the workers of the local cluster
are: the serial run uses one core, the 2-worker run two. The 2-worker time includes starting the
cluster and the parts of the experiment that stay serial (the curve Γ of (6.9)); a third run uses a
cluster started, and its workers warmed up, before the clock starts (a user's running cluster,
``--scheduler``). All runs must give the same p_d(t, β) element for element. The three run in
turn, ``--repeat`` times, and each is summarised by its best and its median time: on these virtual
machines the same serial run moves by 15% from one minute to the next, more than the margin the
target leaves, and alternating puts a slow phase on all three alike. The load average is printed,
since the ratio is only meaningful on an otherwise idle machine.
"""
import json
import os
import subprocess
import sys
import time

import numpy as np


def measure(workers, quick, running, figure3=False):
    """Run the phase diagram here; print the wall time and p_d as JSON (the child process). With
    ``running``, the local cluster is started (and its workers warmed up) before the clock starts and
    passed as ``scheduler``, as a user with a running cluster does."""
    from meanfield.experiments import phase_diagram
    from meanfield.experiments.parallel import cluster

    with cluster(workers if running else None, log=None) as client:
        if client is not None:
            client.run(__import__, "solvers")
            phase_diagram(None, quick=True, betas=[1.0, 2.0], realisations=4, progress=False, scheduler=client)
        betas = np.linspace(0.5, 8.0, 16) if figure3 else None
        start = time.perf_counter()
        report = phase_diagram(None, quick=quick, betas=betas, progress=False,
                               workers=(workers or None) if client is None else None, scheduler=client)
        elapsed = time.perf_counter() - start
    print(json.dumps({"time": elapsed, "p": report.results["p"].tolist()}))


def child(workers, quick, running=False):
    from meanfield.experiments.parallel import THREAD_VARIABLES

    env = {**os.environ, **{k: "1" for k in THREAD_VARIABLES}}
    cmd = ([sys.executable, __file__, "--child", str(workers)] + (["--quick"] if quick else [])
           + (["--running"] if running else []) + (["--figure3"] if "--figure3" in sys.argv else []))
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"the run with {workers} workers failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main():
    quick = "--quick" in sys.argv
    repeat = int(sys.argv[sys.argv.index("--repeat") + 1]) if "--repeat" in sys.argv else 3
    what = "16 β of Figure 3" if "--figure3" in sys.argv else "quick" if quick else "full default"
    print(f"phase diagram ({what}), {repeat} alternating repeats; load average before: "
          f"{', '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
    labels = {"serial": "serial (1 thread)",
              "workers": "2 workers x 1 thread, the local cluster started by the run (`--workers 2`)",
              "running": "2 workers x 1 thread of a running cluster (`--scheduler`)"}
    times = {k: [] for k in labels}
    results = []
    for r in range(repeat):                       # alternating: a slow phase of the machine hits all three
        for key, (workers, running) in {"serial": (0, False), "workers": (2, False), "running": (2, True)}.items():
            res = child(workers, quick, running)
            times[key].append(res["time"])
            results.append(res["p"])
        print(f"  repeat {r + 1}: " + ", ".join(f"{k} {times[k][-1]:.1f} s" for k in labels), flush=True)
    best = {k: min(v) for k, v in times.items()}
    median = {k: float(np.median(v)) for k, v in times.items()}
    for key, label in labels.items():
        extra = "" if key == "serial" else (f"; speed-up {best['serial'] / best[key]:.2f} (best of {repeat}), "
                                             f"{median['serial'] / median[key]:.2f} (medians)")
        print(f"  {label}: best {best[key]:.1f} s, median {median[key]:.1f} s{extra}")
    same = all(np.array_equal(np.array(results[0]), np.array(p)) for p in results[1:])
    speed = best["serial"] / best["workers"]
    print(f"speed-up serial / 2 workers, the cluster's start-up included = {speed:.2f} best of {repeat} "
          f"(target >= 1.7: {'OK' if speed >= 1.7 else 'BELOW'}), {median['serial'] / median['workers']:.2f} medians; "
          f"identical p_d in every run: {same}; load average after: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    if "--child" in sys.argv:
        measure(int(sys.argv[sys.argv.index("--child") + 1]), "--quick" in sys.argv, "--running" in sys.argv,
                "--figure3" in sys.argv)
    else:
        main()
