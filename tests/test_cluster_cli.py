"""The CLI (tests/test_cli.py) on the private cluster
(3 primaries + 3 replicas)."""

import pytest

from cluster_support import r, server  # noqa: F401  (the cluster stands in for the server)
from test_cli import *  # noqa: F403

pytestmark = pytest.mark.cluster

# Left out: counts plain subscribers (PUBSUB NUMSUB); sharded ones are counted by SHARDNUMSUB.
del test_events_tail_receives_progress_and_pause  # noqa: F821
