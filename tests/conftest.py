"""Settings for the whole suite.

Hypothesis's default 200 ms deadline per example is a timed assertion: on a loaded 2-core CI
machine it fails examples that are merely slow. Speed lives in `benches/`; here every property
test asserts behaviour only, so no example has a deadline.
"""

from hypothesis import HealthCheck, settings

settings.register_profile("dshkit", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("dshkit")
