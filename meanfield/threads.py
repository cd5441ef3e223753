"""One thread control for every solver, distance and experiment (docs/threads.md).

Every place that can use several cores takes ``threads``: the solvers' constructors (ducc0's
transforms, the kernel sums' blocks, numba's fused sums), `meanfield.kernel_distance`,
`meanfield.observables.wasserstein`, the diagnostics, ``--threads`` of every ``meanfield`` command and ``threads``
in the ``[solver]`` table of a TOML configuration. ``threads=None`` means `default_threads`:

1. the value of the innermost ``with use_threads(n):`` block (``--threads n`` is one around the command),
2. else the environment variable ``MEANFIELD_THREADS``,
3. else ``OMP_NUM_THREADS``,
4. else the number of CPUs this process may run on.

BLAS is pinned to one thread while a solver runs (`blas_single_threaded`): the library's own threads
share the work, and OpenBLAS threads that wait by spinning between two small matrix products would
take the cores from them (a harmonics run on one thread burned twice its wall time in CPU). ``--workers``
is another thing: dask worker processes, each on one thread.
"""
import contextlib
import contextvars
import os
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor

from threadpoolctl import ThreadpoolController

from .validation import check_int
from .errors import InvalidInput

_CHOSEN = contextvars.ContextVar("meanfield_threads", default=None)
ENVIRONMENT = ("MEANFIELD_THREADS", "OMP_NUM_THREADS")


def machine_threads():
    """The number of CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:                                      # not Linux
        return max(1, os.cpu_count() or 1)


def default_threads():
    """The number of threads of ``threads=None`` (module docstring: `use_threads`, ``MEANFIELD_THREADS``,
    ``OMP_NUM_THREADS``, the CPUs).

    Returns
    -------
    int
        At least 1.

    Examples
    --------
    >>> import meanfield as mf
    >>> with mf.use_threads(3):
    ...     mf.default_threads()
    3
    """
    chosen = _CHOSEN.get()
    if chosen is not None:
        return chosen
    for name in ENVIRONMENT:
        value = os.environ.get(name, "").split(",")[0].strip()
        if value.isdigit() and int(value) >= 1:
            return int(value)
    return machine_threads()


def check_threads(threads, name="threads"):
    """``threads`` as an int >= 1 (None: `default_threads`); ValueError naming ``name`` otherwise."""
    return default_threads() if threads is None else check_int(threads, name, low=1)


@contextlib.contextmanager
def use_threads(threads):
    """``with use_threads(n):`` every ``threads=None`` inside (solvers built, distances computed) means
    ``n`` threads; None leaves it as it is (the enclosing block's, or the environment's).

    Parameters
    ----------
    threads : int >= 1 or None
        The number of threads inside the block.

    Raises
    ------
    ValueError
        ``threads`` not an integer >= 1 (or None).

    Examples
    --------
    >>> import meanfield as mf
    >>> with mf.use_threads(2):
    ...     with mf.use_threads(None):
    ...         print(mf.default_threads())
    2
    """
    if threads is None:
        yield
        return
    token = _CHOSEN.set(check_int(threads, "threads", low=1))
    try:
        yield
    finally:
        _CHOSEN.reset(token)


SHARE_LMAX = 96     # ducc0's spherical-harmonic transforms share their work among threads from this degree


def transform_threads(threads, lmax):
    """The threads of one ducc0 spherical-harmonic transform of degree ``lmax``: ``threads`` from
    `SHARE_LMAX` on, else 1. ducc0 starts its threads at each call (about 20 µs), more than a small
    transform takes: on two threads a synthesis at lmax 16 took 26 µs against 9 µs on one, at lmax 64
    as long, at lmax 128 1.3× (analysis 1.6×) faster, at 255 1.4× (1.8×)."""
    return int(threads) if lmax >= SHARE_LMAX else 1


_STOP = contextvars.ContextVar("meanfield_stop", default=None)


@contextlib.contextmanager
def stop_on(event):
    """Inside, a run stops at its next step once ``event`` (a `threading.Event`) is set, as on Ctrl-C:
    `meanfield.Interrupted`, with the saved times so far in ``exc.solution``. Python delivers Ctrl-C
    to the main thread only; this is how it reaches runs on other threads (`map_tasks` on threads)."""
    token = _STOP.set(event)
    try:
        yield
    finally:
        _STOP.reset(token)


def stop_event():
    """The event of the innermost `stop_on` block, or None."""
    return _STOP.get()


_BLAS = {"controller": None, "users": 0, "saved": None}
_BLAS_LOCK = threading.Lock()


@contextlib.contextmanager
def blas_single_threaded():
    """BLAS on one thread while the library's own threads run (module docstring): a threaded BLAS under
    each of them would oversubscribe the cores (d = 32, n = 20 000, 2 threads: 2.1 s per kernel sum
    instead of 0.9 s). Nested and concurrent uses share one limit, lifted when the last one ends."""
    with _BLAS_LOCK:
        if _BLAS["users"] == 0:
            threaded = any(lib.num_threads > 1 for lib in _blas().lib_controllers)
            _BLAS["saved"] = _limit(1) if threaded else None
        _BLAS["users"] += 1
    try:
        yield
    finally:
        with _BLAS_LOCK:
            _BLAS["users"] -= 1
            if _BLAS["users"] == 0 and _BLAS["saved"] is not None:
                _restore(_BLAS["saved"])
                _BLAS["saved"] = None


@contextlib.contextmanager
def blas_threads(threads):
    """BLAS on ``threads`` threads inside (None: left as it is). ``--threads n`` holds the whole
    command to it, so that its BLAS outside the runs (eigenvalues, fits) does not take more cores."""
    if threads is None:
        yield
        return
    threads = check_int(threads, "threads", low=1)
    with _BLAS_LOCK:
        limiter = _limit(threads)
    try:
        yield
    finally:
        with _BLAS_LOCK:
            _restore(limiter)


def _blas():
    """threadpoolctl's controller of the BLAS libraries loaded (made once)."""
    if _BLAS["controller"] is None:
        _BLAS["controller"] = ThreadpoolController()
    return _BLAS["controller"].select(user_api="blas")


def _limit(threads):
    """BLAS on ``threads`` threads, from whichever thread asks (`_free_openblas`); its limiter. Under _BLAS_LOCK."""
    _free_openblas()
    limiter = _blas().limit(limits=threads)
    _free_openblas()
    return limiter


def _restore(limiter):
    """BLAS back to what ``limiter`` found, from whichever thread asks. Under _BLAS_LOCK."""
    _free_openblas()
    limiter.restore_original_limits()
    _free_openblas()


def _free_openblas():
    """Let the next thread that sets OpenBLAS's thread count set it. threadpoolctl >= 3.8 lets only the
    first thread that set it change it again and silently ignores the others, so a run on one thread
    that ends while another starts left OpenBLAS on all its threads (two β runs on two threads went
    0.8× as fast as one after the other). `blas_single_threaded` serialises its own changes, so it
    takes the control for each of them and gives it back."""
    try:
        from threadpoolctl import OpenBLASController
    except ImportError:                             # threadpoolctl < 3.8: any thread may set it
        return
    clear = getattr(OpenBLASController, "clear_controlling_thread", None)
    if clear is not None:
        clear(force=True)


def renamed_threads(threads, nthreads):
    """``threads``, or the older spelling ``nthreads`` (a FutureWarning): one thread control."""
    if nthreads is None:
        return threads
    if threads is not None:
        raise InvalidInput(f"give `threads` only (`nthreads` is its older name), got threads={threads!r} and "
                         f"nthreads={nthreads!r}.")
    warnings.warn("`nthreads` is now called `threads` (one thread control, docs/threads.md).", FutureWarning,
                  stacklevel=3)
    return check_int(nthreads, "nthreads", low=1)


_POOLS = {}
_POOLS_LOCK = threading.Lock()


def _pool(workers):
    with _POOLS_LOCK:
        pool = _POOLS.get(workers)
        if pool is None:
            pool = _POOLS[workers] = ThreadPoolExecutor(workers, thread_name_prefix="meanfield")
        return pool


_SHARING = threading.local()          # set while a thread works on a part of `share_out`


def share_out(work, parts, threads):
    """work(part) for every part, on the calling thread and ``threads − 1`` pool threads, each taking
    the next part when it is free (no thread waits idle for another while parts remain). The pools
    live for the process (one per size); a forked child starts without them. Called from inside a
    part (work that shares out its own parts), it runs them on its thread: the outer parts already
    hold the threads, and a pool thread waiting for its own pool would wait for ever."""
    if getattr(_SHARING, "inside", False) or threads <= 1:
        for part in parts:
            work(part)
        return
    lock, queue = threading.Lock(), iter(parts)

    def drain():
        _SHARING.inside = True
        try:
            while True:
                with lock:
                    part = next(queue, None)
                if part is None:
                    return
                work(part)
        finally:
            _SHARING.inside = False

    helpers = [_pool(threads - 1).submit(drain) for _ in range(threads - 1)]
    try:
        drain()
    finally:
        for h in helpers:
            h.result()


if hasattr(os, "register_at_fork"):                             # a forked child has none of the parent's threads
    os.register_at_fork(after_in_child=_POOLS.clear)
