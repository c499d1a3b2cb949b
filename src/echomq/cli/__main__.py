"""``python -m echomq.cli``: the same as ``emq``."""

import sys

from . import main

sys.exit(main())
