"""A tiny, verifiable RL task and the model/tokenizer to learn it, built locally (no hub access).

``task``: prompts of graded difficulty with binary rewards (pure Python: verl loads its ``compute_score``
by file path). ``assets``: a character-level tokenizer, a random tiny Qwen2 model and verl-format parquet.
"""
