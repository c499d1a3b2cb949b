"""Deprecated: the lifecycle's plans moved to :mod:`echomq.lifecycle` (0.2).

``echomq.spine`` names that package, with a :class:`DeprecationWarning`, for one minor
version.
"""

from __future__ import annotations

import sys
import warnings

from . import lifecycle as _lifecycle

warnings.warn("echomq.spine is deprecated: use echomq.lifecycle", DeprecationWarning, stacklevel=2)
sys.modules[__name__] = _lifecycle
