"""Tests of rlmetrics._core.threads: row-block mapping over the shared pool, and the pool singletons."""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest

from rlmetrics._core import threads as T


class Recorder:
    """A per-row kernel that records the slices it gets and the threads it runs on."""

    def __init__(self, *arrays: np.ndarray) -> None:
        self.arrays = arrays
        self.slices: list[slice] = []
        self.threads: list[threading.Thread] = []
        self.lock = threading.Lock()

    def __call__(self, rows: slice):
        with self.lock:
            self.slices.append(rows)
            self.threads.append(threading.current_thread())
        out = tuple(2.0 * a[rows] + 1.0 for a in self.arrays)
        return out if len(out) > 1 else out[0]


def assert_same(got, want) -> None:
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
    else:
        assert isinstance(got, np.ndarray)
        np.testing.assert_array_equal(got, want)


def make_arrays(rng: np.random.Generator, n_rows: int, width: int, n_out: int) -> list[np.ndarray]:
    shapes = [(n_rows, width), (n_rows,), (n_rows, 3)][:n_out]
    return [rng.standard_normal(s) for s in shapes]


SMALL = [(0, 5), (1, 1), (7, 100), (1000, 1000), (5, 0)]


@pytest.mark.parametrize("n_out", [1, 3], ids=["array", "tuple"])
@pytest.mark.parametrize(("n_rows", "width"), SMALL, ids=[f"{r}x{w}" for r, w in SMALL])
def test_small_inputs_run_once_on_calling_thread(n_rows, width, n_out):
    rng = np.random.default_rng(n_rows + width)
    fn = Recorder(*make_arrays(rng, n_rows, width, n_out))
    got = T.map_row_blocks(fn, (n_rows, width))
    assert fn.slices == [slice(0, n_rows)]
    assert fn.threads == [threading.current_thread()]
    assert_same(got, Recorder(*fn.arrays)(slice(0, n_rows)))


LARGE = [(10, 3, 2), (37, 5, 4), (100, 1, 8), (9, 2, 16), (50, 0, 3)]


@pytest.mark.parametrize("n_out", [1, 3], ids=["array", "tuple"])
@pytest.mark.parametrize(
    ("n_rows", "width", "threads"), LARGE, ids=[f"{r}x{w}-threads{t}" for r, w, t in LARGE]
)
def test_large_inputs_split_in_order_over_pool(monkeypatch, n_rows, width, threads, n_out):
    T.pool()  # created before N_THREADS is patched: the singleton keeps its real size
    monkeypatch.setattr(T, "ROW_BLOCK_ELEMENTS", 4)
    monkeypatch.setattr(T, "N_THREADS", threads)
    rng = np.random.default_rng(n_rows * width + threads)
    fn = Recorder(*make_arrays(rng, n_rows, width, n_out))
    got = T.map_row_blocks(fn, (n_rows, width))
    assert_same(got, Recorder(*fn.arrays)(slice(0, n_rows)))
    # contiguous blocks covering every row exactly once, no more blocks than threads
    per_block = max(1, 4 // max(width, 1))
    expected_blocks = min(threads, -(-n_rows // per_block))
    assert 1 < len(fn.slices) <= expected_blocks
    covered = sorted((range(n_rows)[s] for s in fn.slices), key=lambda r: r.start)
    flat = [i for block in covered for i in block]
    assert flat == list(range(n_rows))
    assert all(t is not threading.current_thread() for t in fn.threads)
    assert all(t.name.startswith("rlmetrics") for t in fn.threads)


def test_single_thread_still_goes_through_pool(monkeypatch):
    monkeypatch.setattr(T, "ROW_BLOCK_ELEMENTS", 10)
    monkeypatch.setattr(T, "N_THREADS", 1)
    a = np.arange(60.0).reshape(20, 3)
    fn = Recorder(a)
    got = T.map_row_blocks(fn, a.shape)
    assert fn.slices == [slice(0, 20)]
    np.testing.assert_array_equal(got, 2.0 * a + 1.0)


def test_block_boundary_exactly_one_block(monkeypatch):
    monkeypatch.setattr(T, "ROW_BLOCK_ELEMENTS", 30)
    a = np.arange(30.0).reshape(10, 3)  # 10 rows of 3: exactly the per-block limit
    fn = Recorder(a)
    T.map_row_blocks(fn, a.shape)
    assert fn.threads == [threading.current_thread()]
    fn11 = Recorder(np.arange(33.0).reshape(11, 3))
    got = T.map_row_blocks(fn11, (11, 3))
    np.testing.assert_array_equal(got, 2.0 * np.arange(33.0).reshape(11, 3) + 1.0)
    assert fn11.threads[0] is not threading.current_thread()


def test_pool_and_background_are_singletons():
    assert 1 <= T.N_THREADS <= 8
    assert T.pool() is T.pool()
    assert T.background() is T.background()
    assert T.pool() is not T.background()
    assert T.pool()._max_workers == T.N_THREADS
    assert T.background()._max_workers == 1


def test_background_runs_off_thread_and_may_submit_to_pool():
    def job() -> tuple[str, str]:
        inner = T.pool().submit(lambda: threading.current_thread().name)
        return threading.current_thread().name, inner.result(timeout=10)

    bg_name, pool_name = T.background().submit(job).result(timeout=10)
    assert bg_name.startswith("rlmetrics-bg")
    assert pool_name.startswith("rlmetrics") and not pool_name.startswith("rlmetrics-bg")
    assert bg_name != threading.current_thread().name


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_forked_child_gets_its_own_threads():
    """A child forked after the pools ran (a data-loader worker, say) starts new ones: the
    inherited executors' threads do not exist there, and work queued on them would never run."""
    import multiprocessing

    from rlmetrics import process_validation_metrics

    uids = [f"u{i // 8}" for i in range(64)]
    infos = {"acc": [i % 3 == 0 for i in range(64)], "pred": [str(i % 3) for i in range(64)]}
    want = process_validation_metrics(["s"] * 64, uids, infos)  # starts the background thread
    T.pool().submit(int).result()
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()

    def child() -> None:
        queue.put((process_validation_metrics(["s"] * 64, uids, infos), T.pool().submit(lambda: 7).result()))

    proc = ctx.Process(target=child)
    proc.start()
    try:
        got, seven = queue.get(timeout=60)
    finally:
        proc.join(10)
        if proc.is_alive():
            proc.kill()
    assert got == want and seven == 7
    assert proc.exitcode == 0
