"""What explains a profile: bench, explain, efficiency, the report and the printed summaries."""
