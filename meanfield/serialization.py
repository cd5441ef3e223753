"""Plain Python for JSON: the statistics of a `Solution` in its file, the experiments' ``summary.json``."""
import math
import pathlib

import numpy as np


def jsonable(obj, strict=False):
    """Plain Python (dicts, lists, numbers) for json.dumps. ``strict``: also non-finite floats and
    paths become strings, so that the output is standard JSON (used by the experiment reports)."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v, strict) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v, strict) for v in obj]
    if isinstance(obj, np.ndarray):
        return jsonable(obj.tolist(), strict)
    if isinstance(obj, np.generic):
        obj = obj.item()
    if strict and isinstance(obj, float) and not math.isfinite(obj):
        return str(obj)
    if strict and isinstance(obj, pathlib.PurePath):
        return str(obj)
    return obj
