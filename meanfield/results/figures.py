"""The furniture every picture shares: one style (`STYLE`, `pyplot`, `style`, `save`), the labels and
titles that name the model, the resolution and why a run stopped (`run_title`, `mark_stop`), the
colour scales of densities (`colour_scale`: "linear", "log" and "perturbation", ρ − 1 on a symmetric
logarithmic scale, docs/mathematics.md §5) and the choice of saved times. The pictures of a run are
`meanfield.results.plotting`'s; the experiments' pictures sit beside the experiments.
"""
import contextlib
import math
import os
import textwrap

import numpy as np

from ..errors import InvalidInput

SCALES = ("auto", "linear", "log", "perturbation")

# fonts, sizes and resolution of every picture the library writes (golden-image tests rely on them)
STYLE = {
    "font.family": ["DejaVu Sans"],
    "font.size": 10.0,
    "axes.titlesize": "medium",
    "figure.titlesize": "large",
    "legend.fontsize": "small",
    "figure.dpi": 100.0,
    "savefig.dpi": 110.0,
    "image.cmap": "magma",
    "svg.hashsalt": "meanfield",
}
WIDTH = 12.0          # inches, every run picture

_STOP_COLOUR = "C3"


# -- style ------------------------------------------------------------------------------------------
def pyplot():
    """matplotlib.pyplot with a non-interactive backend unless a display is configured."""

    import matplotlib  # deferred: matplotlib is heavy

    chosen = getattr(matplotlib.rcParams, "_get_backend_or_none", lambda: None)()
    if chosen is None and not (os.environ.get("DISPLAY") or os.environ.get("MPLBACKEND")):
        matplotlib.use("Agg")           # headless and no backend chosen (a notebook has chosen its own)
    import matplotlib.pyplot as plt  # deferred: matplotlib is heavy

    return plt


@contextlib.contextmanager
def style():
    """Context in which figures are made and saved in the library's style (`STYLE`)."""
    import matplotlib  # deferred: matplotlib is heavy

    with matplotlib.rc_context(STYLE):
        yield


def save(fig, path, dpi=None):
    """Write ``fig`` (PNG/PDF/SVG by the suffix) in the library's style, ``dpi`` default `STYLE`."""
    with style():
        fig.savefig(path, dpi=STYLE["savefig.dpi"] if dpi is None else dpi, metadata=_metadata(path))


def _metadata(path):
    suffix = str(path).rsplit(".", 1)[-1].lower()
    return {"Software": "meanfield"} if suffix == "png" else None


# -- labels -----------------------------------------------------------------------------------------
def model_label(model):
    """``(SA) β = 4, V = I, d = 2, ν = 0``: the model (docs/mathematics.md §1) in one line."""
    if model.is_zonal:
        v = model.v
        V = "I" if v == 1 else "−I" if v == -1 else f"{v:g} I"
    else:
        V = f"general Q, K, V ({len(model.heads)} head{'s' if len(model.heads) > 1 else ''})"
    slopes = ", ".join(f"{lam:g}" for lam in dict.fromkeys(model.position_biases))
    mask = f", {model.mask} mask, λ = {slopes}" if model.is_causal else ""
    return f"({model.kind}) β = {model.beta:g}, V = {V}, d = {model.dim}, ν = {model.noise:g}{mask}"


def resolution_label(rep, data=None):
    """The resolution of a representation: ``K = 256 modes``, ``lmax = 63``, ``n = 500 particles``..."""
    return rep.resolution_label(data)


def stop_reason(sol, width=90):
    """The first line of a stopped run's message, shortened to ``width`` characters."""
    text = (sol.message or "stopped").strip().splitlines()[0]
    return text if len(text) <= width else text[:width - 1] + "…"


def run_title(sol, t_end=None):
    """Two lines: solver, model and resolution; then whether the run reached its end."""
    solver = sol.solver or sol.representation.name
    head = f"{solver}: {model_label(sol.model)}; {resolution_label(sol.representation, sol.data)}"
    if not sol.t.size:
        return head
    t_stop = float(sol.t[-1])
    if sol.status != 0:
        of = f" of {t_end:g}" if t_end is not None else ""
        return f"{head}\nSTOPPED at t = {t_stop:.4g}{of}: {stop_reason(sol)}"
    return f"{head}\nt from {float(sol.t[0]):g} to {t_stop:g}, {sol.t.size} saved times"


def suptitle(fig, text, stopped=False):
    """The figure title in the library's style (red when the run stopped early), a line wider than the
    figure wrapped at the words (`fit_to_width`), so that a long title is not clipped at both ends."""
    return fit_to_width(fig.suptitle(text, color=_STOP_COLOUR if stopped else "k", fontsize="large"), fig)


def fit_to_width(artist, fig, fill=0.96):
    """Wrap each line of the Text ``artist`` that is wider than ``fill`` of the figure at the words, to as
    many characters as fit (measured with the figure's renderer; 0.6 em a character where there is none).
    Lines that fit are left as they are. Returns the artist."""
    lines = artist.get_text().splitlines()
    room = fill * fig.bbox.width
    try:
        renderer = fig.canvas.get_renderer()
    except AttributeError:
        renderer = None
    out = []
    for line in lines:
        if renderer is not None:
            artist.set_text(line)
            width = artist.get_window_extent(renderer).width
        else:
            width = len(line) * 0.6 * artist.get_fontsize() * fig.dpi / 72
        chars = max(20, int(len(line) * room / width)) if width > room else 0
        out.append(textwrap.fill(line, chars, break_long_words=False, break_on_hyphens=False) if chars else line)
    artist.set_text("\n".join(out))
    return artist


def requested_end(sol, t_end):
    if t_end is None:
        t_end = sol.stats.get("t_requested")
    return None if t_end is None else float(t_end)


def mark_stop(ax, sol, t_end=None, axis="x"):
    """Mark on ``ax`` (time along ``axis``, "x" or "y") that ``sol`` stopped early: a red dashed line
    at its last saved time with the reason, and the times it did not reach (up to ``t_end``, by
    default the requested end in ``sol.stats``) hatched. Returns the line, or None for a finished run."""
    if sol.status == 0 or not sol.t.size:
        return None
    t_stop = float(sol.t[-1])
    t_end = requested_end(sol, t_end)
    horizontal = axis == "y"
    line_fn = ax.axhline if horizontal else ax.axvline
    line = line_fn(t_stop, color=_STOP_COLOUR, ls="--", lw=1.5, label=f"stopped at t = {t_stop:.4g}")
    if t_end is not None and t_end > t_stop:
        span = ax.axhspan if horizontal else ax.axvspan
        span(t_stop, t_end, facecolor="0.9", edgecolor="0.6", hatch="//", lw=0, zorder=0.5,
             label="not computed")
        (ax.set_ylim if horizontal else ax.set_xlim)(*time_limits(sol, t_end))
    text = f"stopped at t = {t_stop:.4g}: {stop_reason(sol, 48)}"
    if horizontal:
        ax.annotate(text, xy=(0.02, t_stop), xycoords=("axes fraction", "data"), xytext=(0, 3),
                    textcoords="offset points", color=_STOP_COLOUR, fontsize="small", va="bottom",
                    bbox=dict(facecolor="white", edgecolor="none", alpha=0.8, pad=1))
    else:
        lo, hi = ax.get_xlim()
        wide = t_end is not None and (t_end - t_stop) >= 0.4 * (hi - lo)
        text = text.replace(": ", ":\n", 1) if wide else text
        ax.annotate(text, xy=(t_stop, 0.85 if wide else 0.5), xycoords=("data", "axes fraction"), xytext=(4 if wide else -3, 0),
                    textcoords="offset points", color=_STOP_COLOUR, fontsize="small", rotation=0 if wide else 90,
                    ha="left" if wide else "right", va="center",
                    bbox=dict(facecolor="white", edgecolor="none", alpha=0.8, pad=1))
    return line


def time_limits(sol, t_end=None):
    t0, t1 = float(sol.t[0]), float(sol.t[-1])
    if t_end is not None:
        t1 = max(t1, t_end)
    return (t0, t1) if t1 > t0 else (t0 - 0.5, t0 + 0.5)


# -- colour scales ----------------------------------------------------------------------------------
def check_scale(scale):
    if scale is None:
        return "auto"
    if scale not in SCALES:
        raise InvalidInput(f"`scale` must be one of {', '.join(repr(s) for s in SCALES)}, got {scale!r}.")
    return scale


def auto_scale(values):
    """"perturbation" when the first row (the initial state) is within 0.5 of the uniform ρ = 1;
    else "log" when the largest value exceeds 20 times the median; else "linear"."""
    v = np.asarray(values, dtype=float)
    first = v[0] if v.ndim >= 2 else v
    first = first[np.isfinite(first)]
    if first.size and float(np.max(np.abs(first - 1.0))) <= 0.5:
        return "perturbation"
    finite = v[np.isfinite(v)]
    positive = finite[finite > 0]
    if positive.size and float(finite.max()) > 20.0 * float(np.median(positive)):
        return "log"
    return "linear"


def colour_scale(values, scale="auto"):
    """(values to draw, matplotlib norm, colour map, colour-bar label, colour-bar ticks or None) for
    density values ``values``
    (rows: saved times or maps). ``scale``: "linear" (ρ from min(0, min ρ)), "log" (ρ over at most six
    decades below its maximum; empty cells a decade below the faintest occupied one), "perturbation" (ρ − 1 on a symmetric log scale whose linear part is
    a third of the smallest row amplitude max|ρ − 1|, so the initial perturbation shows, from
    max(−1, −max|ρ − 1|) to max|ρ − 1| with 0 at the centre of the colour map: `two_sided_symlog`),
    or "auto" (`auto_scale`)."""
    from matplotlib.colors import LogNorm, Normalize  # deferred: matplotlib is heavy

    scale = check_scale(scale)
    v = np.asarray(values, dtype=float)
    finite = v[np.isfinite(v)]
    if not finite.size:
        finite = np.zeros(1)
    if scale == "auto":
        scale = auto_scale(v)
    top = float(finite.max())
    if scale == "linear":
        low = min(0.0, float(finite.min()))
        return v, Normalize(vmin=low, vmax=top if top > low else low + 1.0), "magma", r"$\rho$", None
    if scale == "log":
        top = top if top > 0 else 1.0
        positive = finite[finite > 0]
        floor = max(top * 1e-6, float(positive.min()) if positive.size else top * 1e-6)
        if positive.size < finite.size:                 # empty cells: a decade below the faintest one
            floor /= 10.0
        floor = min(floor, top / 10.0)
        return np.clip(v, floor, None), LogNorm(vmin=floor, vmax=top), "magma", r"$\rho$ (log scale)", None
    delta = v - 1.0
    a = float(np.nanmax(np.abs(delta))) if np.isfinite(delta).any() else 0.0
    a = a if a > 0 else 1e-12
    rows = np.abs(delta).reshape(delta.shape[0], -1) if delta.ndim >= 2 else np.abs(delta)[None]
    amp = np.nanmax(rows, axis=1)
    amp = amp[np.isfinite(amp) & (amp > 0)]
    smallest = float(amp.min()) if amp.size else a
    linthresh = float(np.clip(smallest / 3.0, a * 1e-6, a))
    low = -min(a, 1.0)                                   # ρ >= 0, so ρ − 1 >= −1
    norm = two_sided_symlog(linthresh, low, a)
    decades = np.arange(math.ceil(np.log10(linthresh) - 1e-9), math.floor(np.log10(a) + 1e-9) + 1)
    decades = decades[::max(1, math.ceil(decades.size / 4))]
    ticks = np.concatenate([-10.0 ** decades[::-1], [0.0], 10.0 ** decades])
    ticks = ticks[ticks >= low * (1 + 1e-12)]
    label = r"$\rho - 1$ (symmetric log scale, linear for $|\rho - 1| <$" + f" {linthresh:.2g})"
    return np.clip(delta, low, None), norm, "RdBu_r", label, ticks


def two_sided_symlog(linthresh, low, high):
    """A matplotlib norm for ρ − 1 in [low, high] (low < 0 < high): the symmetric log
    g(x) = sign(x)·log10(1 + |x|/linthresh), scaled separately on each side so that 0 is the centre of a
    diverging colour map and the colour bar runs from ``low`` to ``high`` only."""
    from matplotlib.colors import FuncNorm  # deferred: matplotlib is heavy

    def g(x):
        return np.sign(x) * np.log10(1.0 + np.abs(x) / linthresh)

    def g_inv(y):
        return np.sign(y) * linthresh * (10.0 ** np.abs(y) - 1.0)

    gl, gh = -float(g(low)), float(g(high))

    def forward(x):
        y = g(np.asarray(x, dtype=float))
        return np.where(y < 0, y / gl, y / gh)

    def inverse(y):
        y = np.asarray(y, dtype=float)
        return g_inv(np.where(y < 0, y * gl, y * gh))

    return FuncNorm((forward, inverse), vmin=low, vmax=high)


# -- selection of saved times -----------------------------------------------------------------------
def select_times(t, times):
    """Saved indices for ``times``: None -> first, middle, last; ints -> indices; floats -> nearest saved times."""
    t = np.asarray(t, dtype=float)
    T = t.size
    if times is None:
        return sorted({0, T // 2, T - 1})
    arr = np.atleast_1d(np.asarray(times))
    if arr.size == 0:
        raise InvalidInput("`times` must select at least one saved time.")
    if np.issubdtype(arr.dtype, np.integer):
        if np.any(arr < -T) or np.any(arr >= T):
            raise InvalidInput(f"`times` as indices must lie in [-{T}, {T - 1}], got {arr.tolist()}.")
        return [int(i) % T for i in arr]
    arr = arr.astype(float)
    if not np.all(np.isfinite(arr)):
        raise InvalidInput("`times` must be finite.")
    return [int(np.argmin(np.abs(t - s))) for s in arr]


def legend(ax, **kwargs):
    """``ax.legend`` with each label once (the first handle that carries it)."""
    handles, labels = ax.get_legend_handles_labels()
    seen = {}
    for h, lab in zip(handles, labels):
        seen.setdefault(lab, h)
    return ax.legend(list(seen.values()), list(seen), **kwargs)
