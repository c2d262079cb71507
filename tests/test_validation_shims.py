"""The old flat paths of rlmetrics.validation still import the same objects from their new places.

The names are those each old module exported before the move into ``verl/``, ``exact/`` and
``comparison/``, written out here so that a name dropped from a shim fails.
"""

from __future__ import annotations

import importlib

import pytest

import rlmetrics.validation as validation

OLD = {
    "bootstrap": (
        ["verl.bootstrap"],
        "MAX_DRAWS MAX_SAMPLES_PER_PROMPT bootstrap_indices bootstrap_metric calc_maj_val "
        "flatten_validation_metrics process_validation_metrics",
    ),
    "compare": (
        ["comparison.paired", "comparison.curves"],
        "CurveComparison Matched PairedDifference compare_curves match_prompts paired_difference "
        "pass_at_k_curves pass_hat_k_curves unpaired_difference",
    ),
    "evals": (["comparison.tables"], "TableComparison compare_summaries compare_tables"),
    "summary": (
        ["exact.summary"],
        "DEFAULT_TAUS PromptTable default_ks prompt_estimates summarize_table summarize_validation",
    ),
    "intervals": (
        ["exact.intervals"],
        "CI_METHODS Interval IntervalTable column_intervals mean_interval standard_errors wilson_interval",
    ),
    "estimators": (
        ["exact.estimators"],
        "Estimate best_at_k cover_at_tau maj_at_k pass_at_k pass_hat_k worst_at_k",
    ),
    "majority": (["verl.majority"], "majority_counts majority_counts_distinct pattern_counts"),
    "extremes": (
        ["verl.extremes"],
        "BestWorst best_worst_stats rank_counts weighted_mean_std weighted_mean_std_blocks",
    ),
    "draws": (
        ["verl.draws"],
        "clear_caches distinct_draws draw_tables fold_draws indices prefetch subset_table top_bit_slot",
    ),
    "inputs": (
        ["exact.inputs"],
        "Column Predictions Prompts as_list factorize group_prompts local_codes predictions read_column "
        "unique_rows",
    ),
}

PACKAGE = (
    "CI_METHODS CurveComparison Estimate Interval PairedDifference PromptTable SummaryOptions "
    "TableComparison best_at_k bootstrap_indices bootstrap_metric calc_maj_val column_intervals "
    "compare_curves compare_summaries compare_tables cover_at_tau default_ks flatten_validation_metrics "
    "maj_at_k match_prompts mean_interval paired_difference pass_at_k pass_at_k_curves pass_hat_k "
    "pass_hat_k_curves process_validation_metrics prompt_estimates summarize_table summarize_validation "
    "unpaired_difference wilson_interval worst_at_k"
).split()
#: exported since: several seeds and planning (no old flat module)
NEW = (
    "EvaluationPlan PilotSpread SeedComparison SeedSummary combine_seeds compare_seed_groups "
    "pilot_spread plan_evaluation"
)


@pytest.mark.parametrize("old", list(OLD), ids=list(OLD))
def test_old_path_imports_the_same_objects(old):
    news, names = OLD[old]
    shim = importlib.import_module(f"rlmetrics.validation.{old}")
    homes = [importlib.import_module(f"rlmetrics.validation.{new}") for new in news]
    for name in names.split():
        home = next(m for m in homes if hasattr(m, name))
        assert getattr(shim, name) is getattr(home, name), f"{old}.{name}"
        assert name in shim.__all__


@pytest.mark.parametrize("old", list(OLD), ids=list(OLD))
def test_every_name_an_old_path_lists_resolves(old):
    shim = importlib.import_module(f"rlmetrics.validation.{old}")
    assert set(shim.__all__) >= set(OLD[old][1].split())
    assert all(hasattr(shim, name) for name in shim.__all__)


def test_package_exports_are_the_old_ones_and_summary_options():
    assert sorted(validation.__all__) == sorted(PACKAGE + NEW.split())
    assert all(hasattr(validation, name) for name in validation.__all__)


@pytest.mark.parametrize("sub", ["verl", "exact", "comparison"], ids=["verl", "exact", "comparison"])
def test_each_place_says_what_it_holds(sub):
    doc = importlib.import_module(f"rlmetrics.validation.{sub}").__doc__
    assert doc and len(doc.splitlines()) > 3
