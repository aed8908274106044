"""Pure PyTorch engines: models, data, the instrumented training loop and its probes.

Nothing in this package knows that a UI exists: no streamlit, no plotly. Engines take
tensors and modules in and hand plain floats out, so each one runs in a bare pytest
process or a notebook.
"""
