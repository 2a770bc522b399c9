"""Measuring: timing passes, memory and its guard, the noise of the host, the statistics of repeats."""
