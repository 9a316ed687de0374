"""Teacher forcing on a given reference: at each step the decoder reads the reference's tokens so far, so the page
shows where the model's own choice and the reference part."""

from __future__ import annotations

import math

import torch

from attend.search.result import decoder_log_probs


@torch.no_grad()
def forced_steps(model, memory, reference: str, top: int = 5) -> list[dict]:
    """Each step of the reference (its end token included) for a memory of one source: the weights (and each head's),
    the decoder's likeliest tokens, the reference's token, its probability and whether the model would have chosen
    it. ``model``: a ``Seq2Seq`` (its decoder and target tokenizer)."""
    tok = model.target_tokenizer
    ids = [tok.bos_id, *tok.encode(reference), tok.eos_id]
    tgt_in = torch.tensor([ids[:-1]], device=memory.values.device)  # (1, T)
    logits, attended = model.decoder(tgt_in, memory)  # (1, T, V), weights (1, T, S)
    logp = decoder_log_probs(logits[0], tok.pad_id, tok.bos_id)  # (T, V)
    values, best = logp.topk(min(top, logp.size(-1)), dim=-1)  # (T, top)
    size = int(memory.lengths[0])
    steps = []
    for t, target in enumerate(ids[1:]):
        heads = attended.head_weights
        steps.append({
            "token": tok.tokens([target])[0],
            "weights": attended.weights[0, t, :size].float().cpu().tolist(),
            "heads": None if heads is None else heads[0, :, t, :size].float().cpu().tolist(),
            "top": [[tok.tokens([int(i)])[0], math.exp(float(p))] for i, p in zip(best[t], values[t], strict=True)],
            "reference_probability": math.exp(float(logp[t, target])),
            "model_choice": tok.tokens([int(best[t, 0])])[0],
            "agrees": int(best[t, 0]) == target,
        })
    return steps
