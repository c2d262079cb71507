"""Timing, throughput and MFU metrics (verl's ``compute_timing_metrics`` and friends)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from rlmetrics import keys as K
from rlmetrics._core.array import check_dense, check_finite_scalar, is_array, raise_invalid_mask, to_host
from rlmetrics._core.batch import as_batch
from rlmetrics._core.checks import check_int, check_real_dtype
from rlmetrics._core.lengths import prompt_response_lengths

__all__ = [
    "ACCELERATOR_PEAK_FLOPS",
    "compute_mfu",
    "compute_throughout_metrics",
    "compute_throughput_metrics",
    "compute_timing_metrics",
]

#: Dense bf16 peak FLOP/s per accelerator (no sparsity), from the vendors' data sheets.
ACCELERATOR_PEAK_FLOPS: dict[str, float] = {
    "A100": 312e12,
    "A800": 312e12,
    "H100": 989e12,  # SXM
    "H100-SXM": 989e12,
    "H100-PCIE": 756e12,
    "H800": 989e12,
    "H20": 148e12,
    "H200": 989e12,
    "B200": 2250e12,
    "GB200": 2500e12,
    "L40S": 362e12,
    "L4": 121e12,
    "A10G": 70e12,
    "RTX4090": 165e12,
    "MI250X": 383e12,
    "MI300X": 1307e12,
    "MI325X": 1307e12,
    "TPU-V5E": 197e12,
    "TPU-V5P": 459e12,
}


def _check_timing_raw(timing_raw: Any) -> dict[str, float]:
    if not isinstance(timing_raw, Mapping):
        raise TypeError(
            f"timing_raw must be a dict of stage name to seconds; got {type(timing_raw).__name__}"
        )
    return {
        str(name): check_finite_scalar(value, f"timing_raw[{name!r}]") for name, value in timing_raw.items()
    }


def _token_counts(batch: Any) -> tuple[float, float]:
    view = as_batch(batch)
    prompt_len, response_len, n_invalid = prompt_response_lengths(view)
    n_prompt, n_response, invalid = to_host([prompt_len.sum(), response_len.sum(), n_invalid or 0])
    if invalid:
        raise_invalid_mask(view.tensor("attention_mask"), f"{view.arg}['attention_mask']")
    return n_prompt, n_response


def compute_timing_metrics(batch: Any, timing_raw: Mapping[str, float]) -> dict[str, float]:
    """Per-stage wall time and time per token.

    Parameters
    ----------
    batch : DataProto, TensorDict or dict of arrays
        Needs ``prompt_length`` and ``response_length`` (shape ``(B,)``) or ``responses``
        ``(B, R)`` and ``attention_mask`` ``(B, P + R)``.
    timing_raw : dict[str, float]
        Stage name to seconds, e.g. from :func:`rlmetrics.timer`.

    Returns
    -------
    dict[str, float]
        ``timing_s/{stage}`` for every stage, and ``timing_per_token_ms/{stage}`` for ``gen``
        (per response token) and ``ref``, ``values``, ``adv``, ``update_critic``,
        ``update_actor`` (per prompt + response token); 0.0 when there are no tokens, as in verl.

    Examples
    --------
    >>> import numpy as np
    >>> batch = {"prompt_length": np.array([3, 5]), "response_length": np.array([2, 0])}
    >>> for key, value in compute_timing_metrics(batch, {"gen": 0.5, "update_actor": 1.0}).items():
    ...     print(key, value)
    timing_s/gen 0.5
    timing_s/update_actor 1.0
    timing_per_token_ms/gen 250.0
    timing_per_token_ms/update_actor 100.0
    """
    timings = _check_timing_raw(timing_raw)
    n_prompt, n_response = _token_counts(batch)
    n_overall = n_prompt + n_response
    out: dict[str, float] = {K.timing_s(name): value for name, value in timings.items()}
    for name, value in timings.items():
        if name in K.PER_RESPONSE_TOKEN_STAGES:
            n = n_response
        elif name in K.PER_TOKEN_STAGES:
            n = n_overall
        else:
            continue
        out[K.timing_per_token_ms(name)] = value * 1000.0 / n if n > 0 else 0.0
    return out


def _peak_flops(peak_flops: float | str) -> float:
    if isinstance(peak_flops, str):
        name = peak_flops.upper().replace(" ", "-").replace("_", "-").removeprefix("NVIDIA-")
        if name not in ACCELERATOR_PEAK_FLOPS:
            known = ", ".join(sorted(ACCELERATOR_PEAK_FLOPS))
            raise ValueError(f"peak_flops: unknown accelerator {peak_flops!r}; known: {known}")
        return ACCELERATOR_PEAK_FLOPS[name]
    return check_finite_scalar(peak_flops, "peak_flops", positive=True)


def compute_mfu(
    num_tokens: float,
    seconds: float,
    n_gpus: int,
    *,
    flops_per_token: float | None = None,
    num_params: float | None = None,
    peak_flops: float | str,
) -> float:
    """Model FLOPs utilisation: achieved FLOP/s per GPU over the accelerator's peak.

    Parameters
    ----------
    num_tokens : float
        Tokens processed in ``seconds``.
    seconds : float
        Wall time, > 0.
    n_gpus : int
        Number of accelerators, > 0.
    flops_per_token : float, optional
        Training FLOPs per token. Give this or ``num_params``.
    num_params : float, optional
        Parameter count; ``flops_per_token = 6 * num_params`` (forward + backward, dense).
    peak_flops : float or str
        Peak FLOP/s of one accelerator, or a name from :data:`ACCELERATOR_PEAK_FLOPS`
        (dense bf16), e.g. ``"H100"``.

    Examples
    --------
    >>> round(compute_mfu(1e5, 1.0, 8, num_params=7e9, peak_flops="H100"), 4)
    0.5309
    """
    if (flops_per_token is None) == (num_params is None):
        raise ValueError("give exactly one of flops_per_token= or num_params=")
    if flops_per_token is None:
        flops_per_token = 6.0 * check_finite_scalar(num_params, "num_params", positive=True)
    fpt = check_finite_scalar(flops_per_token, "flops_per_token", positive=True)
    secs = check_finite_scalar(seconds, "seconds", positive=True)
    gpus = _check_n_gpus(n_gpus)
    return num_tokens * fpt / (secs * gpus * _peak_flops(peak_flops))


def _check_n_gpus(n_gpus: Any) -> int:
    # verl takes any number here; a whole float (8.0 from a config) is a count too.
    if isinstance(n_gpus, float) and n_gpus.is_integer():
        n_gpus = int(n_gpus)
    return check_int(n_gpus, "n_gpus", minimum=1)


def _global_token_num(batch: Any) -> float:
    view = as_batch(batch)
    tokens = view.meta_info.get("global_token_num") if view.meta_info else None
    if tokens is None:
        # Not recorded by the trainer: count the attention mask.
        mask = view.tensor(
            "attention_mask", why="needed to count tokens when meta_info has no global_token_num"
        )
        (total,) = to_host([mask.sum()])
        return total
    return _token_count(tokens, "batch.meta_info['global_token_num']")


def _token_count(tokens: Any, name: str) -> float:
    """The total of a token count or of per-sample counts, each a finite number >= 0.

    A string is refused, not iterated (``"1000"`` would otherwise be four counts of 1, 0, 0, 0).
    """
    if is_array(tokens):
        counts = [float(c) for c in check_real_dtype(check_dense(tokens, name), name).reshape(-1).tolist()]
    elif isinstance(tokens, Mapping):
        raise TypeError(f"{name} must be a token count or a list of per-sample counts; got a dict")
    elif isinstance(tokens, str | bytes) or not isinstance(tokens, Iterable):
        counts = [check_finite_scalar(tokens, name)]
    else:
        counts = [check_finite_scalar(t, f"{name}[{i}]") for i, t in enumerate(tokens)]
    for i, c in enumerate(counts):
        if not math.isfinite(c) or c < 0:
            shown = int(c) if c.is_integer() else c
            raise ValueError(f"{name} must hold token counts >= 0; entry {i} is {shown}")
    return math.fsum(counts)


def compute_throughput_metrics(
    batch: Any,
    timing_raw: Mapping[str, float],
    n_gpus: int,
    *,
    flops_per_token: float | None = None,
    num_params: float | None = None,
    peak_flops: float | str | None = None,
) -> dict[str, float]:
    """Tokens per second per GPU, and MFU when the model's FLOPs and the peak are given.

    Parameters
    ----------
    batch : DataProto, TensorDict or dict of arrays
        ``meta_info["global_token_num"]`` (a list of per-sample token counts) is summed; when
        absent, the ``attention_mask`` is counted.
    timing_raw : dict[str, float]
        Must hold ``"step"``, the step's wall time in seconds (> 0).
    n_gpus : int
        Number of GPUs (> 0).
    flops_per_token, num_params, peak_flops : optional, keyword-only
        Give ``peak_flops`` (FLOP/s or an accelerator name) and one of the other two to also get
        ``perf/mfu`` (see :func:`compute_mfu`).

    Returns
    -------
    dict[str, float]
        ``perf/total_num_tokens``, ``perf/time_per_step``, ``perf/throughput`` (and ``perf/mfu``).

    Examples
    --------
    >>> batch = {"meta_info": {"global_token_num": [1000, 3000]}}
    >>> compute_throughput_metrics(batch, {"step": 2.0}, n_gpus=4)
    {'perf/total_num_tokens': 4000.0, 'perf/time_per_step': 2.0, 'perf/throughput': 500.0}
    """
    gpus = _check_n_gpus(n_gpus)
    if not isinstance(timing_raw, Mapping) or K.STAGE_STEP not in timing_raw:
        present = (
            ", ".join(sorted(timing_raw)) if isinstance(timing_raw, Mapping) else type(timing_raw).__name__
        )
        raise ValueError(
            f"timing_raw must hold {K.STAGE_STEP!r} (the step's wall time in seconds); "
            f"got: {present or 'none'}"
        )
    step = check_finite_scalar(timing_raw[K.STAGE_STEP], f"timing_raw[{K.STAGE_STEP!r}]", positive=True)
    total = _global_token_num(batch)
    out = {
        K.PERF_TOTAL_NUM_TOKENS: total,
        K.PERF_TIME_PER_STEP: step,
        K.PERF_THROUGHPUT: total / (step * gpus),
    }
    if peak_flops is not None:
        out[K.PERF_MFU] = compute_mfu(
            total, step, gpus, flops_per_token=flops_per_token, num_params=num_params, peak_flops=peak_flops
        )
    elif flops_per_token is not None or num_params is not None:
        raise ValueError(f"{K.PERF_MFU} needs peak_flops= (FLOP/s or an accelerator name such as 'H100')")
    return out


#: verl's spelling of :func:`compute_throughput_metrics`.
compute_throughout_metrics = compute_throughput_metrics
