"""Moved to :mod:`echomq.hooks` (the core's hooks); this name stays importable.

The worker's observer moved to :mod:`echomq.observability.worker`.
"""

from __future__ import annotations

import sys

from .. import hooks as _hooks

# the same module object under both names: a tracer installed through either is seen
sys.modules[__name__] = _hooks
