"""The lifecycle, asyncio (tests/test_lifecycle_async.py) on the private cluster
(3 primaries + 3 replicas)."""

import pytest
from test_spine_async import *  # noqa: F403

from cluster_support import r, server  # noqa: F401  (the cluster stands in for the server)

pytestmark = pytest.mark.cluster
