"""The one LightningModule every task trains: encoder -> Memory -> attention decoder -> tokens."""

from __future__ import annotations

from collections.abc import Callable

import lightning as L
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torchmetrics import Metric

from attend.metrics import AttentionMetric
from attend.search import SearchResult

# checkpoint key of each tokenizer role, as the data modules' load_state_dict reads them
TOKENIZER_STATE_KEYS = {"source": "src_tokenizer", "target": "tgt_tokenizer"}


class Seq2Seq(L.LightningModule):
    """Cross-entropy training with label smoothing; validation and test metrics on decoded text.

    ``tokenizers`` maps "target" (and "source" for text sources) to tokenizer objects; their
    states and the run's resolved config are saved in every checkpoint, so evaluation rebuilds
    both without training data. Metrics are text metrics, ``update(hypotheses, references)``, or
    ``AttentionMetric``s that read the search's attention weights and the batch.
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
        run_config: dict | None = None,
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
        self.label_smoothing = label_smoothing
        self.run_config = run_config or {}
        self.val_metrics = nn.ModuleDict({name: metric.clone() for name, metric in metrics.items()})
        self.test_metrics = nn.ModuleDict({name: metric.clone() for name, metric in metrics.items()})
        self.test_predictions: list[dict] = []

    # -- model ----------------------------------------------------------------------------
    def encode(self, batch: dict):
        """The source of a batch (token ids, images or audio features) as a Memory."""
        return self.encoder(batch["src"], batch.get("src_lengths"))

    def forward(self, batch: dict) -> tuple[Tensor, Tensor]:
        """Teacher forcing: logits (B, T, V) and attention weights (B, T, S)."""
        return self.decoder(batch["tgt"][:, :-1], self.encode(batch))

    def loss(self, logits: Tensor, tgt_out: Tensor) -> Tensor:
        return F.cross_entropy(
            logits.float().flatten(0, 1),
            tgt_out.flatten(),
            ignore_index=self.target_tokenizer.pad_id,
            label_smoothing=self.label_smoothing,
        )

    @torch.no_grad()
    def generate(self, batch: dict, search: Callable) -> tuple[list[str], SearchResult]:
        """Decode a batch with ``search``; returns detokenised texts and the raw result."""
        tok = self.target_tokenizer
        result = search(
            self.decoder, self.encode(batch), bos_id=tok.bos_id, eos_id=tok.eos_id, pad_id=tok.pad_id
        )
        return [tok.decode(ids) for ids in result.sequences()], result

    # -- steps ----------------------------------------------------------------------------
    def teacher_forced_losses(self, batch: dict) -> tuple[Tensor, Tensor]:
        """(cross-entropy, attention penalty) of predicting tgt[1:] from tgt[:-1] and the source."""
        memory = self.encode(batch)
        tgt_out = batch["tgt"][:, 1:]
        logits, weights = self.decoder(batch["tgt"][:, :-1], memory)  # (B, T, V), (B, T, S)
        target_mask = tgt_out != self.target_tokenizer.pad_id  # (B, T)
        penalty = self.decoder.attention_penalty(weights, target_mask, memory.mask)
        return self.loss(logits, tgt_out), penalty

    def teacher_forced_loss(self, batch: dict) -> Tensor:
        """The training objective of a batch: cross-entropy plus the decoder's attention penalty."""
        cross_entropy, penalty = self.teacher_forced_losses(batch)
        return cross_entropy + penalty

    def _shared_step(self, batch: dict, stage: str) -> Tensor:
        cross_entropy, penalty = self.teacher_forced_losses(batch)
        loss = cross_entropy + penalty
        batch_size = batch["tgt"].size(0)
        self.log(f"{stage}/loss", loss, prog_bar=True, batch_size=batch_size, sync_dist=stage != "train")
        if getattr(self.decoder, "doubly_stochastic", 0.0):
            self.log(f"{stage}/attention_penalty", penalty, batch_size=batch_size, sync_dist=stage != "train")
        if stage == "train":
            return loss
        search = self.val_search if stage == "val" else self.test_search
        metrics = self.val_metrics if stage == "val" else self.test_metrics
        hypotheses, result = self.generate(batch, search)
        for name, metric in metrics.items():
            if isinstance(metric, AttentionMetric):
                metric.update(batch, result, self.target_tokenizer)  # torchmetrics' wrapped update
            else:
                metric.update(hypotheses, batch["references"])
            self.log(f"{stage}/{name}", metric, prog_bar=name == next(iter(metrics)), batch_size=batch_size)
        if stage == "test":
            rows = zip(batch["ids"].tolist(), batch["sources"], batch["references"], hypotheses, strict=True)
            for index, source, reference, hypothesis in rows:
                self.test_predictions.append(
                    {"id": index, "source": source, "reference": reference, "hypothesis": hypothesis}
                )
        return loss

    def training_step(self, batch: dict, batch_idx: int) -> Tensor:
        return self._shared_step(batch, "train")

    def validation_step(self, batch: dict, batch_idx: int) -> Tensor:
        return self._shared_step(batch, "val")

    def test_step(self, batch: dict, batch_idx: int) -> Tensor:
        return self._shared_step(batch, "test")

    def on_test_epoch_start(self) -> None:
        self.test_predictions = []

    # -- optimisation and checkpoints ------------------------------------------------------
    def configure_optimizers(self):
        optimizer = self.optimizer_factory(self.parameters())
        if self.scheduler_factory is None:
            return optimizer
        scheduler = self.scheduler_factory(
            optimizer, total_steps=int(self.trainer.estimated_stepping_batches)
        )
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint["attend"] = {
            "config": self.run_config,
            "tokenizers": {
                TOKENIZER_STATE_KEYS[role]: tokenizer.state_dict() for role, tokenizer in self.tokenizers.items()
            },
        }
