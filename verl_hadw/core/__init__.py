"""The framework-free core of verl-hadw: HA-DW's and DGPO's options, group statistics, equations and anchor.

It imports nothing beyond torch, numpy and the standard library (``tests/core/test_core_alone.py``), and takes each
framework's option names and remedy texts as arguments (``terms.Terms``). The three adapters call it: verl's
(``verl_hadw.verl_adapter``), TRL's (``verl_hadw.trl``) and ms-swift's (``verl_hadw.swift_adapter``), the last two
through their shared package (``verl_hadw.hf_trainer``); it calls none of them.
"""
