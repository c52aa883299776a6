"""Where the HA-DW anchor lives under verl: the driver's client (``anchor_client``), its store (``anchor_stores``: a
named Ray actor or this process), its persistence (``anchor_persistence``) with the two back-ends (``checkpoint_files``:
the v1 callback's ``global_step_N/verl_hadw_anchor.json``; ``legacy_snapshots``: per-step snapshots where verl has no
checkpoint hook), the folder verl resumes from (``resume_dir``) and DGPO's options record (``estimator_record``).
Reads verl's config only as the config package hands it over (``config.call_config.CallConfig``)."""
