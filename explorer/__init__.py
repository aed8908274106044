"""Everything a person touches: pages, controls, the live view, the run manager, the run
store, exports and the command line (`python -m explorer`)."""
