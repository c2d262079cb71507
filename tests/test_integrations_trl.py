"""rlmetrics.integrations.trl: a real GRPOTrainer on CPU with the callback; its logic on a stand-in."""

from __future__ import annotations

import itertools
import json
import math
import types
import warnings
from collections import defaultdict, deque
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("trl")
torch = pytest.importorskip("torch")

from rlmetrics import keys as K  # noqa: E402
from rlmetrics.health.monitor import HealthMonitor  # noqa: E402
from rlmetrics.health.sources import TRL_TRAINER_STATE, load_history  # noqa: E402
from rlmetrics.integrations.trl import RLMetricsCallback  # noqa: E402
from rlmetrics.readers.samples import read_samples  # noqa: E402
from rlmetrics.tracking import read_jsonl  # noqa: E402
from rlmetrics.training.text import compute_text_metrics  # noqa: E402

#: Trains a model: CI runs these once more under a second CPU kernel family (.ci/run).
pytestmark = pytest.mark.trains

WORDS = ["<pad>", "<eos>", "<unk>", "a", "b", "c", "d", "e", "f", "g"]


# --- a real GRPOTrainer -------------------------------------------------------------------------


def tiny_trainer(output_dir: Path, reward_funcs: list, columns: dict | None = None, **config):
    """GRPOTrainer with a 1-layer Llama (hidden 16) and a word-level tokenizer, both built here;
    ``columns``: the training dataset's (default: four prompts, four times)."""
    from datasets import Dataset
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast
    from trl import GRPOConfig, GRPOTrainer

    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>"
    )
    torch.manual_seed(0)
    model_config = LlamaConfig(
        vocab_size=len(WORDS),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=64,
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=None,
    )
    args = GRPOConfig(
        **{
            "output_dir": str(output_dir),
            "use_cpu": True,
            "bf16": False,
            "max_steps": 4,
            "per_device_train_batch_size": 4,
            "num_generations": 2,
            "max_completion_length": 4,
            "temperature": 1.5,
            "logging_steps": 2,
            "report_to": "none",
            "save_strategy": "no",
            "disable_tqdm": True,
            "seed": 0,
            **config,
        }
    )
    dataset = Dataset.from_dict(columns or {"prompt": ["a b", "c d", "e f", "g a"] * 4})
    return GRPOTrainer(
        model=LlamaForCausalLM(model_config),
        processing_class=tokenizer,
        reward_funcs=reward_funcs,
        args=args,
        train_dataset=dataset,
    )


class RecordedRewards:
    """Two toy reward functions that keep what they return (each call: one generation batch)."""

    def __init__(self) -> None:
        self.calls: dict[str, list[list[float | None]]] = defaultdict(list)
        #: (prompts, completions) of each generation batch, as the reward functions got them
        self.texts: list[tuple[list[str], list[str]]] = []

    def has_a(self, completions, **kwargs):
        self.texts.append((list(kwargs["prompts"]), list(completions)))
        out: list[float | None] = [1.0 if "a" in c.split() else 0.0 for c in completions]
        self.calls["has_a"].append(out)
        return out

    def short(self, completions, **kwargs):
        # None (unscorable by this function) for the longest completions
        out = [None if len(c.split()) > 2 else 0.5 for c in completions]
        self.calls["short"].append(out)
        return out


def brute_window(calls: dict, gens: range, weights: tuple[float, float], g: int) -> dict[str, float]:
    """The window's statistics from the recorded rewards, by plain Python."""
    rewards, groups = [], []
    for j in gens:
        for i, (a, s) in enumerate(zip(calls["has_a"][j], calls["short"][j])):
            parts = [w * v for w, v in zip(weights, (a, s)) if v is not None]
            rewards.append(sum(parts) if parts else math.nan)
            groups.append((j, i // g))
    scored = [r for r in rewards if not math.isnan(r)]
    by_group: dict = defaultdict(list)
    for r, key in zip(rewards, groups):
        if not math.isnan(r):
            by_group[key].append(r)

    def pass_at(k: int) -> float:  # every k-subset of each group's completions: one solved?
        subsets = [
            np.mean([any(v[i] >= 1.0 for i in c) for c in itertools.combinations(range(len(v)), k)])
            for v in by_group.values()
            if len(v) >= k
        ]
        return float(np.mean(subsets))

    return {
        "grpo-trl/reward": float(np.mean(scored)),
        "grpo-trl/reward_std": float(np.std(scored, ddof=1)),
        "grpo/num_groups": float(len(by_group)),
        "grpo/num_samples": float(len(scored)),
        "grpo/frac_all_solved": float(np.mean([min(v) >= 1.0 for v in by_group.values()])),
        "grpo/pass@1": pass_at(1),
        f"grpo/pass@{g}": pass_at(g),
    }


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """Four steps of GRPO (two logged windows of two generation batches), the callback attached."""
    mp = pytest.MonkeyPatch()
    mp.setenv("HF_HUB_OFFLINE", "1")
    mp.setenv("TRANSFORMERS_OFFLINE", "1")
    mp.setenv("HF_DATASETS_OFFLINE", "1")
    # huggingface_hub read the variable when it was imported: any request to the Hub now raises
    mp.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    out = tmp_path_factory.mktemp("grpo")
    recorded = RecordedRewards()
    try:
        trainer = tiny_trainer(out / "run", [recorded.has_a, recorded.short], reward_weights=[1.0, 0.5])
        mirrored: list = []

        class Spy(RLMetricsCallback):
            def on_log(self, args, state, control, logs=None, **kwargs):
                mirrored.append((state.global_step, dict(logs)))
                super().on_log(args, state, control, logs=logs, **kwargs)

        callback = Spy(experiment="tiny").attach(trainer)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            trainer.train()
        trainer.save_state()
    finally:
        mp.undo()
    return types.SimpleNamespace(
        trainer=trainer, callback=callback, recorded=recorded, mirrored=mirrored, out=out / "run"
    )


def test_every_logged_record_is_in_the_run(trained):
    cb = trained.callback
    assert cb.run_dir == trained.out / "rlmetrics" / "trl" / "tiny"
    assert cb.tracker._finished and isinstance(cb.tracker.monitor, HealthMonitor)
    rows = read_jsonl(cb.run_dir / "metrics.jsonl")
    # the two training logs and the summary (train_runtime ...) at the last step
    assert [r["step"] for r in rows] == [s for s, _ in trained.mirrored] == [2, 4, 4]
    for row, (_, logs) in zip(rows, trained.mirrored):
        for key, value in logs.items():
            want = math.nan if value is None else float(value)
            assert row[key] == pytest.approx(want, nan_ok=True, rel=1e-12), key
    assert {K.TRL_REWARD, K.TRL_REWARD_STD, K.TRL_FRAC_REWARD_ZERO_STD, K.TRL_LOSS, K.TRL_ENTROPY} <= set(
        rows[0]
    )
    config = json.loads((cb.run_dir / "config.json").read_text())
    assert config["num_generations"] == 2 and config["max_steps"] == 4


def test_exact_window_group_statistics(trained):
    """Each logged window (two generation batches) holds the statistics of all its completions."""
    rows = read_jsonl(trained.callback.run_dir / "metrics.jsonl")
    calls = trained.recorded.calls
    assert len(calls["has_a"]) == 4  # one generation batch per step
    for row, gens in zip(rows[:2], (range(0, 2), range(2, 4))):
        want = brute_window(calls, gens, (1.0, 0.5), g=2)
        for key, value in want.items():
            assert row[key] == pytest.approx(value, rel=1e-12), key
        assert row["grpo/group_size/min"] == row["grpo/group_size/max"] == 2.0
        # every completion is scorable (has_a always answers): TRL's mean of the two batch means
        # is the window's mean, to TRL's float32
        assert row[K.TRL_REWARD] == pytest.approx(row["grpo-trl/reward"], rel=1e-6)
        assert set(row) >= {
            "grpo-trl/frac_reward_zero_std",
            "grpo/frac_reward_zero_std",
            "grpo/reward_std/mean",
        }
    assert "grpo/num_groups" not in rows[2]  # the summary record has no completions


def test_real_window_reward_components(trained):
    """The reward components of each logged window: the functions' recorded values, by numpy."""
    rows = read_jsonl(trained.callback.run_dir / "metrics.jsonl")
    calls = trained.recorded.calls
    for row, gens in zip(rows[:2], (range(0, 2), range(2, 4))):
        for name in ("has_a", "short"):
            values = np.array([v for j in gens for v in calls[name][j] if v is not None], dtype=float)
            assert row[K.reward_component_key(name, "mean")] == pytest.approx(np.mean(values), rel=1e-12)
            assert row[K.reward_component_key(name, "max")] == np.max(values)
        # has_a (weight 1) answers every completion; short's 0.5 * 0.5 decides only where has_a is 0
        has_a = np.array([v for j in gens for v in calls["has_a"][j]])
        short = np.array([v is not None for j in gens for v in calls["short"][j]])
        assert row[K.reward_component_key("short", "decides_frac")] == pytest.approx(
            np.mean(short & (has_a == 0.0))
        )


def test_real_window_text_statistics_and_sample_tables(trained):
    """The text statistics of every completion of a window; a sample table of its last batch."""
    rows = read_jsonl(trained.callback.run_dir / "metrics.jsonl")
    calls, texts = trained.recorded.calls, trained.recorded.texts
    tables = read_samples(trained.callback.run_dir)
    assert sorted(tables) == [2, 4]
    for row, gens, step in zip(rows[:2], (range(0, 2), range(2, 4)), (2, 4)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # NaN where a statistic is undefined on these texts
            want = compute_text_metrics([c for j in gens for c in texts[j][1]])
        assert want["text/num_responses"] == sum(len(texts[j][1]) for j in gens)
        for key, value in want.items():
            assert row[key] == pytest.approx(value, nan_ok=True, rel=1e-12), key
        last = gens[-1]
        rewards = [a + 0.5 * (s or 0.0) for a, s in zip(calls["has_a"][last], calls["short"][last])]
        table = tables[step]
        assert table.chosen[:2] == ("max", "min") and len(table) == min(8, len(rewards))
        assert table.reward[0] == max(rewards) and table.reward[1] == min(rewards)
        pairs = list(zip(*texts[last]))
        assert all(pair in pairs for pair in zip(table.prompt, table.response))
        assert set(table.length) == set(table.stop_reason) == {None}  # TRL keeps neither
    assert not any(k.startswith("text/") for k in rows[2])  # the summary record


def test_the_run_reads_back_diagnoses_and_reports(trained, tmp_path):
    pytest.importorskip("matplotlib")
    from typer.testing import CliRunner

    from rlmetrics.cli.app import app

    run_dir = trained.callback.run_dir
    history, _ = load_history(run_dir)
    assert list(history[K.TRL_REWARD][0]) == [2, 4]
    assert list(history["grpo-trl/reward_std"][0]) == [2, 4]
    result = CliRunner().invoke(app, ["diagnose", str(run_dir)])
    assert result.exit_code in (0, 1), result.output
    result = CliRunner().invoke(app, ["report", str(run_dir / "metrics.jsonl"), "-o", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "grpo-trl/reward_std" in (tmp_path / "report.html").read_text(encoding="utf-8")


def test_trainer_state_json_reads_as_a_run(trained):
    history, kind = load_history(trained.out)
    assert kind == TRL_TRAINER_STATE
    rows = read_jsonl(trained.callback.run_dir / "metrics.jsonl")
    steps, values = history[K.TRL_REWARD]
    assert list(steps) == [2, 4]
    np.testing.assert_allclose(values, [r[K.TRL_REWARD] for r in rows[:2]], rtol=1e-12)


#: Each prompt's data source in the categorised run (one with a "/", escaped in the keys).
PROMPT_SOURCES = {"a b": "web/qa", "c d": "web/qa", "e f": "math", "g a": "math"}


def test_a_real_grpo_run_gives_the_statistics_per_data_source_and_per_reward_function(tmp_path, monkeypatch):
    """A real GRPOTrainer over a dataset of two sources, two reward functions: every window's
    per-source keys hold the statistics of that source's completions, recomputed from what the
    reward functions were given and returned, and agree with TRL's own logged means."""
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.setenv(name, "1")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    recorded = RecordedRewards()
    sources_seen: list[list[str]] = []

    def has_a(completions, **kwargs):
        sources_seen.append(list(kwargs["data_source"]))  # TRL passes the dataset's columns
        return recorded.has_a(completions, **kwargs)

    prompts = ["a b", "c d", "e f", "g a"] * 4
    columns = {"prompt": prompts, "data_source": [PROMPT_SOURCES[p] for p in prompts]}
    trainer = tiny_trainer(
        tmp_path / "run", [has_a, recorded.short], columns=columns, reward_weights=[1.0, 0.5]
    )
    callback = RLMetricsCallback(experiment="cats", group_by="data_source", monitor=False).attach(trainer)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.train()
    rows = read_jsonl(callback.run_dir / "metrics.jsonl")
    assert len(sources_seen) == 4  # one generation batch per step, two windows of two
    assert {s for seen in sources_seen for s in seen} == set(PROMPT_SOURCES.values())
    for row, gens in zip(rows[:2], (range(0, 2), range(2, 4))):
        labels = np.array([s for j in gens for s in sources_seen[j]])
        # each completion's source is its prompt's in the dataset
        assert list(labels) == [PROMPT_SOURCES[p] for j in gens for p in recorded.texts[j][0]]
        has = np.array([v for j in gens for v in recorded.calls["has_a"][j]], dtype=float)
        short = np.array([np.nan if v is None else v for j in gens for v in recorded.calls["short"][j]])
        weighted = has + 0.5 * np.nan_to_num(short)  # has_a answers every completion
        for source in sorted(set(PROMPT_SOURCES.values())):
            rows_s = labels == source

            def key(plain: str, source: str = source) -> str:
                return K.category_key(plain, "data_source", source)

            if not rows_s.any():  # a source the sampler gave this window no prompt of
                assert key("grpo/num_samples") not in row
                continue
            assert row[key("grpo/num_samples")] == rows_s.sum()
            assert row[key("grpo/num_groups")] == rows_s.sum() / 2  # num_generations = 2
            assert row[key("grpo-trl/reward")] == pytest.approx(weighted[rows_s].mean(), rel=1e-12)
            assert row[key(K.reward_component_key("has_a", "mean"))] == pytest.approx(has[rows_s].mean())
            given = short[rows_s][~np.isnan(short[rows_s])]
            if given.size:
                assert row[key(K.reward_component_key("short", "mean"))] == pytest.approx(given.mean())
        assert ("by_data_source/web%2Fqa/grpo/num_samples" in row) == ("web/qa" in labels)  # "/" escaped
        # the sources together are the window: their count-weighted means give TRL's own
        counts = {s: row[K.category_key("grpo/num_samples", "data_source", s)] for s in set(labels)}
        total = sum(counts[s] * row[K.category_key("grpo-trl/reward", "data_source", s)] for s in counts)
        assert sum(counts.values()) == labels.size
        assert total / labels.size == pytest.approx(row[K.TRL_REWARD], rel=1e-6)
        assert row[K.reward_component_key("has_a", "mean")] == pytest.approx(
            row["rewards/has_a/mean"], rel=1e-6
        )


# --- the callback's logic on a stand-in trainer ------------------------------------------------


class FakeTrainer:
    """The parts of a GRPOTrainer the callback reads, and a way to 'generate' a batch."""

    def __init__(self, names=("acc",), weights=(1.0,), g=2, batch=4) -> None:
        self.args = types.SimpleNamespace(generation_batch_size=batch)
        self.reward_func_names = list(names)
        self.reward_weights = torch.tensor(weights)
        self.num_generations = g
        self.model = types.SimpleNamespace(training=True)
        self._metrics: dict[str, defaultdict] = {"train": defaultdict(list), "eval": defaultdict(list)}
        # TRL's completion log keeps one generation batch (maxlen=generation_batch_size); a longer
        # one here checks that only the newest batch is read
        self._logs: dict[str, Any] = {
            "prompt": deque(maxlen=2 * batch),
            "completion": deque(maxlen=2 * batch),
            "rewards": defaultdict(lambda: deque(maxlen=2 * batch)),
        }
        self.callbacks: list = []

    def add_callback(self, callback) -> None:
        self.callbacks.append(callback)

    def generate(self, per_func: dict, prompts=None, completions=None) -> None:
        first = next(iter(per_func.values()))
        n = len(first)
        self._metrics["train"]["reward"].append(0.0)
        self._logs["prompt"].extend(prompts or [f"p{i // self.num_generations}" for i in range(n)])
        self._logs["completion"].extend(completions or [f"answer {i}" for i in range(n)])
        for name, values in per_func.items():
            self._logs["rewards"][name].extend(values)


def jsonl_rows(cb: RLMetricsCallback) -> list[dict]:
    assert cb.tracker is not None
    return read_jsonl(cb.tracker.jsonl_path)


def run_dir(cb: RLMetricsCallback) -> Path:
    assert cb.run_dir is not None
    return cb.run_dir


def state(step=1, main=True):
    return types.SimpleNamespace(global_step=step, is_world_process_zero=main)


def args(tmp_path):
    return types.SimpleNamespace(
        output_dir=str(tmp_path / "out"), run_name=None, to_dict=lambda: {"lr": 1e-6}
    )


def test_group_statistics_span_the_window_and_restart_after_a_log(tmp_path):
    trainer = FakeTrainer(names=("acc", "fmt"), weights=(1.0, 0.5))
    cb = RLMetricsCallback(monitor=False).attach(trainer)
    a = args(tmp_path)
    cb.on_train_begin(a, state(0), None)
    trainer.generate({"acc": [1.0, 1.0, math.nan, 1.0], "fmt": [0.0, 0.0, math.nan, 1.0]})
    cb.on_substep_end(a, state(0), None)
    cb.on_step_end(a, state(1), None)  # the same batch is taken once
    trainer.generate({"acc": [0.0, 0.0, 1.0, 0.0], "fmt": [math.nan, math.nan, 0.0, 0.0]})
    cb.on_step_end(a, state(2), None)
    cb.on_log(a, state(2), None, logs={"reward": 0.5, "loss": None})
    trainer._metrics["train"].clear()  # as TRL does after the log
    trainer.generate({"acc": [1.0, 0.0, 1.0, 1.0], "fmt": [0.0, 0.0, 0.0, 0.0]})
    cb.on_step_end(a, state(3), None)
    cb.on_log(a, state(3), None, logs={"reward": 0.75})
    cb.on_train_end(a, state(3), None)
    rows = jsonl_rows(cb)
    assert run_dir(cb) == tmp_path / "out" / "rlmetrics" / "trl" / "out"
    first, second = rows
    # window 1: rewards [1, 1 | NaN (unscorable), 1.5 || 0, 0 | 1, 0]
    assert first["grpo/num_groups"] == 4 and first["grpo/num_samples"] == 7
    assert first["grpo/frac_all_solved"] == pytest.approx(2 / 4)  # (1, 1) and the scorable 1.5
    assert first["grpo/num_singleton_groups"] == 1
    assert first["grpo-trl/reward"] == pytest.approx(4.5 / 7)
    assert first["grpo-trl/reward_std"] == pytest.approx(np.std([1, 1, 1.5, 0, 0, 1, 0], ddof=1))
    # (1, 1) and (0, 0); the group with one scorable completion has no std, it does not count
    assert first["grpo-trl/frac_reward_zero_std"] == pytest.approx(4 / 8)
    assert math.isnan(first["loss"]) and first["reward"] == 0.5
    assert second["grpo/num_groups"] == 2 and second["grpo-trl/reward"] == pytest.approx(0.75)


def test_eval_records_are_mirrored_without_group_statistics(tmp_path):
    trainer = FakeTrainer(batch=2)
    cb = RLMetricsCallback(monitor=False).attach(trainer)
    a = args(tmp_path)
    cb.on_train_begin(a, state(0), None)
    trainer.generate({"acc": [1.0, 0.0]})
    cb.on_step_end(a, state(1), None)
    trainer.model.training = False
    cb.on_log(a, state(1), None, logs={"eval_reward": 0.25})
    trainer.model.training = True
    cb.on_log(a, state(1), None, logs={"reward": 0.5})
    rows = jsonl_rows(cb)
    assert "grpo/num_groups" not in rows[0] and rows[1]["grpo/num_groups"] == 1


@pytest.mark.parametrize(
    ("setup", "match"),
    [
        pytest.param(
            lambda t: t.generate({"acc": [1.0, 0.0, 1.0, 1.0]}, prompts=["x", "y", "z", "z"]),
            "not in consecutive groups of 2",
            id="layout",
        ),
        pytest.param(
            lambda t: (t.generate({"acc": [1.0, 0.0, 1.0, 1.0]}), t.generate({"acc": [0.0] * 4})),
            "2 generation batches were scored between two micro-steps",
            id="missed-batch",
        ),
        pytest.param(
            lambda t: t.generate({"acc": [1.0, 0.0, 1.0]}), "batch of 4 in groups of 2", id="ragged"
        ),
        pytest.param(
            lambda t: (t.generate({"acc": [1.0] * 4}), t.__dict__.pop("_logs")),
            "AttributeError",
            id="no-logs",
        ),
        pytest.param(lambda t: delattr(t, "_metrics"), "no TRL metrics store", id="no-metrics"),
    ],
)
def test_an_unexpected_trainer_switches_group_statistics_off_not_the_mirror(tmp_path, setup, match):
    trainer = FakeTrainer()
    cb = RLMetricsCallback(monitor=False, text_metrics=False, sample_rows=0).attach(trainer)
    a = args(tmp_path)
    cb.on_train_begin(a, state(0), None)
    setup(trainer)
    with pytest.warns(RuntimeWarning, match=f"group statistics are switched off.*{match}"):
        cb.on_step_end(a, state(1), None)
    cb.on_log(a, state(1), None, logs={"reward": 0.5})
    (row,) = jsonl_rows(cb)
    assert row["reward"] == 0.5 and not any(k.startswith("grpo") for k in row)
    assert cb.group_metrics is False


def test_values_that_are_not_numbers_are_left_out_once(tmp_path):
    cb = RLMetricsCallback(monitor=False, group_metrics=False)
    a = args(tmp_path)
    logs: dict[Any, Any] = {
        "reward": 1,
        "note": "hi",
        "step": None,
        3: 1.0,
        "t": torch.tensor(2.0),
        "ok": True,
    }
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for step in (1, 2):
            cb.on_log(a, state(step), None, logs=logs)
    # (a callback of an earlier test, collected meanwhile, may add a ResourceWarning)
    assert [str(w.message) for w in caught if str(w.message).startswith("RLMetricsCallback")] == [
        f"RLMetricsCallback: {why}; it is left out of the rlmetrics run"
        for why in (
            "logged value 'note' is not a number (str)",
            "logged key 'step' is reserved by the tracker",
            "logged key is not a string",
        )
    ]
    rows = jsonl_rows(cb)
    assert [(r["step"], r["reward"], r["t"], r["ok"]) for r in rows] == [
        (1, 1.0, 2.0, 1.0),
        (2, 1.0, 2.0, 1.0),
    ]


def test_other_processes_write_nothing_and_options_pass_through(tmp_path):
    trainer = FakeTrainer()
    cb = RLMetricsCallback("proj", "exp", log_dir=tmp_path / "logs", fsync=True, nonfinite="drop").attach(
        trainer
    )
    a = args(tmp_path)
    cb.on_train_begin(a, state(0, main=False), None)
    cb.on_log(a, state(1, main=False), None, logs={"reward": 1.0})
    assert cb.tracker is None and not (tmp_path / "logs").exists()
    with pytest.warns(DeprecationWarning, match=r"Tracker\(fsync=\.\.\.\) is deprecated"):
        cb.on_train_begin(a, state(0), None)  # the old keyword still reaches the backend, with a warning
    cb.on_log(a, state(1), None, logs={"reward": math.inf, "loss": 0.5})
    assert run_dir(cb) == tmp_path / "logs" / "proj" / "exp"
    assert cb.tracker is not None and cb.tracker.backends["jsonl"].fsync is True
    assert [{k: v for k, v in r.items() if k != "timestamp"} for r in jsonl_rows(cb)] == [
        {"step": 1, "loss": 0.5}
    ]
    assert json.loads((run_dir(cb) / "config.json").read_text()) == {"lr": 1e-6}
    assert trainer.callbacks == [cb]


def test_callbacks_argument_without_attach_warns_and_mirrors(tmp_path):
    cb = RLMetricsCallback(monitor=False)
    with pytest.warns(RuntimeWarning, match=r"need the trainer: .*\.attach\(trainer\)"):
        cb.on_train_begin(args(tmp_path), state(0), None)
    cb.on_log(args(tmp_path), state(1), None, logs={"reward": 1.0})
    assert jsonl_rows(cb)[0]["reward"] == 1.0


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        pytest.param(
            {"fsyncc": True}, TypeError, r"unknown option\(s\) 'fsyncc'; Tracker options are", id="option"
        ),
        pytest.param({"project": ""}, TypeError, "project must be a non-empty str", id="project"),
        pytest.param(
            {"experiment": 3}, TypeError, "experiment must be a non-empty str or None", id="experiment"
        ),
        pytest.param({"group_metrics": 1}, TypeError, "group_metrics must be a bool", id="group-metrics"),
        pytest.param(
            {"solved_threshold": "1"}, TypeError, "solved_threshold must be a number", id="threshold"
        ),
        pytest.param({"solved_threshold": math.nan}, ValueError, "solved_threshold must be finite", id="nan"),
    ],
)
def test_bad_arguments(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        RLMetricsCallback(**kwargs)


def test_attach_needs_a_trainer():
    with pytest.raises(TypeError, match="trainer must be a transformers/TRL Trainer; got object"):
        RLMetricsCallback().attach(object())


def test_a_run_name_with_path_separators_is_one_folder(tmp_path):
    """TRL run names such as 'org/model-grpo' name one run folder, not a path (the Tracker refuses those)."""
    cb = RLMetricsCallback(log_dir=tmp_path / "logs", monitor=False).attach(FakeTrainer())
    a = args(tmp_path)
    a.run_name = "org/model-grpo"
    cb.on_train_begin(a, state(0), None)
    cb.on_log(a, state(1), None, logs={"loss": 0.5})
    assert run_dir(cb) == tmp_path / "logs" / "trl" / "org_model-grpo"


# --- reward components and categories on a stand-in trainer -------------------------------------

#: two generation batches of 4 completions in groups of 2 (prompts p0, p1 in each), two functions
WINDOW = [
    {"acc": [1.0, 1.0, math.nan, 0.0], "fmt": [0.2, 0.0, math.nan, 0.9]},
    {"acc": [0.0, 1.0, 1.0, 1.0], "fmt": [math.nan, 0.5, 0.1, 0.1]},
]
WEIGHTS = {"acc": 1.0, "fmt": 0.5}


def window_row(tmp_path, trainer, window=WINDOW, prompts=None, **options) -> dict:
    """The logged row of one window of ``window``'s generation batches through the callback."""
    cb = RLMetricsCallback(monitor=False, **options).attach(trainer)
    a = args(tmp_path)
    cb.on_train_begin(a, state(0), None)
    for step, batch in enumerate(window, 1):
        trainer.generate(batch, prompts=None if prompts is None else prompts[step - 1])
        cb.on_step_end(a, state(step), None)
    cb.on_log(a, state(len(window)), None, logs={"reward": 0.5})
    cb.on_train_end(a, state(len(window)), None)
    (row,) = jsonl_rows(cb)
    return {k: v for k, v in row.items() if k not in ("step", "timestamp")} | {"_cb": cb}


def window_columns(window=WINDOW) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """Each function's values over the window, the weighted rewards (NaN: unscorable), the group ids."""
    per_func = {name: np.concatenate([np.asarray(b[name], dtype=float) for b in window]) for name in WEIGHTS}
    table = np.stack([per_func[n] * w for n, w in WEIGHTS.items()], axis=1)
    rewards = np.where(np.isnan(table).all(axis=1), np.nan, np.nansum(table, axis=1))
    uids = np.concatenate([2 * j + np.arange(4) // 2 for j in range(len(window))])
    return per_func, rewards, uids


def brute_components(per_func: dict[str, np.ndarray], rows: np.ndarray) -> dict[str, float]:
    """Each component's statistics over ``rows`` by numpy, the decider by plain Python."""
    out: dict[str, float] = {}
    deciders = []
    for i in np.flatnonzero(rows):
        given = {n: abs(WEIGHTS[n] * v[i]) for n, v in per_func.items() if not math.isnan(v[i])}
        if given:
            deciders.append(max(sorted(given), key=lambda n: given[n]))  # ties: the first name
    for name, values in per_func.items():
        x = values[rows][~np.isnan(values[rows])]
        out[K.reward_component_key(name, "mean")] = float(np.mean(x))
        out[K.reward_component_key(name, "std")] = float(np.std(x, ddof=1)) if len(x) > 1 else math.nan
        out[K.reward_component_key(name, "max")] = float(np.max(x))
        out[K.reward_component_key(name, "min")] = float(np.min(x))
        out[K.reward_component_key(name, "decides_frac")] = deciders.count(name) / len(deciders)
    return out


def stand_in(**kwargs) -> FakeTrainer:
    return FakeTrainer(names=tuple(WEIGHTS), weights=tuple(WEIGHTS.values()), **kwargs)


def test_reward_components_span_the_window(tmp_path):
    row = window_row(tmp_path, stand_in())
    per_func, _, _ = window_columns()
    want = brute_components(per_func, np.ones(8, dtype=bool))
    got = {k: v for k, v in row.items() if k.startswith(K.REWARD_COMPONENTS_PREFIX)}
    assert got == pytest.approx(want, nan_ok=True)
    assert not any(k.startswith(K.CATEGORY_PREFIX) for k in row)  # no group_by, no outcome split
    off = window_row(tmp_path / "off", stand_in(), reward_components=False)
    assert not any(k.startswith(K.REWARD_COMPONENTS_PREFIX) for k in off) and "grpo/num_groups" in off


def dataset(sources: dict[Any, str]):
    from datasets import Dataset

    return Dataset.from_dict({"prompt": list(sources), "data_source": list(sources.values())})


def assert_per_category(row: dict, group: str, category: str, rows: np.ndarray, window=WINDOW) -> None:
    """A category's metrics are the plain functions' on its completions alone."""
    from rlmetrics import compute_group_metrics, compute_reward_component_metrics

    per_func, rewards, uids = window_columns(window)
    want = compute_reward_component_metrics({n: v[rows] for n, v in per_func.items()}, weights=WEIGHTS)
    if group != K.OUTCOME_GROUP:
        want |= compute_group_metrics(uids[rows], rewards[rows], definition="trl", prefix=K.GRPO_TRL_PREFIX)
        ok = rows & ~np.isnan(rewards)
        want |= compute_group_metrics(uids[ok], rewards[ok], pass_k=(1, 2))  # 1 and num_generations
    head = K.category_key("", group, category)
    got = {k[len(head) :]: v for k, v in row.items() if k.startswith(head)}
    assert got == pytest.approx(want, nan_ok=True, rel=1e-12)


def brute_pass_rates(rows: np.ndarray, threshold: float) -> dict[str, float]:
    """pass@1 and pass@2 of the window's scorable completions in ``rows``: every k-subset of each
    group's scorable completions enumerated, solved when its weighted reward is >= threshold."""
    _, rewards, uids = window_columns()
    ok = rows & ~np.isnan(rewards)
    groups = [rewards[ok & (uids == u)] >= threshold for u in sorted(set(uids[ok]))]
    out = {}
    for k in (1, 2):
        rates = [
            np.mean([any(g[list(c)]) for c in itertools.combinations(range(len(g)), k)])
            for g in groups
            if len(g) >= k
        ]
        out[K.at_k(K.GRPO_PASS, k)] = float(np.mean(rates))
    return out


@pytest.mark.parametrize("threshold", [1.0, 1.1])
def test_the_window_gives_the_training_pass_rates(tmp_path, threshold):
    trainer = stand_in()
    trainer.train_dataset = dataset({"p0": "gsm8k", "p1": "math/algebra"})
    row = window_row(tmp_path, trainer, group_by="data_source", solved_threshold=threshold)
    everything = np.ones(8, dtype=bool)
    first = np.tile([True, True, False, False], 2)  # p0's groups
    for head, rows in [("", everything), (K.category_key("", "data_source", "gsm8k"), first)]:
        want = brute_pass_rates(rows, threshold)
        assert {k: row[head + k] for k in want} == pytest.approx(want, rel=1e-12)
    # p1's first group has one scorable completion: its pass@2 is of the second group alone
    math_rows = K.category_key("", "data_source", "math/algebra")
    assert row[math_rows + "grpo/pass@2"] == pytest.approx(brute_pass_rates(~first, threshold)["grpo/pass@2"])
    assert not any("pass@3" in k for k in row)  # k: 1 and num_generations (2)


def test_group_by_reads_the_training_datasets_column_by_prompt(tmp_path):
    trainer = stand_in()
    trainer.train_dataset = dataset({"p0": "gsm8k", "p1": "math/algebra", "p2": "gsm8k"})
    row = window_row(tmp_path, trainer, group_by="data_source")
    first = np.tile([True, True, False, False], 2)  # p0's groups
    assert_per_category(row, "data_source", "gsm8k", first)
    assert_per_category(row, "data_source", "math/algebra", ~first)
    assert "by_data_source/math%2Falgebra/grpo/frac_all_solved" in row
    assert row["_cb"].group_by == "data_source"


def test_group_by_prefers_what_a_reward_function_logged_with_log_extra(tmp_path):
    trainer = stand_in()
    trainer.train_dataset = dataset({"p0": "gsm8k", "p1": "math"})  # not read: the logged values win
    trainer._logs["extra"] = defaultdict(lambda: deque(maxlen=8))
    window = [dict(b) for b in WINDOW]
    labels = [["x", "x", "y", "y"], ["y", "y", "x", "x"]]
    cb = RLMetricsCallback(monitor=False, group_by="data_source").attach(trainer)
    a = args(tmp_path)
    cb.on_train_begin(a, state(0), None)
    for step, (batch, logged) in enumerate(zip(window, labels), 1):
        trainer._logs["extra"]["data_source"].extend(logged)  # TRL's _logs["extra"], gathered
        trainer.generate(batch)
        cb.on_step_end(a, state(step), None)
    cb.on_log(a, state(2), None, logs={"reward": 0.5})
    (row,) = jsonl_rows(cb)
    x = np.concatenate(labels) == "x"
    assert_per_category(row, "data_source", "x", x)
    assert_per_category(row, "data_source", "y", ~x)
    assert not any("gsm8k" in k for k in row)


def test_conversational_prompts_are_found_in_the_dataset(tmp_path):
    chat = [[{"role": "user", "content": f"q{i}"}] for i in range(2)]
    trainer = stand_in()
    from datasets import Dataset

    trainer.train_dataset = Dataset.from_dict({"prompt": chat, "data_source": ["a", "b"]})
    prompts = [[chat[0], chat[0], chat[1], chat[1]]] * 2
    row = window_row(tmp_path, trainer, prompts=prompts, group_by="data_source")
    first = np.tile([True, True, False, False], 2)
    assert_per_category(row, "data_source", "a", first)
    assert_per_category(row, "data_source", "b", ~first)


@pytest.mark.parametrize(
    ("sources", "match"),
    [
        pytest.param({"p0": "a"}, "a prompt is not in the training dataset: 'p1'", id="missing-prompt"),
        pytest.param(None, "no training dataset with columns", id="no-dataset"),
    ],
)
def test_unreadable_categories_switch_off_only_the_per_category_statistics(tmp_path, sources, match):
    trainer = stand_in()
    trainer.train_dataset = None if sources is None else dataset(sources)
    with pytest.warns(RuntimeWarning, match=f"statistics per 'data_source' are switched off .*{match}"):
        row = window_row(tmp_path, trainer, group_by="data_source")
    assert not any(k.startswith(K.CATEGORY_PREFIX) for k in row)
    assert "grpo/num_groups" in row and K.reward_component_key("acc", "mean") in row
    assert row["_cb"].group_by is None and row["_cb"].group_metrics


def test_a_prompt_with_two_sources_in_the_dataset_is_refused(tmp_path):
    from datasets import Dataset

    trainer = stand_in()
    trainer.train_dataset = Dataset.from_dict({"prompt": ["p0", "p1", "p0"], "data_source": ["a", "b", "c"]})
    with pytest.warns(RuntimeWarning, match=r"a prompt has two 'data_source' values in the training dataset"):
        row = window_row(tmp_path, trainer, group_by="data_source")
    assert not any(k.startswith(K.CATEGORY_PREFIX) for k in row)


def test_split_by_outcome_gives_the_reward_components_of_right_and_wrong(tmp_path):
    row = window_row(tmp_path, stand_in(), split_by_outcome=True, solved_threshold=1.0)
    _, rewards, _ = window_columns()
    scorable = ~np.isnan(rewards)
    right = scorable & (rewards >= 1.0)
    assert_per_category(row, K.OUTCOME_GROUP, K.OUTCOME_CORRECT, right)
    assert_per_category(row, K.OUTCOME_GROUP, K.OUTCOME_INCORRECT, scorable & ~right)
    assert not any(k.startswith("by_outcome/") and "/grpo" in k for k in row)  # groups mix outcomes


def test_sources_beyond_max_categories_are_one_other(tmp_path):
    trainer = stand_in()
    trainer.train_dataset = dataset({"p0": "a", "p1": "b"})
    with pytest.warns(RuntimeWarning, match=r"more than max_categories=1"):
        row = window_row(tmp_path, trainer, group_by="data_source", max_categories=1)
    assert_per_category(row, "data_source", K.OTHER_CATEGORY, np.ones(8, dtype=bool))


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        pytest.param(
            {"reward_components": 1}, TypeError, "reward_components must be a bool", id="components"
        ),
        pytest.param({"split_by_outcome": "no"}, TypeError, "split_by_outcome must be a bool", id="outcome"),
        pytest.param({"group_by": 3}, TypeError, "group_by must be a dataset column name or None", id="int"),
        pytest.param({"group_by": "data source"}, ValueError, r"got 'data source'", id="space"),
        pytest.param(
            {"group_by": "outcome", "split_by_outcome": True},
            ValueError,
            "must differ from 'outcome'",
            id="clash",
        ),
        pytest.param({"max_categories": 0}, ValueError, "max_categories must be an integer >= 1", id="zero"),
    ],
)
def test_bad_category_arguments(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        RLMetricsCallback(**kwargs)


# --- text statistics and sample tables on a stand-in ---------------------------------------------


def text_run(tmp_path, batches, **options) -> RLMetricsCallback:
    """A window of generation batches ``(per_func, prompts, completions)`` logged at step 5."""
    trainer = FakeTrainer(names=("acc",), batch=len(batches[0][0]["acc"]))
    cb = RLMetricsCallback(monitor=False, **options).attach(trainer)
    a = args(tmp_path)
    cb.on_train_begin(a, state(0), None)
    for step, (per_func, prompts, completions) in enumerate(batches, start=1):
        trainer.generate(per_func, prompts=prompts, completions=completions)
        cb.on_step_end(a, state(step), None)
    cb.on_log(a, state(5), None, logs={"reward": 0.5})
    cb.on_train_end(a, state(5), None)
    return cb


def test_conversations_are_their_messages_text(tmp_path):
    def chat(text):
        return [{"role": "assistant", "content": text}]

    prompts = [
        [{"role": "system", "content": "be brief"}, {"role": "user", "content": f"q{i // 2}"}]
        for i in range(4)
    ]
    parts = [{"type": "text", "text": "ha "}, {"type": "image"}, {"type": "text", "text": "ha"}]
    completions = [chat("yes"), chat("ha ha ha ha ha"), [{"role": "assistant", "content": parts}], chat("")]
    cb = text_run(tmp_path, [({"acc": [1.0, 0.0, 0.5, 0.25]}, prompts, completions)])
    (row,) = jsonl_rows(cb)
    want = compute_text_metrics(["yes", "ha ha ha ha ha", "ha ha", ""])
    assert {k: row[k] for k in want} == pytest.approx(want)
    assert row["text/empty_ratio"] == 0.25 and row["text/repetition/loop_ratio"] == 0.25
    table = read_samples(run_dir(cb))[5]
    # max, min, the lower median (0.25), then the one row left, drawn at random
    assert table.response == ("yes", "ha ha ha ha ha", "", "ha ha")
    assert table.prompt[0] == "system: be brief\nuser: q0"


def test_unscorable_completions_are_counted_in_the_text_not_the_table(tmp_path):
    batch = ({"acc": [1.0, math.nan, 0.0, math.nan]}, None, ["a b", "c", "d e f", ""])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # groups of one scorable completion: no std
        cb = text_run(tmp_path, [batch])
    (row,) = jsonl_rows(cb)
    assert row["text/num_responses"] == 4 and row["text/empty_ratio"] == 0.25
    table = read_samples(run_dir(cb))[5]
    assert table.response == ("a b", "d e f") and table.reward == (1.0, 0.0)


def test_the_window_merges_its_batches_and_the_table_is_of_the_last(tmp_path):
    first = ({"acc": [1.0, 0.0, 1.0, 0.0]}, None, ["one two", "one one one one", "x", "y z"])
    second = ({"acc": [0.0, 0.25, 0.75, 1.0]}, None, ["p", "q q", "r r r", "s s s s"])
    cb = text_run(tmp_path, [first, second], sample_rows=3, text_options={"ngram": 1})
    (row,) = jsonl_rows(cb)
    want = compute_text_metrics([*first[2], *second[2]], ngram=1)
    assert {k: row[k] for k in want} == pytest.approx(want)
    table = read_samples(run_dir(cb))[5]
    assert table.response == ("s s s s", "p", "q q") and table.chosen == ("max", "min", "median")


def test_the_table_has_the_categories_of_group_by(tmp_path):
    trainer = FakeTrainer()
    trainer.train_dataset = dataset({"p0": "gsm8k", "p1": "math"})
    cb = RLMetricsCallback(monitor=False, group_by="data_source").attach(trainer)
    a = args(tmp_path)
    cb.on_train_begin(a, state(0), None)
    trainer.generate({"acc": [1.0, 0.0, 0.5, 0.5]})
    cb.on_step_end(a, state(1), None)
    cb.on_log(a, state(1), None, logs={"reward": 0.5})
    table = read_samples(run_dir(cb))[1]
    assert dict(zip(table.prompt, table.category)) == {"p0": "gsm8k", "p1": "math"}


def test_text_and_samples_switched_off(tmp_path):
    batch = ({"acc": [1.0, 0.0, 1.0, 0.0]}, None, None)
    cb = text_run(tmp_path, [batch], text_metrics=False, sample_rows=0)
    (row,) = jsonl_rows(cb)
    assert "grpo/num_groups" in row and not any(k.startswith("text/") for k in row)
    assert not (run_dir(cb) / "samples.jsonl").exists()
    cb = text_run(tmp_path / "b", [batch], text_metrics=False)  # the table alone
    assert (
        not any(k.startswith("text/") for k in jsonl_rows(cb)[0]) and len(read_samples(run_dir(cb))[5]) == 4
    )


def test_a_completion_log_without_completions_switches_off_the_text_only(tmp_path):
    trainer = FakeTrainer()
    del trainer._logs["completion"]
    cb = RLMetricsCallback(monitor=False).attach(trainer)
    a = args(tmp_path)
    cb.on_train_begin(a, state(0), None)
    trainer._metrics["train"]["reward"].append(0.0)
    trainer._logs["prompt"].extend(["p0", "p0", "p1", "p1"])
    trainer._logs["rewards"]["acc"].extend([1.0, 0.0, 1.0, 1.0])
    with pytest.warns(RuntimeWarning, match=r"text statistics and sample tables are switched off \(KeyError"):
        cb.on_step_end(a, state(1), None)
    cb.on_log(a, state(1), None, logs={"reward": 0.5})
    (row,) = jsonl_rows(cb)
    assert row["grpo/num_groups"] == 2 and not any(k.startswith("text/") for k in row)


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"text_metrics": "yes"}, TypeError, "text_metrics must be a bool; got str 'yes'"),
        ({"text_options": {"prefix": "t/"}}, TypeError, r"text_options: unknown option\(s\) 'prefix'"),
        ({"text_options": "ngram=2"}, TypeError, "text_options must be a dict"),
        ({"text_options": {"format_pattern": "("}}, ValueError, "format_pattern is not a valid regular"),
        ({"text_options": {"ngram": 0}}, ValueError, "ngram must be an integer >= 1; got 0"),
        ({"sample_rows": -1}, ValueError, "sample_rows must be an integer >= 0; got -1"),
        ({"sample_bytes": 10}, ValueError, "sample_bytes must be an integer >= 128; got 10"),
    ],
    ids=["flag", "unknown", "not-a-dict", "pattern", "ngram", "rows", "bytes"],
)
def test_bad_text_options(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        RLMetricsCallback(**kwargs)


# --- stopping a lost run ----------------------------------------------------------------------


def control():
    """transformers' TrainerControl, the two flags the callback sets."""
    return types.SimpleNamespace(should_training_stop=False, should_save=False)


@pytest.mark.parametrize(
    ("actions", "save_on_stop", "stops", "raises"),
    [
        pytest.param(None, True, False, False, id="warn"),
        pytest.param({"nonfinite": "stop"}, True, True, False, id="stop"),
        pytest.param({"error": "stop"}, False, True, False, id="stop-without-checkpoint"),
        pytest.param({"nonfinite": "raise"}, True, True, True, id="raise-after-the-checkpoint"),
    ],
)
def test_the_monitor_stops_the_training_with_a_checkpoint_first(
    tmp_path, actions, save_on_stop, stops, raises
):
    from rlmetrics.errors import HealthWarning, RunStopped

    monitor = HealthMonitor(every=1, budget=None, actions=actions)
    cb = RLMetricsCallback(
        monitor=monitor,
        group_metrics=False,
        reward_components=False,
        text_metrics=False,
        sample_rows=0,
        save_on_stop=save_on_stop,
    )
    a, ctl = args(tmp_path), control()
    cb.on_train_begin(a, state(0), ctl)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for step in range(1, 6):
            loss = math.nan if step == 3 else 0.5
            cb.on_log(a, state(step), ctl, logs={"loss": loss, "grad_norm": 1.0, "reward": 0.5})
            if ctl.should_training_stop:
                break
    assert (ctl.should_training_stop, ctl.should_save) == (stops, stops and save_on_stop)
    assert step == (3 if stops else 5)
    stopping = [str(w.message) for w in caught if "stopping the training" in str(w.message)]
    assert [w.category for w in caught if "stopping" in str(w.message)] == [HealthWarning] * stops
    if stops:
        assert stopping[0].startswith(
            "rlmetrics health: stopping the training at step 3 on nonfinite (error)"
        )
        assert ("checkpoint of this step is saved" in stopping[0]) == save_on_stop
    if raises:
        with pytest.raises(RunStopped, match=r"run stopped at step 3 on nonfinite"):
            cb.on_train_end(a, state(step), ctl)
        cb.on_train_end(a, state(step), ctl)  # raised once
    else:
        cb.on_train_end(a, state(step), ctl)
    rows = jsonl_rows(cb)
    actions_logged = {
        r["step"]: {k: v for k, v in r.items() if k.startswith(K.HEALTH_ACTION_PREFIX)} for r in rows
    }
    want = {3: {K.health_action("nonfinite"): 2.0 if raises else 1.0}} if stops else {}
    assert {s: v for s, v in actions_logged.items() if v} == want
    assert any(r.get(K.health("nonfinite")) == 2.0 for r in rows)
    assert cb.tracker is not None and cb.tracker.monitor is monitor  # not switched off by the raise


def test_bad_save_on_stop():
    with pytest.raises(TypeError, match="save_on_stop must be a bool; got int"):
        RLMetricsCallback(save_on_stop=1)


def test_a_real_grpo_run_stops_on_a_planted_nan_reward_with_its_checkpoint_saved(tmp_path, monkeypatch):
    """A reward function that turns NaN at the 3rd generation batch: the run of 8 steps ends at
    the log of step 4, a checkpoint of that step saved, trainer.train() raising RunStopped."""
    from rlmetrics.errors import RunStopped

    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.setenv(name, "1")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    calls = []

    def planted(completions, **kwargs):
        calls.append(len(completions))
        return [math.nan if len(calls) >= 3 else float("a" in c.split()) for c in completions]

    trainer = tiny_trainer(tmp_path / "run", [planted], max_steps=8)
    monitor = HealthMonitor(every=1, budget=None, actions={"nonfinite": "raise"})
    cb = RLMetricsCallback(experiment="stopped", monitor=monitor, group_metrics=False).attach(trainer)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RunStopped, match=r"on nonfinite \(error\)"):
            trainer.train()
    assert trainer.state.global_step == 4 and len(calls) == 4
    assert (tmp_path / "run" / "checkpoint-4").is_dir()
    rows = read_jsonl(run_dir(cb) / "metrics.jsonl")
    acted = [r["step"] for r in rows if K.health_action("nonfinite") in r]
    assert acted == [4] and {r["step"] for r in rows} == {2, 4}
    assert cb.tracker is not None and cb.tracker._finished
