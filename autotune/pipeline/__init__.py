"""`autotune run` as named phases over a small run context: prepare, load, pre-checks, search, refine, race,
judge, commit. It sits above `search` (which decides) and `outputs` (which writes), and joins them: the run's
record (`record.SearchResult`) and the profile that says it (`profile_doc`) are its own."""
