"""Research tools: the bias theory, the RLVR simulator and plotting (``[research]`` extra)."""
