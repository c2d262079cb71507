"""Metrics read back from console text: moved to :mod:`rlmetrics.readers.textlogs`.

This path keeps working: it is the same module object (``sys.modules`` points the old name at the new
module), so ``from rlmetrics.health.textlogs import ...`` and monkeypatching through it still
reach the code that runs.
"""

from __future__ import annotations

import sys

from rlmetrics.readers import textlogs as _module
from rlmetrics.readers.textlogs import *  # noqa: F403  (the names, for static checkers)
from rlmetrics.readers.textlogs import __all__  # noqa: F401

sys.modules[__name__] = _module
