"""The rules run per category: a run's ``by_<group>/<category>/<key>`` series diagnosed as runs of their own.

A run logged with ``group_by=`` holds, beside its plain keys, the same metrics per category
(``by_data_source/gsm8k/critic/score/mean``, :func:`rlmetrics.keys.category_key`). A source that
collapses while the others stay healthy hides in the plain means; diagnosed alone, it does not.

:func:`split_history` parses the keys once (:func:`rlmetrics.keys.split_category_key`) and gives
the run's plain history (no per-category key: the rules' patterns never read a category's key as
the run's) and, for each category, a history of its keys renamed to their plain keys, so every
rule and every signal candidate reads it as it reads a run. The category's label is the prefix
its keys share, :func:`rlmetrics.keys.category_prefix` (``"by_data_source/gsm8k"``).
:func:`in_category` names a category's finding: its ``metric`` and the keys its evidence
names back as the run logged them, and ``category`` set to the label.

Which findings are reported (:func:`fold_findings`), one rule:

* a category's finding of a kind the run's plain keys also show, at the same or a lower severity,
  is folded into the run's finding: the run's finding is reported once, its ``categories``
  naming every category that shows the kind too (the whole run has it);
* any other category finding (a kind the plain keys do not show, or a more severe one) is
  reported on its own, ``category`` naming where (one source collapsed, the mean healthy).

Checks a category could not run are not reported (a rare source is too short for most rules).
The outcome split (``by_outcome/correct`` ...) is not diagnosed by default: it conditions on the
reward, so the reward-based arms of the rules read a constant there.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from rlmetrics import keys as K
from rlmetrics.health.findings import SEVERITIES, Finding, History

__all__ = ["DEFAULT_SKIPPED_GROUPS", "check_groups", "fold_findings", "in_category", "split_history"]

#: The groups not diagnosed unless named: the outcome split conditions on the reward.
DEFAULT_SKIPPED_GROUPS = frozenset({K.OUTCOME_GROUP})


def check_groups(groups: Any) -> tuple[str, ...] | None:
    """``groups`` as a tuple of group names, or None (the default: every group but the outcome split).

    Raises
    ------
    TypeError
        ``groups`` is a string or not a sequence of strings.
    """
    if groups is None:
        return None
    if isinstance(groups, str) or not isinstance(groups, Iterable):
        raise TypeError(
            f"groups must be a sequence of group names (e.g. ['data_source']) or None; got {groups!r}"
        )
    out = tuple(groups)
    bad = [g for g in out if not isinstance(g, str)]
    if bad:
        raise TypeError(f"groups must hold group names (strings); got {bad[0]!r}")
    return out


def split_history(
    history: History, *, groups: Sequence[str] | None = None, keep: Iterable[str] = ()
) -> tuple[dict[str, tuple[Any, Any]], dict[str, dict[str, tuple[Any, Any]]]]:
    """The run's plain history, and each category's history under plain keys.

    Parameters
    ----------
    history : History
        Metric key -> ``(steps, values)``; the arrays are shared, not copied.
    groups : sequence of str or None, keyword-only
        The groups whose categories are split out (None: every group but
        :data:`DEFAULT_SKIPPED_GROUPS`). The per-category keys of other groups are left out of both.
    keep : iterable of str, keyword-only
        Per-category keys kept in the plain history too (the keys a ``signals=`` mapping names).

    Returns
    -------
    plain : dict
        Every key that is not a per-category key (and those of ``keep``).
    categories : dict
        Label (:func:`rlmetrics.keys.category_prefix`, sorted) -> plain key -> ``(steps, values)``.

    Examples
    --------
    >>> h = {"critic/score/mean": ([0], [0.5]), "by_data_source/a%2Fb/critic/score/mean": ([0], [0.1])}
    >>> plain, cats = split_history(h)
    >>> list(plain), {label: list(c) for label, c in cats.items()}
    (['critic/score/mean'], {'by_data_source/a%2Fb': ['critic/score/mean']})
    """
    keep = frozenset(keep)
    plain: dict[str, tuple[Any, Any]] = {}
    categories: dict[str, dict[str, tuple[Any, Any]]] = {}
    for key in history:
        split = K.split_category_key(key) if key.startswith(K.CATEGORY_PREFIX) else None
        if split is None or key in keep:
            plain[key] = history[key]
            if split is None:
                continue
        plain_key, group, category = split
        skipped = group in DEFAULT_SKIPPED_GROUPS if groups is None else group not in groups
        if skipped:
            continue
        categories.setdefault(K.category_prefix(group, category), {})[plain_key] = history[key]
    return plain, {label: categories[label] for label in sorted(categories)}


def _renamed(value: Any, names: Mapping[str, str]) -> Any:
    """``value`` with every string (and mapping key) that is a plain key of ``names`` renamed."""
    if isinstance(value, str):
        return names.get(value, value)
    if isinstance(value, Mapping):
        return {names.get(k, k) if isinstance(k, str) else k: _renamed(v, names) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_renamed(v, names) for v in value)
    return value


def in_category(finding: Finding, label: str, keys: Iterable[str]) -> Finding:
    """A category's finding as the run logged it: its keys back under ``label``, ``category=label``.

    ``keys`` are the plain keys of the category's history: those among ``metric`` and in the
    evidence become ``f"{label}/{key}"``.

    Examples
    --------
    >>> f = Finding("entropy_collapse", "error", 30, ("actor/entropy",), {"first_key": "actor/entropy"})
    >>> g = in_category(f, "by_data_source/gsm8k", ["actor/entropy"])
    >>> g.category, g.metric
    ('by_data_source/gsm8k', ('by_data_source/gsm8k/actor/entropy',))
    >>> g.evidence
    {'first_key': 'by_data_source/gsm8k/actor/entropy'}
    """
    names = {key: f"{label}/{key}" for key in keys}
    return replace(
        finding,
        metric=tuple(names.get(m, m) for m in finding.metric),
        evidence=_renamed(finding.evidence, names),
        category=label,
    )


def fold_findings(run: Sequence[Finding], by_category: Sequence[Finding]) -> list[Finding]:
    """The findings reported: the run's, then the categories' not folded into them (the module's rule).

    Parameters
    ----------
    run : sequence of Finding
        The findings of the run's plain keys (``category`` None).
    by_category : sequence of Finding
        The findings of every category (``category`` set), in category order.

    Returns
    -------
    list of Finding
        Each run finding, with ``categories`` naming the categories folded into it, and the
        category findings left (unordered: :func:`~rlmetrics.health.rules.diagnose` sorts).

    Examples
    --------
    >>> run = [Finding("kl_drift", "warning", 40, ("actor/kl_loss",))]
    >>> cats = [Finding("kl_drift", "warning", 42, (), category="by_data_source/a"),
    ...         Finding("kl_drift", "error", 41, (), category="by_data_source/b"),
    ...         Finding("entropy_collapse", "error", 30, (), category="by_data_source/c")]
    >>> for f in fold_findings(run, cats):
    ...     print(f.kind, f.category, f.categories)
    kl_drift None ('by_data_source/a',)
    kl_drift by_data_source/b ()
    entropy_collapse by_data_source/c ()
    """
    rank = {severity: i for i, severity in enumerate(SEVERITIES)}
    of_kind = {f.kind: f for f in run}
    folded: dict[str, list[str]] = {}
    left: list[Finding] = []
    for f in by_category:
        base = of_kind.get(f.kind)
        if base is not None and f.category is not None and rank[f.severity] <= rank[base.severity]:
            folded.setdefault(f.kind, []).append(f.category)
        else:
            left.append(f)
    out = [replace(f, categories=tuple(folded[f.kind])) if f.kind in folded else f for f in run]
    return out + left
