"""No function or method of `meanfield` and `solvers` is longer than 80 lines, its docstring included
(issue 46: a reader holds a function whole); a longer one is split along its seams into named helpers."""
import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
LIMIT = 80
PENDING = set()             # functions not yet split (none)


def _long_functions(root):
    """["path:name (lines)"] of the functions of the two packages longer than LIMIT lines."""
    out = []
    for pkg in ("meanfield", "solvers"):
        for path in sorted((root / pkg).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    lines = node.end_lineno - node.lineno + 1
                    if lines > LIMIT:
                        out.append(f"{path.relative_to(root).as_posix()}:{node.name} ({lines})")
    return out


def test_no_function_is_longer_than_80_lines():
    long = [f for f in _long_functions(ROOT) if f.split(" ")[0] not in PENDING]
    assert not long, f"functions over {LIMIT} lines (split them along their seams): {long}"


def test_the_check_finds_a_long_function(tmp_path):
    (tmp_path / "meanfield").mkdir()
    (tmp_path / "solvers").mkdir()
    body = "".join(f"    x{i} = {i}\n" for i in range(LIMIT))
    (tmp_path / "meanfield" / "m.py").write_text(f"def short():\n    return 1\n\n\ndef long():\n{body}")
    assert _long_functions(tmp_path) == [f"meanfield/m.py:long ({LIMIT + 1})"]
