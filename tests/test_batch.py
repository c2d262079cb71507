"""rlmetrics._core.batch: as_batch / BatchView over dicts, .batch objects, TensorDict and verl's DataProto."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import numpy as np
import pytest

from rlmetrics._core.batch import BatchView, as_batch


class StandIn:
    """A DataProto look-alike: ``.batch``, ``.non_tensor_batch`` and ``.meta_info`` attributes."""

    def __init__(self, batch: Any, non_tensor_batch: Any = None, meta_info: Any = None) -> None:
        self.batch = batch
        self.non_tensor_batch = non_tensor_batch
        self.meta_info = meta_info


class BatchOnly:
    """An object with only a ``.batch`` mapping."""

    def __init__(self, batch: Any) -> None:
        self.batch = batch


def arrays(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "advantages": rng.standard_normal((3, 4)).astype(np.float32),
        "response_mask": (rng.random((3, 4)) < 0.7).astype(np.int64),
    }


# --- plain dicts ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value", "in_tensors", "in_non_tensors"),
    [
        ("advantages", np.zeros((2, 3), dtype=np.float32), True, False),
        ("flags", np.zeros(2, dtype=bool), True, False),
        ("uid", np.array(["a", "b"], dtype=object), False, True),
        ("data_source", np.array(["gsm8k", "math"]), False, True),
        ("texts", np.array(["x", "y"]), False, True),
        ("raw_bytes", np.array([b"x", b"y"]), False, True),
        ("objects", np.array([{}, {}], dtype=object), False, True),
        ("__num_turns__", np.array([1, 3]), True, True),
        ("tool_call_counts", np.array([0, 2]), True, True),
        ("some_list", [1, 2], False, True),
        ("scalar", 3.5, False, True),
        ("batch", np.zeros((2, 2)), True, False),
    ],
    ids=[
        "float-array",
        "bool-array",
        "uid-object",
        "data_source-str",
        "other-str",
        "bytes",
        "other-object",
        "num_turns-int",
        "tool_calls-int",
        "list",
        "python-scalar",
        "key-named-batch",
    ],
)
def test_dict_entries_are_sorted_into_tensors_and_non_tensors(key, value, in_tensors, in_non_tensors):
    view = as_batch({key: value})
    assert view.has(key) == in_tensors
    assert (key in view.non_tensors) == in_non_tensors
    if in_tensors:
        assert view.tensor(key) is value
    if in_non_tensors:
        assert view.non_tensor(key) is value
    assert view.meta_info == {}


def test_dict_meta_info_and_non_tensor_batch_entries():
    tensors = arrays(1)
    turns = np.array([1, 2, 3])
    view = as_batch(
        {
            **tensors,
            "meta_info": {"global_token_num": [5, 6, 7]},
            "non_tensor_batch": {"__num_turns__": turns},
        }
    )
    assert sorted(view.tensors) == ["advantages", "response_mask"]
    assert view.meta_info == {"global_token_num": [5, 6, 7]}
    assert view.non_tensor("__num_turns__") is turns
    assert not view.has("meta_info") and not view.has("non_tensor_batch")


@pytest.mark.parametrize(
    ("value", "in_tensors"),
    [(5, False), ([1, 2], False), (np.array([1, 2]), True)],
    ids=["int", "list", "array"],
)
def test_meta_info_that_is_not_a_mapping_is_an_ordinary_entry(value, in_tensors):
    view = as_batch({"meta_info": value})
    assert view.meta_info == {}
    assert view.has("meta_info") == in_tensors
    assert (view.get("meta_info") if in_tensors else view.non_tensor("meta_info")) is value


def test_any_mapping_works():
    data = arrays(2)
    view = as_batch(MappingProxyType(data))
    assert sorted(view.tensors) == sorted(data)
    np.testing.assert_array_equal(view.tensor("advantages"), data["advantages"])


def test_dict_with_torch_tensors():
    torch = pytest.importorskip("torch")
    t = torch.zeros(2, 3, dtype=torch.bfloat16)
    view = as_batch({"values": t, "uid": np.array(["p", "q"], dtype=object)})
    assert view.tensor("values") is t
    assert view.non_tensor("uid").tolist() == ["p", "q"]


# --- BatchView lookups ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tensors", "why", "expected"),
    [
        ({}, None, "batch is missing the tensor 'returns'; tensors present: none"),
        (
            {"values": 1, "advantages": 2},
            None,
            "batch is missing the tensor 'returns'; tensors present: advantages, values",
        ),
        (
            {"values": 1},
            "use_critic=True",
            "batch is missing the tensor 'returns' (use_critic=True); tensors present: values",
        ),
    ],
    ids=["empty", "sorted-keys", "with-reason"],
)
def test_missing_tensor_error_lists_the_keys_present(tensors, why, expected):
    view = BatchView(tensors=tensors)
    with pytest.raises(ValueError) as info:
        view.tensor("returns", why=why)
    assert str(info.value) == expected


def test_argument_name_is_used_in_errors():
    view = as_batch(arrays(), arg="data")
    with pytest.raises(
        ValueError,
        match=r"^data is missing the tensor 'returns'; tensors present: advantages, response_mask$",
    ):
        view.tensor("returns")


def test_get_non_tensor_and_has():
    value = np.ones(2)
    view = BatchView(tensors={"a": value}, non_tensors={"uid": "u"}, meta_info={"m": 1})
    assert view.has("a") and not view.has("b") and not view.has("uid")
    assert view.get("a") is value
    assert view.get("b") is None and view.get("b", 7) == 7
    assert view.non_tensor("uid") == "u"
    assert view.non_tensor("a") is None and view.non_tensor("a", "d") == "d"


def test_batch_view_is_frozen_and_passed_through():
    view = as_batch(arrays())
    with pytest.raises(dataclasses.FrozenInstanceError):
        view.arg = "other"  # type: ignore[misc]
    assert as_batch(view) is view
    assert as_batch(view, arg="ignored").arg == "batch"


# --- objects with .batch ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("non_tensor_batch", "meta_info", "expected_non", "expected_meta"),
    [
        (
            {"uid": np.array(["a"], dtype=object)},
            {"global_token_num": [3]},
            ["uid"],
            {"global_token_num": [3]},
        ),
        (None, None, [], {}),
        ({}, {}, [], {}),
    ],
    ids=["full", "none-attributes", "empty-attributes"],
)
def test_object_with_batch_attributes(non_tensor_batch, meta_info, expected_non, expected_meta):
    tensors = arrays(3)
    view = as_batch(StandIn(tensors, non_tensor_batch, meta_info), arg="data")
    assert view.tensors is tensors
    assert sorted(view.non_tensors) == expected_non
    assert dict(view.meta_info) == expected_meta
    assert view.arg == "data"


def test_object_with_only_batch():
    tensors = arrays(4)
    view = as_batch(BatchOnly(tensors))
    assert view.tensors is tensors
    assert isinstance(view.non_tensors, Mapping) and len(view.non_tensors) == 0
    assert isinstance(view.meta_info, Mapping) and len(view.meta_info) == 0
    with pytest.raises(ValueError, match=r"tensors present: advantages, response_mask$"):
        view.tensor("values")


# --- wrong types ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("batch", "type_name"),
    [
        (5, "int"),
        ("advantages", "str"),
        (None, "NoneType"),
        ([np.zeros(3)], "list"),
        (np.zeros((2, 3)), "ndarray"),
        (object(), "object"),
        (BatchOnly(5), "BatchOnly"),
        (BatchOnly(None), "BatchOnly"),
    ],
    ids=["int", "str", "none", "list", "ndarray", "object", "batch-not-a-mapping", "batch-none"],
)
def test_wrong_types_raise_type_error(batch, type_name):
    with pytest.raises(TypeError) as info:
        as_batch(batch, arg="data")
    message = str(info.value)
    assert message.startswith("data must be a verl DataProto, a TensorDict, an object with a .batch mapping")
    assert message.endswith(f"; got {type_name}")


# --- TensorDict and DataProto -----------------------------------------------------------------


def test_tensordict():
    torch = pytest.importorskip("torch")
    tensordict = pytest.importorskip("tensordict")
    rng = np.random.default_rng(5)
    adv = torch.from_numpy(rng.standard_normal((3, 4)).astype(np.float32))
    td = tensordict.TensorDict({"advantages": adv, "response_mask": torch.ones(3, 4)}, batch_size=[3])
    view = as_batch(td)
    assert view.tensors is td
    assert view.has("advantages") and not view.has("returns")
    torch.testing.assert_close(view.tensor("advantages"), adv)
    assert len(view.non_tensors) == 0 and len(view.meta_info) == 0
    with pytest.raises(
        ValueError,
        match=r"^batch is missing the tensor 'returns'; tensors present: advantages, response_mask$",
    ):
        view.tensor("returns")


@pytest.fixture
def data_proto_cls() -> Any:
    pytest.importorskip("verl")
    from verl import DataProto

    return DataProto


def test_verl_dataproto(data_proto_cls):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(6)
    adv = torch.from_numpy(rng.standard_normal((2, 3)).astype(np.float32))
    turns = np.array([1, 4])
    dp = data_proto_cls.from_dict(
        tensors={"advantages": adv},
        non_tensors={"__num_turns__": turns, "uid": np.array(["x", "y"], dtype=object)},
        meta_info={"global_token_num": [10, 12]},
    )
    view = as_batch(dp, arg="data")
    assert view.has("advantages") and not view.has("__num_turns__")
    torch.testing.assert_close(view.tensor("advantages"), adv)
    np.testing.assert_array_equal(view.non_tensor("__num_turns__"), turns)
    assert view.non_tensor("uid").tolist() == ["x", "y"]
    assert view.meta_info["global_token_num"] == [10, 12]
    with pytest.raises(
        ValueError, match=r"^data is missing the tensor 'values'; tensors present: advantages$"
    ):
        view.tensor("values")


def test_verl_dataproto_without_extras(data_proto_cls):
    torch = pytest.importorskip("torch")
    dp = data_proto_cls.from_dict(tensors={"returns": torch.zeros(2, 3)})
    view = as_batch(dp)
    assert view.has("returns")
    assert len(view.non_tensors) == 0 and dict(view.meta_info) == {}


def test_verl_dataproto_without_tensors(data_proto_cls):
    """A DataProto holding no tensors (batch=None) gives a view with its non-tensors and meta info."""
    uid = np.array(["x", "y"], dtype=object)
    dp = data_proto_cls(batch=None, non_tensor_batch={"uid": uid}, meta_info={"k": 1})
    view = as_batch(dp)
    assert not view.has("advantages")
    assert view.non_tensor("uid") is uid and view.meta_info == {"k": 1}


# --- tensors without dense data, and numpy beside torch, through every batch family -----------

torch = pytest.importorskip("torch")


def _family_batch() -> dict[str, Any]:
    from batches import make_batch

    tensors, non_tensors = make_batch(6, 4, 5, seed=0, non_tensors=True)
    g = torch.Generator().manual_seed(1)
    tensors["sum_pi_squared"] = torch.rand(6, 5, generator=g)
    tensors["old_log_probs"] = -torch.rand(6, 5, generator=g)
    return {**tensors, **non_tensors, "uid": np.array(list("aabbcc"), dtype=object)}


def _families() -> dict[str, Any]:
    import rlmetrics as R

    return {
        "data": lambda b: R.compute_data_metrics(b, use_critic=True),
        "timing": lambda b: R.compute_timing_metrics(b, {"gen": 1.0}),
        "throughput": lambda b: R.compute_throughput_metrics(b, {"step": 1.0}, n_gpus=1),
        "variance": lambda b: R.compute_variance_proxy_metrics(b),
        "groups": lambda b: R.compute_group_metrics(b),
    }


#: family -> the tensors it reads (each is refused by name when it holds no dense data).
READS = {
    "data": [
        "token_level_scores",
        "token_level_rewards",
        "advantages",
        "returns",
        "values",
        "response_mask",
        "attention_mask",
        "prompts",
        "responses",
    ],
    "timing": ["attention_mask", "prompts", "responses"],
    "throughput": ["attention_mask"],
    "variance": ["advantages", "response_mask", "sum_pi_squared", "old_log_probs"],
    "groups": ["token_level_rewards"],
}
LAYOUTS = {
    "meta": (lambda t: t.to("meta"), r"is on the meta device"),
    "sparse": (lambda t: t.to_sparse(), r"must be a dense tensor; got layout torch.sparse_coo"),
    "nested": (
        lambda t: torch.nested.as_nested_tensor(list(t.unbind(0)), layout=torch.jagged),
        r"must be a dense tensor; got a nested",
    ),
}
CASES = [(f, k, lay) for f, keys in READS.items() for k in keys for lay in LAYOUTS]


@pytest.mark.parametrize(("family", "key", "layout"), CASES, ids=[f"{f}-{k}-{lay}" for f, k, lay in CASES])
def test_a_tensor_without_dense_data_is_refused_by_name(family, key, layout):
    batch = _family_batch()
    make, message = LAYOUTS[layout]
    batch[key] = make(batch[key])
    with pytest.raises(TypeError, match=rf"^batch\['{key}'\] {message}"):
        _families()[family](batch)


def test_the_families_read_the_batch_they_are_given():
    """The premise of the fault test above: every family computes on the intact batch."""
    for family, run in _families().items():
        assert run(_family_batch()), family


@pytest.fixture
def tensors_stay_torch(monkeypatch):
    """CPU tensors take the path of accelerator tensors (not read as numpy views)."""
    from rlmetrics._core import array

    monkeypatch.setattr(array, "_CPU_TENSORS_AS_NUMPY", False)


@pytest.mark.parametrize("family", sorted(READS), ids=sorted(READS))
def test_numpy_arrays_beside_accelerator_tensors_are_moved_to_their_device(tensors_stay_torch, family):
    """A dict that mixes numpy arrays with tensors that stay torch gives the all-torch result."""
    run = _families()[family]
    expected = run(_family_batch())
    mixed = _family_batch()
    for key in READS[family][::2]:
        mixed[key] = mixed[key].numpy()
    assert as_batch(mixed).torch_device == "cpu"
    assert run(mixed) == pytest.approx(expected, nan_ok=True)


def test_a_numpy_array_torch_cannot_hold_is_refused_naming_it(tensors_stay_torch):
    view = as_batch({"advantages": torch.zeros(2, 3), "response_mask": np.zeros((2, 3), dtype=">f4")})
    with pytest.raises(
        TypeError, match=r"batch\['response_mask'\] is a numpy array of dtype >f4 beside torch"
    ):
        view.tensor("response_mask")


@pytest.mark.parametrize(
    "batch",
    [
        {"advantages": torch.zeros(2, 3), "response_mask": np.zeros((2, 3))},  # CPU: read as numpy anyway
        {"advantages": np.zeros((2, 3)), "response_mask": np.zeros((2, 3))},
        {"advantages": torch.zeros(2, 3), "uid": np.array(["a", "b"], dtype=object)},  # not a tensor
    ],
    ids=["cpu-mix", "numpy-only", "object-array"],
)
def test_no_device_to_move_to(batch):
    assert as_batch(batch).torch_device is None
