"""The console's API (tests/test_console_api.py) on the private cluster
(3 primaries + 3 replicas)."""

import pytest

from cluster_support import r, server  # noqa: F401  (the cluster stands in for the server)
from test_console_api import *  # noqa: F403

pytestmark = pytest.mark.cluster

# Left out: it scans one node with a plain client (test_cluster.py walks the cluster).
del test_directory_scan_is_bounded_and_forgets_obliterated  # noqa: F821
