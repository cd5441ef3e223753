"""Checks on the test suite itself: faults that make a case silently vanish."""
import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]


def repeated_dict_keys(source, filename="<string>"):
    """`(line, key)` of every constant key that a dict literal repeats: Python keeps the last value, so the
    earlier entry (a test case, say) is dropped without a word."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Dict):
            seen = set()
            for key in node.keys:
                if isinstance(key, ast.Constant):
                    if key.value in seen:
                        found.append((key.lineno, key.value))
                    seen.add(key.value)
    return found


def test_the_detector_finds_a_repeated_key():
    assert repeated_dict_keys('CASES = {\n  "Gaussian": 1,\n  "Other": 2,\n  "Gaussian": 3,\n}\n') == [(4, "Gaussian")]
    assert repeated_dict_keys('{"a": 1, "b": {"a": 2}}') == []


def test_no_dict_literal_repeats_a_key():
    files = [p for d in ("tests", "meanfield", "solvers", "benchmarks") for p in (ROOT / d).rglob("*.py")]
    assert len(files) > 100
    hits = [f"{p.relative_to(ROOT)}:{line} {key!r}" for p in files
            for line, key in repeated_dict_keys(p.read_text(), str(p))]
    assert hits == []


def test_every_slow_case_names_a_test():
    """A renamed test would leave its `SLOW_CASES` entry matching nothing, and the test back in the
    default tier without a word."""
    from conftest import SLOW_CASES

    missing = []
    for case in sorted(SLOW_CASES):
        path, name = case.split("::")
        tree = ast.parse((ROOT / path).read_text())
        functions = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
        if name.split("[")[0] not in functions:
            missing.append(case)
    assert len(SLOW_CASES) > 10 and missing == []
