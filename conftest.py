"""Every pytest run here (unit tests and nbval's notebook kernels) uses one numeric environment.

See tools/numeric_env.py: with it, stored notebook outputs reproduce on any x86-64 CPU; and
tools/last_digit.py: nbval forgives a printed decimal one unit off in its last digit.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "tools"))
import last_digit  # noqa: E402
import numeric_env  # noqa: E402

numeric_env.apply()  # before torch is imported by any test or kernel
last_digit.install()


def pytest_report_header(config):
    return numeric_env.describe()
