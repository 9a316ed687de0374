"""What the search weighed at each output step of one example, from the search's own recorder (``StepLog``) and its
result: the explorer shows these numbers and computes none of them."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from attend.search import SearchResult, SearchStep


@dataclass(frozen=True)
class KeptStep:
    """One recorded step on the CPU, kept small: the decoder's ``top`` likeliest next tokens, not the vocabulary (the
    page's weights are the search result's, predict.py's own)."""

    sentences: Tensor  # (b,) input rows
    history: Tensor  # (b, K, t)
    scores: Tensor  # (b, K)
    top_ids: Tensor  # (b, K, top)
    top_log_probs: Tensor  # (b, K, top)


class StepLog:
    """A ``StepRecorder`` that keeps every step of a search call (``model.decode(..., recorder=StepLog())``)."""

    def __init__(self, top: int = 5) -> None:
        self.top = top
        self.steps: list[KeptStep] = []

    def __call__(self, step: SearchStep) -> None:
        values, ids = step.log_probs.topk(min(self.top, step.log_probs.size(-1)), dim=-1)  # (b, K, top)
        self.steps.append(KeptStep(step.sentences.cpu(), step.history.cpu(), step.scores.float().cpu(), ids.cpu(),
                                   values.cpu()))


def search_steps(log: StepLog, result: SearchResult, row: int, tokens) -> list[dict]:
    """Each output step of input ``row``: its token, the attention weights over the source (the result's, as
    predict.py returns them), each head's, the decoder's likeliest next tokens for the chosen hypothesis and the
    beam's live hypotheses with their scores. ``tokens``: ids -> readable pieces (the target tokenizer's)."""
    length = int(result.lengths[row])
    chosen = result.tokens[row].cpu()
    steps = []
    for t in range(length):
        step = log.steps[t]
        index = int((step.sentences == row).nonzero()[0, 0])
        history, scores = step.history[index], step.scores[index]  # (K, t), (K,)
        slot = chosen_slot(history, scores, chosen[:t])
        live = [k for k in range(scores.numel()) if math.isfinite(float(scores[k]))]
        live.sort(key=lambda k: -float(scores[k]))
        steps.append({
            "token": tokens([int(chosen[t])])[0],
            **attention_at(result, row, t),
            "top": [[tokens([int(i)])[0], math.exp(float(p))]
                    for i, p in zip(step.top_ids[index, slot], step.top_log_probs[index, slot], strict=True)],
            "beam": [{"tokens": tokens(history[k].tolist()), "score": float(scores[k]), "chosen": k == slot}
                     for k in live],
        })
    return steps


def chosen_slot(history: Tensor, scores: Tensor, prefix: Tensor) -> int:
    """The live hypothesis (of histories (K, t)) that the chosen output continues: its tokens are ``prefix``."""
    for k in range(history.size(0)):
        if math.isfinite(float(scores[k])) and torch.equal(history[k], prefix):
            return k
    raise ValueError("the chosen output is not among the search's live hypotheses: was the recorder given to the "
                     "search call that gave this result?")


def attention_at(result: SearchResult, row: int, t: int) -> dict:
    """Step t's weights over the row's valid source positions, and each head's (None without heads)."""
    size = int(result.source_lengths[row]) if result.source_lengths is not None else result.weights.size(-1)
    heads = result.head_weights
    return {
        "weights": result.weights[row, t, :size].float().cpu().tolist(),
        "heads": None if heads is None else heads[row, :, t, :size].float().cpu().tolist(),
    }
