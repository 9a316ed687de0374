"""Caption metrics under DDP: two gloo processes on uneven shares of the rows (one rank without an unseen caption,
or without any row) score exactly what one process scores on all the rows."""

from __future__ import annotations

import os
import socket
import traceback
import warnings
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from hydra.utils import instantiate
from omegaconf import OmegaConf
from torchmetrics import Metric

import attend.metrics
from attend.config.compose import compose_config
from attend.data import WordTokenizer
from attend.metrics import CIDErD, Decoded
from attend.search import SearchResult

pytestmark = pytest.mark.slow  # DDP runs of two processes each: make test-slow (CI runs both tiers)

HYPOTHESES = [
    "a red ball", "a blue square", "a green circle above a red square", "a small blue triangle",
    "a red square left of a circle", "two big circles", "a green triangle under a blue circle", "the square",
]
REFERENCES = [
    ["a red circle", "one red circle"], ["a blue square"], ["a green circle above a red square", "a circle"],
    ["a blue triangle", "a small triangle"], ["a red square left of a green circle"], ["two red circles", "circles"],
    ["a green triangle below a blue circle"], ["a yellow square", "one square"],
]
UNSEEN = [False, False, True, False, True, True, True, False]
# each rank's evaluation batches (lists of rows): both ranks have unseen captions; rank 0 has none, or no row at
# all; nobody has one
SCENARIOS = {
    "every_rank_unseen": [[[0, 2]], [[1, 3, 4], [5, 6, 7]]],
    "rank0_without_unseen": [[[0], [1, 3]], [[2, 4, 5], [6, 7]]],
    "rank0_without_rows": [[], [[0, 1, 2], [3, 4, 5, 6], [7]]],
    "no_unseen_anywhere": [[[0, 1]], [[3], [7]]],
}
TIMEOUT_S = 60


def decoded(words: WordTokenizer, rows: list[int]) -> Decoded:
    """Rows as the model decodes them: the batch (references, unseen flags), a search result and its texts."""
    ids = [words.encode(HYPOTHESES[i]) + [words.eos_id] for i in rows]
    width = max(len(i) for i in ids)
    tokens = torch.tensor([i + [words.pad_id] * (width - len(i)) for i in ids])  # (B, T)
    weights = torch.zeros(len(rows), width, 4)  # (B, T, S): each row's own weights, zero after its end
    for b, (row, sequence) in enumerate(zip(rows, ids, strict=True)):
        scores = torch.arange(len(sequence) * 4, dtype=torch.float).view(-1, 4) * (row + 1) / 7
        weights[b, : len(sequence)] = scores.sin().softmax(-1)
    result = SearchResult(tokens, torch.tensor([len(i) for i in ids]), weights, torch.zeros(len(rows)), words.eos_id)
    batch = {"references": [REFERENCES[i] for i in rows], "unseen": torch.tensor([UNSEEN[i] for i in rows])}
    return Decoded(batch, result, [words.decode(i) for i in result.sequences()], words)


def scores(metrics_cfg: dict, batches: list[list[int]]) -> dict[str, float]:
    """Every metric updated with ``batches`` and computed (synced across the ranks under DDP)."""
    words = WordTokenizer(lowercase=True)
    words.fit(HYPOTHESES)
    metrics = {name: instantiate(cfg) for name, cfg in metrics_cfg.items()}
    for rows in batches:
        for metric in metrics.values():
            metric.update(decoded(words, rows))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "compute before update" on a rank without rows
        return {name: float(metric.compute()) for name, metric in metrics.items()}


def _rank(rank: int, port: int, metrics_cfg: dict, queue) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2, timeout=timedelta(seconds=TIMEOUT_S))
    try:
        queue.put((rank, {name: scores(metrics_cfg, shares[rank]) for name, shares in SCENARIOS.items()}))
    except Exception:  # noqa: BLE001 - the parent reports it
        queue.put((rank, traceback.format_exc()))
    finally:
        dist.destroy_process_group()


def caption_metrics() -> dict:
    """The caption task's metrics (config nodes), and the unseen versions of BLEU-1..3 besides its BLEU-4."""
    cfg = compose_config(["task=caption", "data=shapes"])
    metrics = OmegaConf.to_container(cfg.model.metrics, resolve=True)
    for n in (1, 2, 3):
        metrics[f"bleu{n}_unseen"] = {"_target_": "attend.metrics.UnseenOnly", "metric": metrics[f"bleu{n}"]}
    return metrics


def run_two_ranks(metrics_cfg: dict) -> dict[int, dict]:
    """Each rank's scores per scenario; fails on an error in a rank or a gather that hangs."""
    context = mp.get_context("spawn")
    queue, port = context.SimpleQueue(), _free_port()
    ranks = [context.Process(target=_rank, args=(r, port, metrics_cfg, queue)) for r in (0, 1)]
    for process in ranks:
        process.start()
    for process in ranks:
        process.join(TIMEOUT_S * 3)
    hung = [process.pid for process in ranks if process.is_alive()]
    for process in ranks:
        if process.is_alive():
            process.kill()
    assert not hung, f"ranks {hung} hung in the metrics' gather"
    results = dict(queue.get() for _ in ranks if not queue.empty())
    for rank in (0, 1):
        assert isinstance(results.get(rank), dict), f"rank {rank} failed:\n{results.get(rank)}"
    return results


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_caption_metrics_under_ddp_equal_one_process_when_a_rank_has_no_unseen_caption() -> None:
    """Every caption metric (BLEU-n, CIDEr-D, their unseen versions, attention diagnostics), each rank alike."""
    metrics_cfg = caption_metrics()
    assert {"bleu4", "cider", "bleu4_unseen", "cider_unseen"} <= set(metrics_cfg)
    results = run_two_ranks(metrics_cfg)
    for scenario, shares in SCENARIOS.items():
        single = scores(metrics_cfg, [rows for share in shares for rows in share])
        assert single["cider"] > 0 and single["bleu3"] > 0 and single["coverage"] > 0, scenario  # scores that tell
        if scenario != "no_unseen_anywhere":
            assert single["cider_unseen"] > 0 and single["bleu4_unseen"] > 0, scenario
        for rank in (0, 1):
            assert results[rank][scenario] == pytest.approx(single, rel=1e-9, abs=1e-12), (scenario, rank)


@pytest.mark.parametrize("make", [CIDErD], ids=["cider"])
def test_a_list_state_sends_its_records_dtype_from_a_rank_without_rows(make) -> None:
    """What an empty rank hands the gather has the dtype of what a rank with rows hands it (torchmetrics' own
    stand-in for an empty list is float32, which cannot be gathered with the others' uint8 bytes)."""
    sent: dict[str, list[torch.dtype]] = {}
    for key, rows in (("empty", []), ("full", [Decoded.text(HYPOTHESES[:2], REFERENCES[:2])])):
        metric, sent[key] = make(), []
        for batch in rows:
            metric.update(batch)

        def gather(tensor: torch.Tensor, group=None, key: str = key) -> list[torch.Tensor]:
            sent[key].append(tensor.dtype)
            return [tensor]  # one rank's share

        metric.sync(dist_sync_fn=gather, distributed_available=lambda: True)
    assert sent["empty"] == sent["full"] == [torch.uint8]


def test_cider_d_is_the_only_metric_with_a_list_state() -> None:
    """A list state needs the empty-rank care above; a new one should get that test too."""
    classes = [getattr(attend.metrics, n) for n in attend.metrics.__all__]
    listed = [
        cls.__name__ for cls in classes
        if isinstance(cls, type) and issubclass(cls, Metric) and cls.__name__ != "UnseenOnly"
        and any(isinstance(default, list) for default in cls()._defaults.values())
    ]
    assert listed == ["CIDErD"]
