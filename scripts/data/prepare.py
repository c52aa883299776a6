#!/usr/bin/env python3
"""Prepare the reproductions' parquet files; the same as `verl-hadw data` (see verl_hadw/data.py).

    python scripts/data/prepare.py --out data                     # Hugging Face Hub (or its cache)
    python scripts/data/prepare.py --out data --source aime25=/mnt/aime_2025.jsonl ...   # local copies
"""

import sys

from verl_hadw.cli import main

if __name__ == "__main__":
    sys.exit(main(["data", *sys.argv[1:]]))
