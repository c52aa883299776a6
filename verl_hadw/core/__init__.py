"""The framework-free core of verl-hadw: options, group statistics, the estimators and the anchor, for the verl,
TRL, ms-swift and Axolotl adapters. It imports nothing beyond torch, numpy and the standard library."""
