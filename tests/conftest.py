"""Shared fixtures: verl 0.9.1 as the parity reference."""

from __future__ import annotations

import logging
import warnings
from typing import Any

import pytest


@pytest.fixture(scope="session")
def verl_metric_utils() -> Any:
    """verl 0.9.1's metric_utils (the parity reference); its warnings silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from verl.trainer.ppo import metric_utils
    logging.getLogger("verl").setLevel(logging.ERROR)
    logging.getLogger(metric_utils.__name__).setLevel(logging.ERROR)
    return metric_utils


@pytest.fixture(scope="session")
def data_proto() -> Any:
    from verl import DataProto

    return DataProto
