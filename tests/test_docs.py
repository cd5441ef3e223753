"""Every ```python block of docs/*.md and README.md runs (blocks of one page in sequence, in a temp directory);
a page about an optional extra is skipped when the extra is not installed; with the `docs` extra the site
builds with `mkdocs build --strict`."""
import pathlib
import re

import pytest

DOCS = pathlib.Path(__file__).resolve().parent.parent / "docs"
PAGES = sorted(DOCS.glob("*.md")) + [DOCS.parent / "README.md"]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
NEEDS = {"fem.md": ("mpi4py.MPI", "dolfinx")}   # page: the modules of the optional extra its examples need
#                                             (mpi4py.MPI first: it loads the MPI library dolfinx links to)


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_doc_examples_run(page, tmp_path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    blocks = BLOCK.findall(page.read_text())
    if not blocks:
        pytest.skip(f"{page.name} has no python examples")
    for module in NEEDS.get(page.name, ()):
        pytest.importorskip(module, reason=f"{page.name} needs {module} (an optional extra)")
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "__docs__"}
    for i, code in enumerate(blocks):
        try:
            exec(compile(code, f"{page.name}[block {i}]", "exec"), namespace)
        except Exception as exc:  # pragma: no cover - the message is the point
            raise AssertionError(f"{page.name}, python block {i} failed: {type(exc).__name__}: {exc}") from exc
    import matplotlib.pyplot as plt

    plt.close("all")


def test_site_builds_strictly(tmp_path):
    """`mkdocs build --strict` (the `docs` extra): every page, link and API docstring parses."""
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings")
    import subprocess
    import sys

    root = pathlib.Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "site")],
                         cwd=root, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert (tmp_path / "site" / "index.html").is_file()
