"""The one LightningModule every task trains: encoder -> Memory -> attention decoder -> tokens."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Literal

import lightning as L
import torch
from torch import Tensor, nn
from torchmetrics import MeanMetric, Metric

from attend.attention import AttentionOutput
from attend.init import initialize
from attend.metrics import Decoded
from attend.objective import (
    LOSS_NAMES,
    Normalization,
    check_objective_options,
    combine,
    cross_entropy,
    ctc_loss,
    guided_attention,
)
from attend.reinforce import Reinforce
from attend.search import ctc_best_path

log = logging.getLogger(__name__)


class NonFiniteLossError(RuntimeError):
    """The training loss stayed NaN or inf for ``max_nonfinite_steps`` steps in a row."""


def compile_in_place(model: nn.Module, parts: Sequence[str], options: dict) -> None:
    """``torch.compile`` the ``forward`` of each named submodule (encoder, decoder) in place: parameter names
    and checkpoints stay as they are, and the search's ``decoder.step`` calls stay eager (their shapes change
    every step)."""
    for part in parts:
        module = getattr(model, part, None)
        if not isinstance(module, nn.Module):
            raise ValueError(f"model.compile_parts names {part!r}, which the model does not have: use encoder, decoder")
        module.compile(**options)


class Seq2Seq(L.LightningModule):
    """Cross-entropy training with label smoothing; validation and test metrics on decoded text.

    ``tokenizers`` maps "target" (and "source" for text sources) to tokenizer objects. Every checkpoint holds
    the run's resolved config (``checkpoint["attend"]["config"]``) and, through Lightning, the data module's
    state with the tokenizers, so evaluation rebuilds both without training data. Every metric is
    ``update(decoded)`` with the ``Decoded`` batch (the batch, the search's result and the hypotheses); the
    progress bar shows the first metric that declares ``headline``. The decoder declares
    ``samples_attention`` (the REINFORCE term is kept then) and ``attention_penalty`` (None: no penalty).
    The loss terms and how they add up are ``attend.objective``: with ``ctc_weight`` lambda > 0 the objective
    is (1 - lambda) * attention loss + lambda * CTC loss of the encoder output; ``loss_normalization``
    (tokens, sentences) divides the summed cross-entropy by the batch's target tokens or by its sentences.
    ``corpora`` (the data module's, when a split holds several: ``attend.data.Corpora``): each text score is also
    logged per corpus, {stage}/{name}/{corpus}. ``init`` (xavier, pytorch) initialises the parameters
    (``attend.init.initialize``; a pretrained backbone keeps its weights). ``compile_parts`` (e.g. ["encoder"]) are
    compiled with ``torch.compile(**compile_options)``. A training step whose loss is NaN or inf is skipped (no
    backward, no update; counted in ``train/nonfinite_skipped``); ``max_nonfinite_steps`` in a row stop the run (0:
    no check, which saves a host synchronisation per step).
    """

    def __init__(
        self,
        encoder: nn.Module,
        decoder: nn.Module,
        tokenizers: dict,
        optimizer: Callable[..., torch.optim.Optimizer],
        val_search: Callable,
        test_search: Callable,
        metrics: dict[str, Metric],
        scheduler: Callable | None = None,
        label_smoothing: float = 0.1,
        ctc_weight: float = 0.0,
        reinforce: Reinforce | None = None,
        run_config: dict | None = None,
        compile_parts: Sequence[str] = (),
        compile_options: dict | None = None,
        max_nonfinite_steps: int = 5,
        init: Literal["xavier", "pytorch"] = "xavier",
        loss_normalization: Normalization = "tokens",
        corpora: Sequence[str] = (),
        guided_attention: float = 0.0,
        guided_attention_sigma: float = 0.4,
    ) -> None:
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder
        self.tokenizers = tokenizers
        self.target_tokenizer = tokenizers["target"]
        self.optimizer_factory = optimizer
        self.scheduler_factory = scheduler
        self.val_search = val_search
        self.test_search = test_search
        check_objective_options(ctc_weight, loss_normalization)
        self.label_smoothing = label_smoothing
        self.loss_normalization = loss_normalization
        self.ctc_weight = ctc_weight
        # the guided attention loss's weight and width (objective.guided_attention): a diagonal prior that keeps
        # a speller's attention from settling on one end of the utterance when data is scarce
        self.guided_attention = guided_attention
        self.guided_attention_sigma = guided_attention_sigma
        # hybrid CTC/attention (Watanabe et al. 2017, ESPnet): a CTC output layer on the encoder, blank = pad id
        self.ctc_head = nn.Linear(encoder.output_dim, self.target_tokenizer.vocab_size) if ctc_weight > 0 else None
        # the REINFORCE term of hard attention; kept only when the decoder samples (no buffer otherwise)
        self.reinforce = reinforce if decoder.samples_attention else None
        self.run_config = run_config or {}
        self.val_metrics = nn.ModuleDict({name: metric.clone() for name, metric in metrics.items()})
        self.test_metrics = nn.ModuleDict({name: metric.clone() for name, metric in metrics.items()})
        self.test_predictions: list[dict] = []
        # val/test losses as example-weighted means whose float sums sync at epoch end (see log_loss)
        self.eval_losses = nn.ModuleDict({
            stage: nn.ModuleDict({name: MeanMetric(nan_strategy="disable") for name in LOSS_NAMES})
            for stage in ("val", "test")
        })
        initialize(self, init)
        compile_in_place(self, compile_parts, compile_options or {})
        self.max_nonfinite_steps = max_nonfinite_steps
        self.nonfinite_steps = 0  # training steps skipped for a NaN or inf loss, in all
        self.nonfinite_in_a_row = 0
        # the progress bar shows the first text score (BLEU, CER), not a diagnostic a data config adds
        self.headline_metric = next((n for n, m in metrics.items() if getattr(m, "headline", False)), None)
        # what the CTC head alone reads (best path), scored by the headline metric: {stage}/{headline}_ctc
        scored = self.ctc_head is not None and self.headline_metric is not None
        self.ctc_metrics = nn.ModuleDict(
            {stage: metrics[self.headline_metric].clone() for stage in ("val", "test")} if scored else {}
        )
        # several corpora in one split (attend.data.Corpora): each text score per corpus too, {stage}/{name}/{corpus}
        text_scores = [name for name, metric in metrics.items() if getattr(metric, "headline", False)]
        self.corpora = list(corpora) if len(corpora) > 1 else []
        self.corpus_metrics = nn.ModuleDict({
            stage: nn.ModuleDict({f"{name}/{corpus}": metrics[name].clone()
                                  for name in text_scores for corpus in self.corpora})
            for stage in ("val", "test")
        })

    # -- model ----------------------------------------------------------------------------
    def encode(self, batch: dict):
        """The source of a batch (token ids, images or audio features) as a Memory."""
        return self.encoder(batch["src"], batch.get("src_lengths"))

    def forward(self, batch: dict) -> tuple[Tensor, AttentionOutput]:
        """Teacher forcing: logits (B, T, V) and the decoder's attention (weights (B, T, S))."""
        return self.decoder(batch["tgt"][:, :-1], self.encode(batch))

    def loss(self, logits: Tensor, tgt_out: Tensor) -> Tensor:
        """Label-smoothed cross-entropy of logits (B, T, V), normalised as ``loss_normalization`` says."""
        return cross_entropy(
            logits, tgt_out, self.target_tokenizer.pad_id, self.label_smoothing, self.loss_normalization
        )

    @torch.no_grad()
    def decode(self, batch: dict, search: Callable, memory=None, recorder=None) -> Decoded:
        """Decode a batch with ``search``: the batch, the search's result and its detokenised texts. The search gets
        the model outputs its scorers read (``search.needs``: the CTC head's log-probabilities for joint
        CTC/attention beam search) and, when given, a ``recorder`` of its steps (``attend.search.StepRecorder``). A
        search with ``bind`` (beam search) first gives its scorers the target vocabulary (a word prior reads it)."""
        tok = self.target_tokenizer
        memory = self.encode(batch) if memory is None else memory  # evaluation passes the one it encoded
        if hasattr(search, "bind"):
            search.bind(tok)
        given = self.search_inputs(search.needs, memory)
        if recorder is not None:  # only then: a search without the hook is still a search
            given["recorder"] = recorder
        result = search(self.decoder, memory, bos_id=tok.bos_id, eos_id=tok.eos_id, pad_id=tok.pad_id, **given)
        return Decoded(batch, result, [tok.decode(ids) for ids in result.sequences()], tok)

    def search_inputs(self, needs: Sequence[str], memory) -> dict[str, Tensor]:
        """The model outputs named in ``needs`` (a search's scorers read them), computed once per batch. One this
        model does not have (``ctc_log_probs`` without a CTC head) is left out: the scorer that reads it says so."""
        outputs = {"ctc_log_probs": self.ctc_log_probs} if self.ctc_head is not None else {}
        return {name: outputs[name](memory) for name in needs if name in outputs}

    def ctc_log_probs(self, memory) -> Tensor:
        """The CTC head's log-probabilities (B, S, V) over the encoder's frames, in float32."""
        return torch.log_softmax(self.ctc_head(memory.values).float(), dim=-1)

    @torch.no_grad()
    def decode_ctc(self, batch: dict, memory=None) -> Decoded:
        """Best-path CTC decoding of a batch, the CTC head alone: the batch and the texts (no search result)."""
        tok = self.target_tokenizer
        memory = self.encode(batch) if memory is None else memory
        sequences = ctc_best_path(self.ctc_log_probs(memory), memory.lengths, tok.pad_id, (tok.bos_id, tok.eos_id))
        return Decoded(batch, None, [tok.decode(ids) for ids in sequences], tok)

    # -- steps ----------------------------------------------------------------------------
    def teacher_forced_losses(self, batch: dict) -> dict[str, Tensor]:
        """The parts of the objective: ``cross_entropy`` of predicting tgt[1:] from tgt[:-1] and the
        source, ``attention_penalty`` (when the decoder has one), ``ctc`` (with ``ctc_weight``),
        ``reinforce`` (hard attention while training: the term that trains where it looks)."""
        memory = self.encode(batch)
        tgt_out = batch["tgt"][:, 1:]
        logits, attended = self.decoder(batch["tgt"][:, :-1], memory)  # (B, T, V), weights (B, T, S)
        losses = {"cross_entropy": self.loss(logits, tgt_out)}
        target_mask = tgt_out != self.target_tokenizer.pad_id  # (B, T)
        penalty = self.decoder.attention_penalty(attended.weights, target_mask, memory.mask)  # () or None
        if penalty is not None:
            losses["attention_penalty"] = penalty
        if self.guided_attention > 0:
            if memory.grid is not None:
                raise ValueError("model.guided_attention is a diagonal prior for sequence sources (speech, text), "
                                 "not for an image grid: set model.guided_attention=0")
            losses["guided_attention"] = guided_attention(attended.weights, target_mask, memory.mask,
                                                          self.guided_attention_sigma)
        if self.ctc_head is not None:
            losses["ctc"] = self.ctc_loss(memory, batch["tgt"])
        if attended.log_prob is not None and self.reinforce is not None:
            losses["reinforce"] = self.reinforce(logits, tgt_out, attended, self.target_tokenizer.pad_id)
        return losses

    def ctc_loss(self, memory, tgt: Tensor) -> Tensor:
        """CTC loss of the target ids (without bos/eos) given the encoder's frames, per target token."""
        tok = self.target_tokenizer
        frame_logits = self.ctc_head(memory.values)  # (B, S, V)
        return ctc_loss(frame_logits, memory.lengths, tgt, tok.pad_id, tok.bos_id, tok.eos_id)

    def objective(self, losses: dict[str, Tensor]) -> Tensor:
        """The training loss from its parts."""
        return combine(losses, self.ctc_weight, self.guided_attention)

    def teacher_forced_loss(self, batch: dict) -> Tensor:
        """The training objective of a batch."""
        return self.objective(self.teacher_forced_losses(batch))

    def _shared_step(self, batch: dict, stage: str) -> Tensor:
        losses = self.teacher_forced_losses(batch)
        loss = self.objective(losses)
        batch_size = batch["tgt"].size(0)
        # the REINFORCE term is a surrogate (its gradient is the estimate; its value is no loss): not in the log
        logged = self.objective({name: value for name, value in losses.items() if name != "reinforce"})
        self.log_loss(stage, "loss", logged, batch_size, prog_bar=True)
        for name, value in losses.items():
            if name != "cross_entropy":
                self.log_loss(stage, name, value, batch_size)
        if stage == "train":
            return loss
        search = self.val_search if stage == "val" else self.test_search
        metrics = self.val_metrics if stage == "val" else self.test_metrics
        memory = self.encode(batch)  # once, for the search and the CTC head's best path
        decoded = self.decode(batch, search, memory)
        for name, metric in metrics.items():
            metric.update(decoded)
            self.log(f"{stage}/{name}", metric, prog_bar=name == self.headline_metric, batch_size=batch_size)
        if self.ctc_metrics:
            self.ctc_metrics[stage].update(self.decode_ctc(batch, memory))
            self.log(f"{stage}/{self.headline_metric}_ctc", self.ctc_metrics[stage], batch_size=batch_size)
        if self.corpora:
            self.update_corpus_metrics(stage, decoded, batch_size)
        if stage == "test":
            rows = zip(batch["ids"].tolist(), batch["sources"], decoded.references, decoded.hypotheses, strict=True)
            for index, source, reference, hypothesis in rows:
                self.test_predictions.append(
                    {"id": index, "source": source, "reference": reference, "hypothesis": hypothesis}
                )
        return loss

    def update_corpus_metrics(self, stage: str, decoded: Decoded, batch_size: int) -> None:
        """Each text score on the rows of each corpus (the batch's ``corpus`` field), logged {stage}/{name}/{corpus}."""
        corpus_of_row = decoded.batch["corpus"]
        for key, metric in self.corpus_metrics[stage].items():
            corpus = key.split("/", 1)[1]
            metric.update(decoded.text_rows([row for row, name in enumerate(corpus_of_row) if name == corpus]))
            self.log(f"{stage}/{key}", metric, batch_size=batch_size)

    def log_loss(self, stage: str, name: str, value: Tensor, batch_size: int, prog_bar: bool = False) -> None:
        """Training: this rank's running mean. Validation and test: the mean over every example (each once, the
        sampler repeats none) from torchmetrics' float sums, synced at epoch end. Not Lightning's own mean of a
        logged tensor: under DDP it averages the integer example count across ranks with integer division (21
        examples on 2 ranks count as 20, and the loss comes out 5% high)."""
        if stage == "train":
            self.log(f"{stage}/{name}", value, prog_bar=prog_bar, batch_size=batch_size)
            return
        mean = self.eval_losses[stage][name]
        mean.update(value.detach().float(), batch_size)
        self.log(f"{stage}/{name}", mean, prog_bar=prog_bar, batch_size=batch_size)

    def training_step(self, batch: dict, batch_idx: int) -> Tensor | None:
        loss = self._shared_step(batch, "train")
        if not self.max_nonfinite_steps:
            return loss
        finite = bool(torch.isfinite(loss.detach()))
        if self.trainer.world_size > 1:  # every rank skips the same step, or DDP's all-reduce would hang
            finite = self.trainer.strategy.reduce_boolean_decision(finite, all=True)
        if finite:
            self.nonfinite_in_a_row = 0
            return loss
        return self.skip_nonfinite_step(loss)

    def skip_nonfinite_step(self, loss: Tensor) -> None:
        """Count and log a NaN or inf loss; returning None makes Lightning skip backward and the update."""
        self.nonfinite_steps += 1
        self.nonfinite_in_a_row += 1
        self.log("train/nonfinite_skipped", float(self.nonfinite_steps), on_step=True, on_epoch=False, batch_size=1)
        log.warning("step %d: the loss is %s; step skipped (%d in a row)",
                    self.global_step, float(loss.detach()), self.nonfinite_in_a_row)
        if self.nonfinite_in_a_row >= self.max_nonfinite_steps:
            raise NonFiniteLossError(
                f"the loss was NaN or inf at {self.nonfinite_in_a_row} training steps in a row (the last at step "
                f"{self.global_step}); stopped before any NaN reaches the weights or a checkpoint. Lower "
                f"optim.optimizer.lr, set trainer.gradient_clip_val, or look for bad samples in the data; resume "
                f"from the last checkpoint with ckpt_path=... (model.max_nonfinite_steps sets how many)"
            )
        return None

    def validation_step(self, batch: dict, batch_idx: int) -> Tensor:
        return self._shared_step(batch, "val")

    def test_step(self, batch: dict, batch_idx: int) -> Tensor:
        return self._shared_step(batch, "test")

    def on_test_epoch_start(self) -> None:
        self.test_predictions = []

    def on_test_epoch_end(self) -> None:
        """Under DDP each rank decoded its share: gather all of them (once per example) on every rank."""
        if self.trainer.world_size == 1:
            return
        shares = [None] * self.trainer.world_size
        torch.distributed.all_gather_object(shares, self.test_predictions)
        # evaluation shards are disjoint (a split with fewer examples than ranks repeats some): keep one per id
        by_id = {prediction["id"]: prediction for share in shares for prediction in share}
        self.test_predictions = list(by_id.values())

    # -- optimisation and checkpoints ------------------------------------------------------
    def configure_optimizers(self):
        optimizer = self.optimizer_factory(self.parameters())
        if self.scheduler_factory is None:
            return optimizer
        scheduler = self.scheduler_factory(
            optimizer, total_steps=int(self.trainer.estimated_stepping_batches)
        )
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}

    def configure_gradient_clipping(
        self, optimizer: torch.optim.Optimizer, gradient_clip_val=None, gradient_clip_algorithm=None
    ) -> None:
        """Clip the true (unscaled) gradients as ``trainer.gradient_clip_val`` says, fused optimizer or not."""
        if not gradient_clip_val or self.nonfinite_in_a_row:  # a skipped step: no backward, no scaler step
            return
        scaler = getattr(self.trainer.precision_plugin, "scaler", None)  # fp16-mixed's loss scaler
        if scaler is not None and getattr(optimizer, "_step_supports_amp_scaling", False):
            # Lightning unscales before clipping, but not for an optimizer that unscales in its step (fused AdamW):
            # PyTorch's AMP recipe, so the scaler's step gives it no scale again and still skips it on inf or NaN
            scaler.unscale_(optimizer)
        if gradient_clip_algorithm == "value":
            nn.utils.clip_grad_value_(self.parameters(), gradient_clip_val)
        else:
            nn.utils.clip_grad_norm_(self.parameters(), gradient_clip_val)

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        # the tokenizers are not copied here: Lightning saves them with the data module's state_dict
        checkpoint["attend"] = {"config": self.run_config}
