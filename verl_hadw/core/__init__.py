"""The framework-free core of verl-hadw: HA-DW's and DGPO's options, group statistics, equations and anchor.

It imports nothing beyond torch, numpy and the standard library (``tests/test_core_alone.py``), and takes each
framework's option names and remedy texts as arguments (``terms.Terms``). verl's adapter (``verl_hadw.verl_adapter``)
and TRL's (``verl_hadw.trl``) call it; it calls neither.
"""
