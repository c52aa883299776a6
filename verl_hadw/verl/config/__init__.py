"""verl's config as the adapter reads it: the run's options, read once per estimator call (``run_options``), and the
checks run once per configuration (``checks``)."""
