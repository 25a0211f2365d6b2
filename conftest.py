"""Every pytest run here (unit tests and nbval's notebook kernels) uses one numeric environment.

See tools/numeric_env.py: with it, stored notebook outputs reproduce on any x86-64 CPU; and
tools/last_digit.py: nbval forgives a printed decimal one unit off in its last digit.
Property tests (hypothesis) are derandomized: the same examples on every run.
"""
import os
import sys
from pathlib import Path

from hypothesis import settings

sys.path.insert(0, str(Path(__file__).parent / "tools"))
import last_digit  # noqa: E402
import numeric_env  # noqa: E402

numeric_env.apply()  # before torch is imported by any test or kernel
last_digit.install()

# Property tests draw the same examples on every run, so CI cannot fail on a draw no one changed;
# HYPOTHESIS_PROFILE=explore draws fresh ones (run it after changing the code they test).
settings.register_profile("course", derandomize=True, database=None)
settings.register_profile("explore", database=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "course"))


def pytest_report_header(config):
    return numeric_env.describe()
