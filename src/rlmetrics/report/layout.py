"""What a report shows where: key panels first, then groups; folded series; the natural "best".

* :func:`group_metrics`: keys by their first path segment, in :data:`rlmetrics.keys.GROUP_ORDER`.
* :func:`best_direction`: ``"max"`` / ``"min"`` only for metrics with a natural direction
  (scores, accuracies, rewards, validation estimators, throughput; validation and value
  losses), ``None`` for everything else (policy losses, signed KLs, gradient norms, schedules).
* :func:`fold_kind`: why a series is listed rather than drawn (constant, all zero, no finite
  value, equal to the step).
* :func:`plan`: the panels of the page: the curated key panels people check first, one per
  signal of :data:`rlmetrics.health.signals.SIGNALS` (so verl's and TRL's names both land
  there; two runs logging the same signal under different names share a panel), then a panel
  per remaining metric by group; ``K/ci_low`` and ``K/ci_high`` become the band of ``K``.
  A metric's per-category keys (``by_<group>/<category>/<key>``, :func:`rlmetrics.keys.split_category_key`)
  share one panel, a curve per category (:attr:`Panel.cats`, :attr:`Plan.categories`).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from rlmetrics import keys as K
from rlmetrics.health import signals as S

from .runs import RunCurves

__all__ = ["KEY_PANELS", "Panel", "Plan", "best_direction", "fold_kind", "group_metrics", "plan", "y_label"]

#: The key panels, in page order: (signal of :data:`rlmetrics.health.signals.SIGNALS`, title).
KEY_PANELS = (
    ("reward", "reward"),
    ("val_score", "validation"),
    ("entropy", "entropy"),
    ("kl_ref", "KL to the reference"),
    ("ppo_kl", "KL of the update"),
    ("response_length", "response length"),
    ("length_clip_ratio", "responses cut at the length limit"),
    ("clip_fraction", "clip fraction"),
    ("grad_norm", "gradient norm"),
    ("throughput", "throughput"),
)
#: Validation panels among the key panels, at most (one per source and variable).
MAX_VALIDATION_PANELS = 4
_VAL_EXACT_MEAN = K.val_metric(K.VAL_EXACT_PREFIX, "*", "*", f"{K.ValName.MEAN}@*")
_BAND = (K.CI_LOW_SUFFIX, K.CI_HIGH_SUFFIX)


def group_metrics(keys: Sequence[str]) -> dict[str, list[str]]:
    """Group metric keys by their first path segment (keys without a slash go to ``other``).

    The groups of :data:`rlmetrics.keys.GROUP_ORDER` come first, in that order (``val-core``,
    ``critic``, ``actor``, ``response_length``, ...), the others alphabetically, ``other`` last;
    keys keep their sorted order within a group.

    Examples
    --------
    >>> group_metrics(["perf/mfu", "critic/score/mean", "loss", "critic/advantages/max"])
    {'critic': ['critic/advantages/max', 'critic/score/mean'], 'perf': ['perf/mfu'], 'other': ['loss']}
    """
    groups: dict[str, list[str]] = {}
    for key in sorted(set(keys)):
        groups.setdefault(K.group(key), []).append(key)
    rank = {g: i for i, g in enumerate(K.GROUP_ORDER)}

    def order(g: str) -> tuple[int, int, str]:
        return (0 if g in rank else 1 if g != K.GROUP_OTHER else 2, rank.get(g, 0), g)

    return {g: groups[g] for g in sorted(groups, key=order)}


# --- best ----------------------------------------------------------------------------------------

#: Keys where higher is better, by name (rlmetrics/verl, then TRL as logged and as TensorBoard holds it).
_HIGHER_KEYS = frozenset(
    {
        K.SCORE_MEAN,
        K.REWARDS_MEAN,
        K.TRAIN_ACC,
        K.VF_EXPLAINED_VAR,
        K.PERF_THROUGHPUT,
        K.PERF_MFU,
        K.TRL_REWARD,
        "train/" + K.TRL_REWARD,
        K.TRL_EVAL_REWARD,
        "eval/" + K.TRL_REWARD,
    }
)
#: Keys where lower is better: a value loss, and held-out losses (TRL/transformers' evaluation).
_LOWER_KEYS = frozenset(
    {K.CRITIC_VF_LOSS, f"{K.TRL_EVAL_PREFIX}loss", "eval/loss", f"{K.VERL_LEGACY_VAL_PREFIX}loss"}
)
#: The variables of a validation whose estimators go up with quality.
_SCORE_WORDS = frozenset({"acc", "accuracy", "score", "reward", "rewards", K.ValName.ACC_SUCCESS_ONLY})
#: A validation estimator: mean@N, pass@k, best@k, worst@k, maj@k, cover@tau (verl's bootstrap
#: ``/mean`` moment too), pass^k.
_ESTIMATOR = re.compile(r"^((mean|pass|best|worst|maj)@\d+(-\d+)?|cover@[\d.]+|pass\^\d+)(/mean)?$")
# Families whose means and extremes have no "best": advantages, returns and values.
_NO_DIRECTION = tuple(k.rsplit("/", 1)[0] + "/" for k in (K.ADV_MEAN, K.RETURNS_MEAN, K.VALUES_MEAN))


def best_direction(key: str) -> str | None:
    """``"max"`` when larger is better for ``key``, ``"min"`` when smaller is, else ``None``.

    Conservative: only metrics with a natural direction get one. Up: the training score and
    reward means, train accuracy, explained variance, throughput, MFU, TRL's ``reward`` and
    per-function ``rewards/<f>/mean``, and every validation estimator of a score-like variable
    (``val-*/<source>/acc/mean@8``, ``pass@k``, ``best@k/mean`` ...). Down: the critic's value
    loss and held-out losses (``eval_loss``, ``val/loss``). None: spreads, policy losses, KLs
    (signed or not), gradient norms, clip fractions, schedules (``lr``, ``kl_coef``), timings,
    lengths, advantages.

    Examples
    --------
    >>> best_direction("val-core/gsm8k/acc/mean@8"), best_direction("actor/pg_loss")
    ('max', None)
    >>> best_direction("critic/score/mean"), best_direction("eval_loss"), best_direction("actor/grad_norm")
    ('max', 'min', None)
    """
    parts = key.split("/")
    if any(p.startswith(K.ValName.STD) or p.endswith("_" + K.ValName.STD) for p in parts):
        return None
    if key.startswith(_NO_DIRECTION):
        return None
    if key in _HIGHER_KEYS:
        return "max"
    if key in _LOWER_KEYS:
        return "min"
    head = parts[1:] if parts[0] == "train" else parts
    if len(head) == 3 and head[0] == "rewards" and head[2] == K.ValName.MEAN:  # TRL, per reward function
        return "max"
    if parts[0].startswith("val") and len(parts) >= 3:
        if parts[-1] == "loss":
            return "min"
        for i, part in enumerate(parts[1:-1], start=1):
            if part in _SCORE_WORDS and _ESTIMATOR.match("/".join(parts[i + 1 :])):
                return "max"
    return None


# --- folding ---------------------------------------------------------------------------------------


def fold_kind(steps: np.ndarray, values: np.ndarray) -> str | None:
    """Why a series is not worth a panel: ``"no finite value"``, ``"zero"``, ``"constant"``,
    ``"equals the step"``; None when it is (a single point is drawn).

    Examples
    --------
    >>> import numpy as np
    >>> s = np.arange(4.0)
    >>> fold_kind(s, np.zeros(4)), fold_kind(s, np.full(4, 0.1)), fold_kind(s, s), fold_kind(s, s * 2)
    ('zero', 'constant', 'equals the step', None)
    """
    v = np.asarray(values, dtype=np.float64)
    finite = v[np.isfinite(v)]
    if finite.size == 0:
        return "no finite value"
    if v.size < 2:
        return None
    if finite.size == v.size and np.all(finite == finite[0]):
        return "zero" if finite[0] == 0 else "constant"
    if np.array_equal(v, np.asarray(steps, dtype=np.float64)):
        return "equals the step"
    return None


# --- labels -----------------------------------------------------------------------------------------

_UNIT_PREFIXES = (
    (K.TIMING_S_PREFIX, "seconds"),
    (K.TIMING_PER_TOKEN_MS_PREFIX, "ms per token"),
    (K.PERF_THROUGHPUT, "tokens/s"),
    (K.PERF_TIME_PER_STEP, "seconds"),
    (K.PERF_TOTAL_NUM_TOKENS, "tokens"),
    ("response_length", "tokens"),
    ("prompt_length", "tokens"),
    (K.TRL_COMPLETIONS_MEAN_LENGTH, "tokens"),
    (K.TRL_NUM_TOKENS, "tokens"),
)
_STATS = frozenset({"mean", "max", "min", "std"})


def y_label(key: str) -> str:
    """A short y-axis label: the unit where the key says it, else the metric's own name.

    Examples
    --------
    >>> y_label("timing_s/gen"), y_label("critic/score/mean"), y_label("response_length/clip_ratio")
    ('seconds', 'score mean', 'clip_ratio')
    """
    parts = key.split("/")
    for prefix, unit in _UNIT_PREFIXES:
        if key.startswith(prefix) and not any(w in parts[-1] for w in ("ratio", "frac")):
            return unit
    label = parts[-1]
    if label in _STATS and len(parts) > 1:
        label = f"{parts[-2]} {label}"
    return label if len(label) <= 28 else label[:27] + "…"


# --- the plan ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Panel:
    """One plot: a trace per run that logs one of its keys.

    Attributes
    ----------
    id : str
        HTML id (``panel-<slug of the first key>``).
    title : str
    ylabel : str
    traces : tuple of (int, str)
        ``(run index, key)``.
    cats : tuple of int
        For a panel of a metric's categories: the category of each trace, an index into
        :attr:`Plan.categories` (parallel to ``traces``); empty for any other panel.
    """

    id: str
    title: str
    ylabel: str
    traces: tuple[tuple[int, str], ...]
    cats: tuple[int, ...] = ()

    @property
    def keys(self) -> list[str]:
        """The distinct keys drawn, in trace order."""
        return list(dict.fromkeys(k for _, k in self.traces))


@dataclass
class Plan:
    """The page's panels and lists.

    Attributes
    ----------
    key_panels : list[Panel]
        The curated panels, in :data:`KEY_PANELS` order.
    groups : dict[str, list[str]]
        Group -> its metrics (tabled; bands and folded series left out), in page order.
    group_panels : dict[str, list[Panel]]
        Group -> the panels of its metrics not drawn among the key panels.
    folded : dict[str, list[str | None]]
        Key -> per run, why it is folded (None where the run lacks it).
    panel_of : dict[str, str]
        Every drawn key -> the id of its panel.
    banded : set[str]
        Keys with both ``/ci_low`` and ``/ci_high`` in some run.
    categories : list of (str, str)
        ``(group, category)`` of every category drawn, sorted (the page's category filter).
    """

    key_panels: list[Panel] = field(default_factory=list)
    groups: dict[str, list[str]] = field(default_factory=dict)
    group_panels: dict[str, list[Panel]] = field(default_factory=dict)
    folded: dict[str, list[str | None]] = field(default_factory=dict)
    panel_of: dict[str, str] = field(default_factory=dict)
    banded: set[str] = field(default_factory=set)
    categories: list[tuple[str, str]] = field(default_factory=list)

    @property
    def panels(self) -> list[Panel]:
        """Every panel, in page order."""
        return self.key_panels + [p for ps in self.group_panels.values() for p in ps]


def slug(text: str) -> str:
    """A fragment-safe name: runs of other characters than ``[A-Za-z0-9_.-]`` become ``_``."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text) or "x"


class _Ids:
    def __init__(self) -> None:
        self.taken: set[str] = set()

    def __call__(self, key: str) -> str:
        base = f"panel-{slug(key)}"
        name, n = base, 1
        while name in self.taken:
            n += 1
            name = f"{base}-{n}"
        self.taken.add(name)
        return name


def _same_values(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> bool:
    return np.array_equal(a[0], b[0]) and np.allclose(a[1], b[1], rtol=1e-9, atol=1e-12, equal_nan=True)


def _validation_keys(runs: Sequence[RunCurves], banded: set[str], drawn: set[str]) -> list[tuple[str, str]]:
    """``(key drawn, key found)`` for the validation score of each source: verl's ``val-core``
    mean, drawn as its ``val-exact`` twin (with the interval) where that holds the same numbers;
    TRL's evaluation reward."""
    found: list[str] = []
    for run in runs:
        keys = S.resolve_all(run.series, "val_score") or fnmatch.filter(run.series, _VAL_EXACT_MEAN)
        found.extend(k for k in keys if k not in found)
    out: list[tuple[str, str]] = []
    for key in found:
        shown = key
        if key.startswith(K.VAL_CORE_PREFIX + "/"):
            exact = K.VAL_EXACT_PREFIX + key[len(K.VAL_CORE_PREFIX) :]
            holders = [r for r in runs if key in r.series]
            if exact in banded and all(
                exact in r.series and _same_values(r.series[key], r.series[exact]) for r in holders
            ):
                shown = exact
        if shown in drawn and all(shown != s for s, _ in out):
            out.append((shown, key))
    return out[:MAX_VALIDATION_PANELS]


def plan(runs: Sequence[RunCurves]) -> Plan:
    """Lay out the page of ``runs``: key panels, then a panel per remaining metric by group.

    Examples
    --------
    >>> import numpy as np
    >>> from rlmetrics.report.runs import RunCurves
    >>> s = np.arange(5.0)
    >>> run = RunCurves("a", None, {"entropy": (s, 1 / (s + 1)), "actor/lr": (s, np.ones(5)),
    ...                             "actor/pg_loss": (s, s ** 2)})
    >>> p = plan([run])
    >>> [(q.title, q.keys) for q in p.panels], p.folded
    ([('entropy: entropy', ['entropy']), ('actor/pg_loss', ['actor/pg_loss'])], {'actor/lr': ['constant']})
    """
    every = list(dict.fromkeys(k for run in runs for k in run.series))
    present = set(every)
    banded = {k for k in every if all(k + suffix in present for suffix in _BAND)}
    band_keys = {k + suffix for k in banded for suffix in _BAND}
    out = Plan(banded=banded)
    out.folded = _folded(runs, [k for k in every if k not in band_keys])
    drawn = {k for k in every if k not in band_keys and k not in out.folded}
    # One id allocator for the whole page: key panels take theirs first, in page order.
    ids = _Ids()
    _add_key_panels(out, runs, drawn, ids)
    _add_group_panels(out, runs, drawn, ids)
    return out


def _folded(runs: Sequence[RunCurves], keys: Sequence[str]) -> dict[str, list[str | None]]:
    """Key -> per run, why it is folded, for the ``keys`` folded in every run that logs them
    (but a category's series drawn beside its drawn sibling categories)."""
    folded: dict[str, list[str | None]] = {}
    for key in keys:
        kinds = [fold_kind(*run.series[key]) if key in run.series else None for run in runs]
        if all(kind is not None or key not in run.series for kind, run in zip(kinds, runs)):
            folded[key] = kinds
    _unfold_categories(folded, keys)
    return folded


def _add_key_panels(out: Plan, runs: Sequence[RunCurves], drawn: set[str], ids: _Ids) -> None:
    """Append the curated panels of :data:`KEY_PANELS` to ``out`` and record their keys' panel."""
    for signal, title in KEY_PANELS:
        if signal == "val_score":
            for key, alias in _validation_keys(runs, out.banded, drawn):
                traces = tuple((i, key) for i, run in enumerate(runs) if key in run.series)
                panel = Panel(ids(key), f"{title}: {key}", y_label(key), traces)
                out.key_panels.append(panel)
                out.panel_of[alias] = panel.id  # the val-core key drawn as its val-exact twin
            continue
        resolved = [(i, S.resolve(run.series, signal)) for i, run in enumerate(runs)]
        traces = tuple((i, r[0]) for i, r in resolved if r is not None and r[0] in drawn)
        if traces:
            keys = list(dict.fromkeys(k for _, k in traces))
            out.key_panels.append(
                Panel(ids(keys[0]), f"{title}: {' · '.join(keys)}", y_label(keys[0]), traces)
            )
    for panel in out.key_panels:
        for key in panel.keys:
            out.panel_of.setdefault(key, panel.id)


def _add_group_panels(out: Plan, runs: Sequence[RunCurves], drawn: set[str], ids: _Ids) -> None:
    """Fill ``out``'s groups and their panels: one per drawn metric not on a key panel, one per
    metric for all of its categories; and the page's list of categories."""
    by_metric = _category_keys(k for k in drawn if k not in out.panel_of)
    out.categories = sorted({(g, c) for (g, _), cats in by_metric.items() for c in cats})
    cat_index = {gc: i for i, gc in enumerate(out.categories)}
    for group, keys in group_metrics(sorted(drawn)).items():
        out.groups[group] = keys
        panels = []
        for key in keys:
            if key in out.panel_of:
                continue
            split = K.split_category_key(key)
            if split is not None:  # every category of the metric, on one panel
                plain, by, _ = split
                cats = by_metric[(by, plain)]
                panel = _category_panel(runs, plain, by, cats, cat_index, ids)
                for k in cats.values():
                    out.panel_of[k] = panel.id
            else:
                traces = tuple((i, key) for i, run in enumerate(runs) if key in run.series)
                panel = Panel(ids(key), key, y_label(key), traces)
                out.panel_of[key] = panel.id
            panels.append(panel)
        out.group_panels[group] = panels


def _category_panel(
    runs: Sequence[RunCurves],
    plain: str,
    by: str,
    cats: dict[str, str],
    cat_index: dict[tuple[str, str], int],
    ids: _Ids,
) -> Panel:
    """The one panel of metric ``plain`` split by ``by``: a trace per category and run."""
    pairs = [
        (i, k, cat_index[(by, c)]) for c, k in cats.items() for i, run in enumerate(runs) if k in run.series
    ]
    title = f"{plain} by {by} ({len(cats)} categor{'y' if len(cats) == 1 else 'ies'})"
    return Panel(
        ids(f"{K.CATEGORY_PREFIX}{by}/{plain}"),
        title,
        y_label(plain),
        tuple((i, k) for i, k, _ in pairs),
        tuple(c for _, _, c in pairs),
    )


def _category_keys(keys: Iterable[str]) -> dict[tuple[str, str], dict[str, str]]:
    """``(group, plain key)`` -> category -> its key, categories sorted, for the per-category keys."""
    out: dict[tuple[str, str], dict[str, str]] = {}
    for key in keys:
        split = K.split_category_key(key)
        if split is not None:
            plain, by, category = split
            out.setdefault((by, plain), {})[category] = key
    return {m: dict(sorted(cats.items())) for m, cats in out.items()}


def _unfold_categories(folded: dict[str, list[str | None]], keys: Sequence[str]) -> None:
    """Draw a category's folded series where another category of the metric is drawn (a source
    always solved is a flat line beside the others, not a row of the constant series)."""
    for cats in _category_keys(keys).values():
        if any(k not in folded for k in cats.values()):
            for k in cats.values():
                folded.pop(k, None)


def band_of(run: RunCurves, key: str) -> tuple[np.ndarray, np.ndarray] | None:
    """``(low, high)`` of ``key`` in ``run`` when both are logged at the key's own steps."""
    low, high = (run.series.get(key + suffix) for suffix in _BAND)
    if low is None or high is None or key not in run.series:
        return None
    steps = run.series[key][0]
    if not (np.array_equal(low[0], steps) and np.array_equal(high[0], steps)):
        return None
    return low[1], high[1]
