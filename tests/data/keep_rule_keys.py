"""Keep only the step and the keys the health rules read, from a metrics.jsonl (stdin to stdout).

Usage: ``python tests/data/keep_rule_keys.py < metrics.jsonl > tests/data/demo_shipped.jsonl``
(see README.md in this folder).
"""

from __future__ import annotations

import json
import sys

import numpy as np

from rlmetrics.health.signals import SIGNALS, resolve_all


def main() -> None:
    rows = [json.loads(line) for line in sys.stdin if line.strip()]
    empty = (np.zeros(0, dtype=np.int64), np.zeros(0))
    history = {key: empty for row in rows for key in row}
    kept = {key for signal in SIGNALS for key in resolve_all(history, signal)}
    for row in rows:
        out = {"step": row["step"]} | {k: v for k, v in row.items() if k in kept}
        sys.stdout.write(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
