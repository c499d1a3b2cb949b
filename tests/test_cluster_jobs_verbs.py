"""The operator plane, job scope (tests/test_jobs_verbs.py) on the private cluster
(3 primaries + 3 replicas)."""

import pytest

from cluster_support import r, server  # noqa: F401  (the cluster stands in for the server)
from test_jobs_verbs import *  # noqa: F403

pytestmark = pytest.mark.cluster

# Left out: they subscribe with a plain SUBSCRIBE (events are sharded on a cluster;
# test_cluster.py checks them there).
del test_progress_subscriber_receives_exactly_the_event  # noqa: F821
del test_progress_of_a_missing_job_publishes_nothing  # noqa: F821
