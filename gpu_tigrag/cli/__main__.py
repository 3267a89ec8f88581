"""`python -m gpu_tigrag.cli`: the `tigrag` command."""

import sys

from . import main

sys.exit(main())
