"""Plotly's property paths, parsed once each.

Every `fig.update_layout(title_text=...)`, `fig.add_scatter(line_color=...)` or `fig.layout["xaxis2"]`
parses its property path ("title_text" -> ("title", "text")) in plotly's
`basedatatypes._str_to_dict_path_full`: a pure function of the string that splits it on ".[]_",
builds a class per call and costs ~0.1 ms. A scenario's figures ask for a few dozen distinct paths
thousands of times per build, so the page's figure builds spent a fifth to a third of their time there
(quantization's ten figures: 0.59 -> 0.42 s, dead-relu's six: 0.44 -> 0.36 s on the 2-core machine).
`memoize()` puts an LRU cache in front of it; the results are the same tuples, and the list of
positions each caller gets is its own copy. Where plotly no longer has the function, nothing changes.
"""
import functools

import plotly.basedatatypes as basedatatypes

PATHS_KEPT = 4096


def memoize() -> bool:
    """Cache plotly's path parsing in this process (once; idempotent). True when it is cached."""
    original = getattr(basedatatypes, "_str_to_dict_path_full", None)
    if original is None:
        return False
    if getattr(original, "explorer_memoized", False):
        return True
    cached = functools.lru_cache(maxsize=PATHS_KEPT)(original)

    def parse(key_path_str):
        try:
            path, positions = cached(key_path_str)
        except TypeError:  # not hashable (a list, a dict): plotly's own error, which its callers catch
            return original(key_path_str)
        return path, list(positions)

    parse.explorer_memoized = True
    parse.original = original
    basedatatypes._str_to_dict_path_full = parse
    return True
