"""`python -m pgmemory`: the `pgmemory` command."""

import sys

from .cli import main

sys.exit(main())
