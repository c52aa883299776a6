"""verl's config as this adapter reads it: once per estimator call (``call_config.read_call``), parsed with the core's
parser (``run_options``), checked once per configuration (``checks``: near-miss sections, unused options, an anchor
nobody saves; ``dynamic_sampling`` and ``gdpo_slip``: combinations refused at start-up). Imports the core, verl's
words (``verl_terms``) and the process state; nothing of the anchor's home."""
