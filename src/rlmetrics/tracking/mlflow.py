"""The ``mlflow`` backend (a local sqlite store by default) and :func:`mlflow_key`, MLflow's names."""

from __future__ import annotations

import hashlib
import os
import posixpath
import re
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rlmetrics import keys as K
from rlmetrics.tracking._backend import MAX_STEP_INT64, RunInfo
from rlmetrics.tracking._files import _unwritable

if TYPE_CHECKING:
    from rlmetrics.training.samples import SampleTable

__all__ = ["MlflowBackend", "mlflow_key"]


_MLFLOW_BAD_CHARS = re.compile(r"[^\w\-. /:]")


_MLFLOW_MAX_KEY = 250  # MLflow's MAX_ENTITY_KEY_LENGTH (metric and param names)


_MLFLOW_MAX_PARAM = 6000  # MLflow's MAX_PARAM_VAL_LENGTH


#: What a category token's ``%`` is written as here (:data:`rlmetrics.keys.MLFLOW_PERCENT`): ``:``,
#: a space where MLflow refuses ``:`` in names (Windows).
_PERCENT = K.MLFLOW_PERCENT[1] if os.name == "nt" else K.MLFLOW_PERCENT[0]


def _category_token(key: str) -> str:
    """``key`` with its category token's ``%`` written as :data:`_PERCENT` (a per-category key;
    any other key as it is)."""
    if "%" not in key or K.split_category_key(key) is None:
        return key
    group, token, rest = key[len(K.CATEGORY_PREFIX) :].split("/", 2)
    return f"{K.CATEGORY_PREFIX}{group}/{token.replace('%', _PERCENT)}/{rest}"


def _hash8(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:8]


def _with_hash(name: str, key: str) -> str:
    """``name`` ending in ``-`` and 8 hex digits of ``key``'s SHA-256, within MLflow's 250 characters."""
    return name[: _MLFLOW_MAX_KEY - 9] + "-" + _hash8(key)


def mlflow_key(key: str) -> str:
    """An MLflow-legal metric/param name for ``key``; the same key always gives the same name.

    1. a per-category key's category token (:func:`rlmetrics.keys.category_key`) writes its
       ``%`` escapes as ``:`` (a space on Windows), so that ``by_data_source/a%2Fb/...`` and the
       category ``a_2Fb`` stay two names and :func:`rlmetrics.keys.key_from_mlflow_name` reads
       the key back; ``@`` -> ``_at_`` (as verl does); characters MLflow refuses (not a letter,
       digit, ``_``, ``-``, ``.``, space, ``/`` or ``:``) -> ``_``;
    2. MLflow names are paths: an empty, ``.`` or ``..`` segment (``a//b``, ``/a``, ``a/``,
       ``a/./b``) -> as many ``_`` (one for an empty one), and a leading ``..`` -> ``_.``;
    3. a name over 250 characters (MLflow's limit) keeps its first 241 and ends in ``-`` and
       the first 8 hex digits of the SHA-256 of the full key.

    Examples
    --------
    >>> mlflow_key("val-core/gsm8k/acc/mean@8")
    'val-core/gsm8k/acc/mean_at_8'
    >>> mlflow_key("a//b/"), mlflow_key("")
    ('a/_/b/_', '_')
    >>> a, b = mlflow_key("by_src/web%2Fqa/reward"), mlflow_key("by_src/web_2Fqa/reward")
    >>> a != b, b
    (True, 'by_src/web_2Fqa/reward')
    >>> name = mlflow_key("k" * 300)
    >>> len(name), name[:3], name[-9]
    (250, 'kkk', '-')
    """
    name = _MLFLOW_BAD_CHARS.sub("_", _category_token(key).replace("@", "_at_"))
    if name == "" or name.startswith(("/", "..")) or posixpath.normpath(name) != name:
        parts = ("_" * max(1, len(part)) if part in ("", ".", "..") else part for part in name.split("/"))
        name = "/".join(parts)
        if name.startswith(".."):
            name = "_" + name[1:]
    if len(name) > _MLFLOW_MAX_KEY:
        name = _with_hash(name, key)
    return name


class MlflowBackend:
    """An MLflow run: metrics under :func:`mlflow_key` names, the flattened config as params,
    sample tables as table artifacts ``samples/step_<step>.json``.

    Parameters
    ----------
    tracking_uri : str, optional, keyword-only
        The MLflow store (default: a local sqlite store, ``log_dir/mlflow.db``, whose new
        experiments keep their artifacts in ``log_dir/mlartifacts``). The experiment
        is the tracker's ``project``, the run its ``experiment``; ``resume=True`` continues the
        latest run of that name.

    Examples
    --------
    >>> MlflowBackend(tracking_uri="sqlite:///mlflow.db")
    MlflowBackend(tracking_uri='sqlite:///mlflow.db')
    """

    name = "mlflow"
    max_step = MAX_STEP_INT64  # a metric's step is an int64
    keeps_records = True  # the default: nothing declared about what MLflow keeps
    _BATCH = 1000  # MLflow's limit of metrics per log_batch call
    _PARAM_BATCH = 100

    def __init__(self, *, tracking_uri: str | None = None) -> None:
        if tracking_uri is not None and (not isinstance(tracking_uri, str) or not tracking_uri):
            raise TypeError(f"tracking_uri must be a non-empty str or None; got {tracking_uri!r}")
        self.tracking_uri = tracking_uri
        self.client: Any = None
        self.run_id: str | None = None
        self._names: dict[str, str] = {}  # key -> MLflow name
        self._owners: dict[str, str] = {}  # MLflow name -> key

    def __repr__(self) -> str:
        return f"MlflowBackend(tracking_uri={self.tracking_uri!r})"

    def start(self, run: RunInfo) -> list[str]:
        try:
            from mlflow.entities import Metric as MlMetric
            from mlflow.exceptions import MlflowException
            from mlflow.tracking import MlflowClient
        except ImportError:
            raise ImportError("the mlflow backend needs mlflow: pip install 'rlmetrics[mlflow]'") from None
        self._Metric, self._MlflowException = MlMetric, MlflowException
        artifacts = None  # the store's default artifact root (MLflow's: ./mlruns of the process)
        if self.tracking_uri is None:
            try:
                run.log_dir.mkdir(parents=True, exist_ok=True)
            except OSError as err:
                raise _unwritable(run.log_dir, err, "create log_dir for MLflow's store") from None
            self.tracking_uri = f"sqlite:///{(run.log_dir / 'mlflow.db').resolve()}"
            artifacts = (run.log_dir / "mlartifacts").resolve().as_uri()
        self.client = MlflowClient(tracking_uri=self.tracking_uri)
        exp = self.client.get_experiment_by_name(run.project)
        exp_id = (
            exp.experiment_id
            if exp is not None
            else self.client.create_experiment(run.project, artifact_location=artifacts)
        )
        found = self._find_run(exp_id, run.experiment) if run.resume else None
        old: dict[str, str] = {}
        if found is None:
            self.run_id = self.client.create_run(exp_id, run_name=run.experiment).info.run_id
        else:
            self.run_id = found.info.run_id
            old = dict(found.data.params)
            self.client.update_run(self.run_id, status="RUNNING")
        #: The notes of the start, also returned to the tracker (cut or changed params).
        self.notes = self._log_params(run.params, old)
        return self.notes

    def _log_params(self, params: Mapping[str, Any], old: Mapping[str, str]) -> list[str]:
        """Log the params new to the run (values cut to MLflow's limit); notes of what changed."""
        from mlflow.entities import Param

        notes: list[str] = []
        items = []
        for key, value in params.items():
            name, text = self._name(str(key), notes), str(value)
            if len(text) > _MLFLOW_MAX_PARAM:
                notes.append(
                    f"param {key!r}: its value of {len(text)} characters is cut to MLflow's "
                    f"{_MLFLOW_MAX_PARAM}"
                )
                text = text[:_MLFLOW_MAX_PARAM]
            if name in old:
                if old[name] != text:
                    notes.append(
                        f"param {key!r} is {text[:60]!r} here but {old[name][:60]!r} in the resumed run; "
                        "MLflow keeps a run's first value"
                    )
                continue
            items.append(Param(name, text))
        for i in range(0, len(items), self._PARAM_BATCH):
            self.client.log_batch(self.run_id, params=items[i : i + self._PARAM_BATCH])
        return notes

    def _find_run(self, exp_id: str, experiment: str) -> Any:
        """The latest run named ``experiment`` in the experiment, or None."""
        if "'" in experiment and '"' in experiment:
            return None  # not expressible in MLflow's filter syntax: a new run
        quote = '"' if "'" in experiment else "'"
        runs = self.client.search_runs(
            [exp_id],
            filter_string=f"attributes.run_name = {quote}{experiment}{quote}",
            order_by=["attributes.start_time DESC"],
            max_results=1,
        )
        return runs[0] if runs else None

    def _name(self, key: str, notes: list[str]) -> str:
        """The MLflow name of ``key``: :func:`mlflow_key`, with a hash suffix if another key has that name."""
        name = self._names.get(key)
        if name is not None:
            return name
        name = mlflow_key(key)
        if len(key.replace("@", "_at_")) > _MLFLOW_MAX_KEY:
            notes.append(
                f"key {key[:60]!r}... is over MLflow's {_MLFLOW_MAX_KEY} characters: logged as {name!r}"
            )
        owner = self._owners.get(name)
        if owner is not None and owner != key:
            taken, salt = name, key
            while self._owners.get(name, key) != key:  # a hashed name taken too: hash again, salted
                name, salt = _with_hash(taken, salt), salt + "#"
            notes.append(
                f"key {key!r} maps to the MLflow name {taken!r} of key {owner!r}: logged as {name!r}"
            )
        self._owners.setdefault(name, key)
        self._names[key] = name
        return name

    def log(self, metrics: dict[str, float], step: int) -> list[str]:
        notes: list[str] = []
        ts = int(time.time() * 1000)
        items = [self._Metric(self._name(k, notes), v, ts, step) for k, v in metrics.items()]
        for i in range(0, len(items), self._BATCH):
            chunk = items[i : i + self._BATCH]
            try:
                self.client.log_batch(self.run_id, metrics=chunk)
            except self._MlflowException as err:
                if getattr(err, "error_code", None) != "INVALID_PARAMETER_VALUE":
                    raise
                notes.extend(self._log_one_by_one(chunk))
        return notes

    def _log_one_by_one(self, chunk: list[Any]) -> list[str]:
        """MLflow refused a batch: log its metrics one at a time, dropping only those it refuses."""
        notes = []
        keys = {name: key for key, name in self._names.items()}
        for item in chunk:
            try:
                self.client.log_batch(self.run_id, metrics=[item])
            except self._MlflowException as err:
                notes.append(
                    f"key {keys.get(item.key, item.key)!r} dropped: MLflow refuses it ({err.message})"
                )
        return notes

    def log_samples(self, table: SampleTable, step: int) -> None:
        """The table as an MLflow table artifact ``samples/step_<step>.json`` (``log_table``:
        ``{"columns": [...], "data": [[...], ...]}``; ``log_dict`` of the same without pandas)."""
        columns = table.as_dict()
        artifact = f"{K.SAMPLES_TABLE}/step_{step:012d}.json"
        try:
            import pandas  # noqa: F401  (log_table converts through it)
        except ImportError:
            rows = [list(values) for values in zip(*columns.values(), strict=True)]
            self.client.log_dict(self.run_id, {"columns": list(columns), "data": rows}, artifact)
        else:
            self.client.log_table(self.run_id, data=columns, artifact_file=artifact)

    def finish(self, *, exit_code: int = 0) -> None:
        if self.run_id is not None:
            self.client.set_terminated(self.run_id, status="FINISHED" if exit_code == 0 else "FAILED")
