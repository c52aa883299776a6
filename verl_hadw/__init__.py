"""verl-hadw: HA-DW and DGPO advantage estimators over a framework-free core, for verl, TRL, ms-swift and Axolotl.

Importing this package does nothing heavy. ``verl_hadw.core`` needs torch and numpy only; verl's adapter
(``verl_hadw.verl``, loaded by verl's ``verl.plugins`` entry point in every process that imports verl)
registers ``hadw`` and ``dgpo``; TRL's (``verl_hadw.trl``) gives ``HadwGRPOTrainer``.
"""

__version__ = "0.1.0"
VERL_VERSION = "0.9.1"  # the verl the tests run against throughout ([gpu]'s pins; 0.9.0 has its own e2e launches)
VERL_RANGE = ">=0.9.0,<0.10"  # what the [verl] extra accepts beside an installed verl: the one place of the bounds
TRL_RANGE = ">=1.0.0,!=1.15.*,<1.17"  # what the [trl] extra accepts: the releases that passed (docs/install.md)
SWIFT_RANGE = ">=4.3.0,<4.7"  # what the [swift] extra accepts: ms-swift releases whose GRPO hook we replace
AXOLOTL_RANGE = ">=0.19.0,<0.20"  # what the [axolotl] extra accepts: the Axolotl releases the adapter is proven on
# the HF adapters (TRL's, ms-swift's, Axolotl's) override transformers' private Trainer._save_checkpoint and
# _get_output_dir: the transformers releases they passed with (each range: docs/install.md, "Tested releases")
TRANSFORMERS_RANGE = ">=4.56.2,<5.25"
