"""``python -m verl_hadw.cli``, as the launchers call it."""

import sys

from verl_hadw.cli import main

sys.exit(main())
