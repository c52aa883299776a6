"""RLVR simulator: compare ``grpo``, ``hadw`` (every anchor mode) and ``dgpo`` on a CPU in minutes (docs/analysis.md).

Synthetic prompts of latent difficulty, a logit policy, G binary rollouts per prompt in verl's batch layout,
advantages from verl's own ``compute_advantage`` and SGD on verl's token-mean loss. ``verl-hadw simulate`` runs it.
Modules: ``env``, ``methods``, ``runner``, ``report``; importing this package imports nothing heavy.
"""

__all__ = ["env", "methods", "runner", "report"]
