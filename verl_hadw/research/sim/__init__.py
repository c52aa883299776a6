"""RLVR simulator: compare ``grpo``, ``hadw`` (every anchor mode) and ``dgpo`` on a CPU in minutes.

A synthetic prompt population with latent difficulty, a logit policy with per-prompt logits and a shared
skill, G binary rollouts per prompt in verl's batch layout (uids, shuffled rows, padding rows, token masks),
advantages from verl's own ``ray_trainer.compute_advantage`` and SGD on verl's token-mean loss.
``verl-hadw simulate`` runs it (``verl_hadw.cli.simulate_cmd``). Modules: ``env`` (environment, policy,
batches, loss), ``methods`` (the compared configurations and suites), ``runner`` (runs), ``report``
(aggregation, CSV, PNG). Importing this package imports nothing heavy.
"""

__all__ = ["env", "methods", "runner", "report"]
