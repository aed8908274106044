"""Runs: a page run's handle (`handle`), the warm worker pool and its workers (`pool`, `worker`,
`processes`), the run store (`store`, `store_schema`) and the one serve-or-train rule (`serving`)."""
