"""Run the `meanfield` command and send it a signal when its runs say they are ready, never after a
fixed time (the tests of Ctrl-C and of SIGKILL-and-resume use it):

    python tests/signal_driver.py SIGNAL SAVES RUNS -- ARGS...
    python tests/signal_driver.py SIGNAL cells CELLS -- ARGS...

runs ``meanfield ARGS...`` in this process and sends ``SIGNAL`` (INT or KILL) to it right after a saved
time has been recorded (and its checkpoint written) when ``RUNS`` integrations have saved at least one
time and one of them at least ``SAVES``. It hooks `solvers.timestepping.IntegrationResult.save`, the
one place every stepper records a saved time. The second form sends it right after a sweep has written
its ``CELLS``-th cell (the hook is `meanfield.experiments.sweep._record`, which writes a finished cell)."""
import os
import signal
import sys
import threading

from solvers import timestepping

name, args = sys.argv[1], sys.argv[sys.argv.index("--") + 1:]
results, lock, sent = [], threading.Lock(), threading.Event()
record = timestepping.IntegrationResult.save


def send(ready):
    if ready and not sent.is_set():
        sent.set()
        os.kill(os.getpid(), getattr(signal, "SIG" + name))


def save(self, t, y, callback=None, copy=True):
    record(self, t, y, callback, copy)      # the saved time and its checkpoint first
    with lock:
        if not any(r is self for r in results):
            results.append(self)
        send(len(results) >= runs and max(len(r.t) for r in results) >= saves)


def record_cell(out, cell, result):
    status = write_cell(out, cell, result)  # the cell's files first
    with lock:
        results.append(cell)
        send(len(results) >= cells)
    return status


if sys.argv[2] == "cells":
    from meanfield.experiments import sweep

    cells, write_cell = int(sys.argv[3]), sweep._record
    sweep._record = record_cell
else:
    saves, runs = int(sys.argv[2]), int(sys.argv[3])
    timestepping.IntegrationResult.save = save

if __name__ == "__main__":
    from meanfield.cli import main

    sys.exit(main(args))
