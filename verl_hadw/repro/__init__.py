"""The paper-reproduction kit: catalogue, config composition, data, reward, results (``[repro]`` extra)."""
