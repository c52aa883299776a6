"""The HA-DW anchor under verl: the driver's client (``client``), its store, a Ray actor or this process
(``stores``), and how it survives a restart (``persistence``, ``checkpoint_files``, ``legacy_snapshots``)."""
