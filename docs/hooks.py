"""MkDocs hook: the capability tables of the docs are made from the solver classes (`solvers.capabilities`)."""
from solvers.capabilities import fill


def on_page_markdown(markdown, **kwargs):
    return fill(markdown)
