"""Griffe extension: the API pages show the shared docstring fragments filled in, as Python does at
import time (`meanfield._docs.fill_doc`; a docstring's ``{threads}`` line, for instance)."""
import griffe

from meanfield._docs import PLACEHOLDER, fill_doc


class FillFragments(griffe.Extension):
    def on_object(self, *, obj, **kwargs):
        if obj.docstring is not None and PLACEHOLDER.search(obj.docstring.value):
            obj.docstring.value = fill_doc(obj.docstring.value)
