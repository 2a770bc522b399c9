"""What decides: the space, the study, the objective, parity, measurement, statistics and the tuner."""
