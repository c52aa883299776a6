"""``reward.custom_reward_function.path: pkg://verl_hadw.reward``: the reproductions' reward, by its stable name.

The implementation is ``verl_hadw.repro.reward`` (needs the ``repro`` extra for math-verify); this module keeps
the path that run configs and users already wrote.
"""

from verl_hadw.repro.reward import compute_score  # noqa: F401

__all__ = ["compute_score"]
