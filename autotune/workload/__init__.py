"""The recorded workload: its format and reader, and `record` from a running Hindsight."""
