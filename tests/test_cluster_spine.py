"""The lifecycle (tests/test_lifecycle.py) on the private cluster
(3 primaries + 3 replicas)."""

import pytest
from test_spine import *  # noqa: F403

from cluster_support import r, server  # noqa: F401  (the cluster stands in for the server)

pytestmark = pytest.mark.cluster

# Left out: count the round trips of one plain connection.
del test_enqueue_is_one_round_trip  # noqa: F821
del test_enqueue_many_in_one_round_trip  # noqa: F821
