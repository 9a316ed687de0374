"""Choose decoding.ctc_weight and decoding.word_prior_weight on validation: decode a speech checkpoint's validation
split (or its test split) with joint CTC/attention beam search at several CTC weights, each with the word prior
(attend.search.WordPrior) at several weights, and with the CTC head alone, and print CER and WER of each (and each
corpus's CER where the split holds several, as task=asr's does).

    .venv/bin/python scripts/ctc_weight_sweep.py outputs/asr/runs/<time>/checkpoints/best.ckpt
    .venv/bin/python scripts/ctc_weight_sweep.py CKPT --weights 0 0.3 0.5 0.7 --split test --beam-size 4
    .venv/bin/python scripts/ctc_weight_sweep.py CKPT --weights 0.3 --word-prior-weights 0 0.1 0.2 0.4

The weight 0 row is the attention decoder alone in beam search; the greedy row is the attention decoder alone as
validation decodes it (beam search without CTC and without a length penalty favours outputs that end early, so
read both). The checkpoint must have a CTC head (trained with
model.ctc_weight > 0). The data are prepared (or found) where the checkpoint's run prepared them.
"""

from __future__ import annotations

import argparse
import time

import torch
from hydra.utils import instantiate

from attend.checkpoints.saved_run import load_run, restore
from attend.config.errors import ConfigError
from attend.metrics import CharErrorRate, WordErrorRate
from attend.search import WordPrior


class Scores:
    """CER and WER of one decoding over the batches, in %, the seconds its decoding took, and the CER of each corpus
    when the split holds several (``corpora``: the batches' ``corpus`` field, attend.data.Corpora)."""

    def __init__(self, corpora: list[str]) -> None:
        self.cer, self.wer, self.seconds = CharErrorRate(), WordErrorRate(), 0.0
        self.corpus_cer = {corpus: CharErrorRate() for corpus in corpora}

    def add(self, decode, *args) -> None:
        start = time.perf_counter()
        decoded = decode(*args)
        self.seconds += time.perf_counter() - start
        self.cer.update(decoded)
        self.wer.update(decoded)
        for corpus, cer in self.corpus_cer.items():
            cer.update(decoded.text_rows([row for row, name in enumerate(decoded.batch["corpus"]) if name == corpus]))

    def row(self, name: str) -> str:
        cer, wer = 100 * float(self.cer.compute()), 100 * float(self.wer.compute())
        per_corpus = "".join(f" {100 * float(metric.compute()):>{max(len(corpus), 7)}.2f}"
                             for corpus, metric in self.corpus_cer.items())
        return f"{name:<30} {cer:>7.2f} {wer:>7.2f} {self.seconds:>8.1f}{per_corpus}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("ckpt_path")
    parser.add_argument("--weights", type=float, nargs="+", default=[0.0, 0.1, 0.3, 0.5, 0.7, 0.9])
    parser.add_argument("--word-prior-weights", type=float, nargs="+", default=[0.0],
                        help="the word prior's weights, each tried with every CTC weight (0: off)")
    parser.add_argument("--word-prior-language", default=None, help="default: the checkpoint's (or en)")
    parser.add_argument("--split", choices=["val", "test"], default="val")
    parser.add_argument("--beam-size", type=int, default=None, help="default: the checkpoint's test search's")
    args = parser.parse_args()
    torch.set_grad_enabled(False)
    run = load_run(args.ckpt_path)
    datamodule, model = restore(run)
    config = run.config
    if model.ctc_head is None:
        raise ConfigError(f"{args.ckpt_path} has no CTC head (trained with model.ctc_weight=0): nothing to sweep")
    datamodule.setup("test")
    loader = datamodule.val_dataloader() if args.split == "val" else datamodule.test_dataloader()
    beam = {"beam_size": args.beam_size} if args.beam_size is not None else {}
    language = args.word_prior_language or config.get("decoding", {}).get("word_prior_language", "en")
    prior = WordPrior(language=language)  # one scorer for every search: its list is read once

    def search(ctc_weight: float, prior_weight: float):
        scorers = {"scorers": {"word_prior": prior}, "weights": {"word_prior": prior_weight}}
        return instantiate(config.model.test_search, ctc_weight=ctc_weight, **scorers, **beam, _convert_="partial")

    searches = {f"ctc_weight {w:g}" + (f" prior {p:g}" if p or len(args.word_prior_weights) > 1 else ""): search(w, p)
                for w in args.weights for p in args.word_prior_weights}
    greedy = instantiate(config.model.val_search)
    corpora = model.corpora  # empty for a split of one corpus
    ctc_alone, greedy_alone = Scores(corpora), Scores(corpora)
    joint = {name: Scores(corpora) for name in searches}
    utterances = 0
    for batch in loader:  # each batch encoded once, for every decoding of it
        memory = model.encode(batch)
        utterances += len(batch["references"])
        ctc_alone.add(model.decode_ctc, batch, memory)
        greedy_alone.add(model.decode, batch, greedy, memory)
        for name, search in searches.items():
            joint[name].add(model.decode, batch, search, memory)
    print(f"{args.split} split, {utterances} utterances")
    per_corpus = "".join(f" {corpus:>7}" for corpus in corpora)  # each corpus's CER, in %
    print(f"{'decoding':<30} {'CER %':>7} {'WER %':>7} {'seconds':>8}{per_corpus}")
    print(ctc_alone.row("CTC head alone"))
    print(greedy_alone.row("attention alone, greedy"))
    for name, scores in joint.items():
        print(scores.row(name))


if __name__ == "__main__":
    main()
