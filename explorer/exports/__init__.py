"""Exports: a run written to files (`files`) and the page's zip bundle (`bundle`)."""
