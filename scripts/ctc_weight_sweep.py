"""Choose decoding.ctc_weight on validation: decode a speech checkpoint's validation split (or its test split) with
joint CTC/attention beam search at several CTC weights, and with the CTC head alone, and print CER and WER of each.

    .venv/bin/python scripts/ctc_weight_sweep.py outputs/asr/runs/<time>/checkpoints/best.ckpt
    .venv/bin/python scripts/ctc_weight_sweep.py CKPT --weights 0 0.3 0.5 0.7 --split test --beam-size 4

The weight 0 row is the attention decoder alone. The checkpoint must have a CTC head (trained with
model.ctc_weight > 0). The data are prepared (or found) where the checkpoint's run prepared them.
"""

from __future__ import annotations

import argparse
import time

import torch
from hydra.utils import instantiate

from attend.metrics import CharErrorRate, WordErrorRate
from attend.run.checkpoint import load_checkpoint, restore
from attend.run.config_checks import ConfigError


def scores(decoded_batches) -> tuple[float, float]:
    """CER and WER over every batch, in %."""
    cer, wer = CharErrorRate(), WordErrorRate()
    for decoded in decoded_batches:
        cer.update(decoded)
        wer.update(decoded)
    return 100 * float(cer.compute()), 100 * float(wer.compute())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("ckpt_path")
    parser.add_argument("--weights", type=float, nargs="+", default=[0.0, 0.1, 0.3, 0.5, 0.7, 0.9])
    parser.add_argument("--split", choices=["val", "test"], default="val")
    parser.add_argument("--beam-size", type=int, default=None, help="default: the checkpoint's test search's")
    args = parser.parse_args()
    torch.set_grad_enabled(False)
    config, datamodule, model = restore(load_checkpoint(args.ckpt_path))
    if model.ctc_head is None:
        raise ConfigError(f"{args.ckpt_path} has no CTC head (trained with model.ctc_weight=0): nothing to sweep")
    datamodule.setup("test")
    loader = datamodule.val_dataloader() if args.split == "val" else datamodule.test_dataloader()
    batches = list(loader)
    print(f"{args.split} split, {sum(len(b['references']) for b in batches)} utterances", flush=True)
    print(f"{'decoding':<24} {'CER %':>7} {'WER %':>7} {'seconds':>8}", flush=True)
    start = time.perf_counter()
    cer, wer = scores(model.decode_ctc(batch) for batch in batches)
    print(f"{'CTC head alone':<24} {cer:>7.2f} {wer:>7.2f} {time.perf_counter() - start:>8.1f}", flush=True)
    beam = {"beam_size": args.beam_size} if args.beam_size is not None else {}
    for weight in args.weights:
        search = instantiate(config.model.test_search, ctc_weight=weight, **beam)
        start = time.perf_counter()
        cer, wer = scores(model.decode(batch, search) for batch in batches)
        print(f"{f'ctc_weight {weight:g}':<24} {cer:>7.2f} {wer:>7.2f} {time.perf_counter() - start:>8.1f}", flush=True)


if __name__ == "__main__":
    main()
