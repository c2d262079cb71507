"""Metric histories exported as CSV: moved to :mod:`rlmetrics.readers.csvlogs`.

This path keeps working: it is the same module object (``sys.modules`` points the old name at the new
module), so ``from rlmetrics.health.csvlogs import ...`` and monkeypatching through it still
reach the code that runs.
"""

from __future__ import annotations

import sys

from rlmetrics.readers import csvlogs as _module
from rlmetrics.readers.csvlogs import *  # noqa: F403  (the names, for static checkers)
from rlmetrics.readers.csvlogs import __all__  # noqa: F401

sys.modules[__name__] = _module
