"""Obliterate (tests/test_obliterate.py) on the private cluster
(3 primaries + 3 replicas)."""

import pytest

from cluster_support import r, server  # noqa: F401  (the cluster stands in for the server)
from test_obliterate import *  # noqa: F403

pytestmark = pytest.mark.cluster

# Left out: it subscribes with a plain SUBSCRIBE (events are sharded on a cluster;
# test_cluster.py checks them there).
del test_obliterate_of_an_empty_paused_queue_is_one_call  # noqa: F821
