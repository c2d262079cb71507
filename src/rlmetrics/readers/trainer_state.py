"""``trainer_state.json`` of TRL / transformers: the ``log_history`` the ``Trainer`` saves.

A TRL output folder holds it at its top (the end of training) or in each ``checkpoint-N``: the
last checkpoint's ``log_history`` holds every earlier one.
"""

from __future__ import annotations

import json

from rlmetrics.errors import RunReadError
from rlmetrics.readers._history import as_history
from rlmetrics.readers._run import Notes, Parsed, Source

__all__ = ["LOG_HISTORY", "TRAINER_STATE", "TRL_TRAINER_STATE", "read_trainer_state"]

TRL_TRAINER_STATE = "trl-trainer-state"
#: The file name the ``Trainer`` saves its state under.
TRAINER_STATE = "trainer_state.json"
#: The key of the state that holds one dict per logged step.
LOG_HISTORY = "log_history"


def read_trainer_state(src: Source, notes: Notes, *, strict: bool = False) -> Parsed:
    """The history of the ``log_history`` dicts of a ``trainer_state.json``."""
    try:
        state = json.loads(src.data())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise RunReadError(f"{src.name!r}: not JSON ({err}); expected a trainer_state.json") from None
    logs = state.get(LOG_HISTORY) if isinstance(state, dict) else None
    if not isinstance(logs, list) or not all(isinstance(r, dict) for r in logs):
        raise RunReadError(
            f"{src.name!r}: expected a trainer_state.json (TRL / transformers) with a "
            f"{LOG_HISTORY!r} list of dicts; got {type(state).__name__}"
            + (f" with keys {sorted(state)[:10]}" if isinstance(state, dict) else "")
        )
    return Parsed(as_history(logs))
