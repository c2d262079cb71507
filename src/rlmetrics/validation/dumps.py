"""Validation rollout dumps: moved to :mod:`rlmetrics.readers.dumps`.

This path keeps working: it is the same module object (``sys.modules`` points the old name at the new
module), so ``from rlmetrics.validation.dumps import ...`` and monkeypatching through it still
reach the code that runs.
"""

from __future__ import annotations

import sys

from rlmetrics.readers import dumps as _module
from rlmetrics.readers.dumps import *  # noqa: F403  (the names, for static checkers)
from rlmetrics.readers.dumps import __all__, _Coded  # noqa: F401

sys.modules[__name__] = _module
