"""``python -m sophon_dsl``: the ``sophon-dsl`` console script."""

import sys

from .cli import main

sys.exit(main())
