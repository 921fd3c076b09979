"""``python -m sophon_dsl.cli``: the console script."""

import sys

from . import main

sys.exit(main())
