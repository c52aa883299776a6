"""Tiny, verifiable RL tasks and the models/tokenizers to learn them, built locally (no hub access).

``task``: prompts of graded difficulty with binary rewards, ``arith``: sums and products by difficulty (pure Python:
verl loads their ``compute_score`` by file path). ``assets``: a character-level tokenizer, a model (the toy's random,
``arith_model``'s pretrained) and verl-format parquet.
"""

TASKS = ("toy", "arith")  # toy: verl_hadw.toy.task from random weights; arith: verl_hadw.toy.arith, pretrained


def task_module(name: str):
    """The module of a task: ``toy`` (verl_hadw.toy.task) or ``arith`` (verl_hadw.toy.arith)."""
    if name == "arith":
        from verl_hadw.toy import arith

        return arith
    if name == "toy":
        from verl_hadw.toy import task

        return task
    raise ValueError(f"unknown task {name!r}; choose {' or '.join(TASKS)}")
