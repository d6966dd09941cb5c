"""Settings and fixtures for the whole suite.

Hypothesis's default 200 ms deadline per example is a timed assertion: on a loaded 2-core CI
machine it fails examples that are merely slow. Speed lives in `benches/`; here every property
test asserts behaviour only, so no example has a deadline.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("dshkit", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("dshkit")


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """The URL of a database in a private PostgreSQL cluster started for this test run."""
    from postgres_server import server_or_skip

    yield from server_or_skip()
