"""The worker registry and cancel (tests/test_worker_registry.py) on the private cluster
(3 primaries + 3 replicas)."""

import pytest

from cluster_support import r, server  # noqa: F401  (the cluster stands in for the server)
from test_worker_registry import *  # noqa: F403

pytestmark = pytest.mark.cluster
