"""CTC prefix scores for joint CTC/attention beam search (Watanabe et al. 2017), batched over hypotheses: the
search's ``ctc`` scorer."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from attend.memory import Memory
from attend.search.scorer import Scorer, ScorerState


class CTCPrefixScorer(Scorer):
    """The CTC head's scores of a hypothesis (blank = pad id): its log-probabilities over the encoder's frames
    (``ctc_log_probs`` (B, S, V), which the model gives) make each search's ``CTCPrefixScores``. Partial: each
    candidate costs a sum over the frames, so only the pre-beam gets one."""

    needs = "ctc_log_probs"
    partial = True

    def start(
        self, given: Tensor | None, memory: Memory, beam_size: int, bos_id: int, eos_id: int, pad_id: int
    ) -> ScorerState:
        if given is None:
            raise ValueError(
                "joint CTC/attention decoding needs the CTC head's log-probabilities, but the model has no CTC head: "
                "train with model.ctc_weight > 0, or decode with decoding.ctc_weight=0"
            )
        return CTCPrefixScores(given, memory.lengths, beam_size, blank=pad_id, eos=eos_id)


class CTCPrefixScores(ScorerState):
    """log P_ctc of each live hypothesis extended by candidate tokens, for N = b*K hypotheses (K per sentence).

    The CTC forward variables of a prefix h, r^n_t(h) (frames 0..t emit h, the last frame h's last label) and
    r^b_t(h) (the last frame a blank), give the prefix probability of h + c, psi(h + c) = sum_t phi_{t-1} x_t(c)
    with phi = r^n + r^b (r^b alone when c repeats h's last label: CTC needs a blank between equal labels), and
    the whole sequence's P(h) = r^n + r^b at the utterance's last frame, which scores the end token. The values
    are ESPnet's CTCPrefixScoreTH's; the way is faster: psi needs only h's forward variables, so ``score`` runs no
    recursion (a matrix product over frames), and only the prefixes the beam keeps get their own (``advance``: K
    per sentence, not every candidate); and both recursions over frames are first-order linear in probability
    space, so they are solved at once with cumulative sums instead of a Python loop over frames. All of it in
    float64 (the frame log-probabilities come in float32): cumulative sums of log-probabilities grow with the
    frames, and float32 would lose their differences. Frames past an utterance's length are never read. The state
    is by hypothesis (row); the first column of the forward variables is frame -1, where only the empty prefix has
    a path. Memory: the frame probabilities in float64 (twice the log-probabilities) and (N, 2, S + 1) variables.
    """

    def __init__(self, log_probs: Tensor, lengths: Tensor, beam_size: int, blank: int, eos: int) -> None:
        frames = log_probs.size(1)
        padding = torch.arange(frames, device=log_probs.device) >= lengths.unsqueeze(1)  # (b, S)
        # padding frames are never read: zeros keep their sums finite (no NaN from -inf - -inf)
        self.log_probs = log_probs.float().masked_fill(padding.unsqueeze(-1), 0.0).transpose(1, 2)  # (b, V, S)
        self.probs = self.log_probs.double().exp()  # (b, V, S): prefix probabilities are sums of their products
        self.lengths = lengths  # (b,)
        self.blank_sums = F.pad(self.log_probs[:, blank].double().cumsum(-1), (1, 0))  # (b, S + 1), frame -1 first
        self.beam_size, self.eos = beam_size, eos
        # the empty prefix: only blanks so far (frame -1: the empty path, probability 1)
        blanks = self.blank_sums.repeat_interleave(beam_size, dim=0)  # (N, S + 1)
        self.forward_vars = torch.stack([torch.full_like(blanks, -torch.inf), blanks], dim=1)  # (N, 2, S + 1)
        self.prefix = blanks.new_zeros(blanks.size(0))  # (N,) log psi(h): the empty prefix has probability 1
        self.last = torch.full((blanks.size(0),), -1, dtype=torch.long, device=blanks.device)  # (N,) no label yet

    def score(self, candidates: Tensor) -> Tensor:
        """log psi(h + c) (N, C) of each hypothesis h and candidate c (N, C); for the end token log P(h).

        psi(h + c) = sum_t phi_{t-1} x_t(c) is a dot product over frames: phi scaled by its largest value (so that
        the largest is 1) times the frame probabilities, in float64, a batched matrix product, no exp per candidate.
        """
        frames = self.log_probs.size(-1)
        sentence = torch.arange(candidates.size(0), device=candidates.device) // self.beam_size  # (N,)
        label, blank = self.forward_vars[..., :frames].unbind(1)  # (N, S) each: frame t - 1 at column t
        phi = torch.stack([torch.logaddexp(label, blank), blank], dim=-1)  # (N, S, 2): after another label, a repeat
        valid = torch.arange(frames, device=phi.device) < self.lengths[sentence].unsqueeze(1)  # (N, S)
        phi = phi.masked_fill(~valid.unsqueeze(-1), -torch.inf)
        scale = phi[..., 0].amax(dim=-1)  # (N,)
        scale = torch.where(scale.isfinite(), scale, 0.0)  # a prefix CTC cannot emit: every sum is 0, log -inf
        probs = self.probs[sentence.unsqueeze(1), candidates]  # (N, C, S)
        sums = torch.bmm(probs, (phi - scale.view(-1, 1, 1)).exp())  # (N, C, 2)
        repeat = candidates == self.last.unsqueeze(1)  # (N, C)
        scores = sums.gather(2, repeat.long().unsqueeze(-1)).squeeze(-1).log() + scale.unsqueeze(1)  # (N, C)
        return torch.where(candidates == self.eos, self.whole().unsqueeze(1), scores)

    def gains(self, candidates: Tensor) -> Tensor:
        """log psi(h + c) - log psi(h) (N, C), in float32: log P(h) - log psi(h) for the end token, so that a finished
        hypothesis has gained log P_ctc(h) in all. -inf after a prefix CTC cannot emit (no gain then, not NaN)."""
        old = self.prefix.unsqueeze(1)  # (N, 1)
        return torch.where(old.isfinite(), self.score(candidates) - old, -torch.inf).float()

    def whole(self) -> Tensor:
        """log P(h) (N,) of each hypothesis as a whole sequence (the end token's score): no recursion, a look-up."""
        sentence = torch.arange(self.prefix.size(0), device=self.prefix.device) // self.beam_size  # (N,)
        total = torch.logaddexp(self.forward_vars[:, 0], self.forward_vars[:, 1])  # (N, S + 1)
        return total.gather(1, self.lengths[sentence].unsqueeze(1)).squeeze(1)  # column len is frame len - 1

    def advance(self, rows: Tensor, tokens: Tensor, keep: Tensor | None = None) -> None:
        """Make hypotheses ``rows`` (N',) extended by ``tokens`` (N',) the live ones; ``keep`` (b',): the sentences
        still searched (all if None), K rows each. Only these get their forward variables (not every candidate that
        ``score`` saw): the recursions over frames cost most, and N' of them instead of N x C is C times less."""
        label, blank = self.forward_vars[rows].unbind(1)  # (N', S + 1) of the prefixes extended
        repeat = (tokens == self.last[rows]).unsqueeze(1)  # (N', 1)
        if keep is not None:
            self.log_probs, self.probs, self.lengths = self.log_probs[keep], self.probs[keep], self.lengths[keep]
            self.blank_sums = self.blank_sums[keep]
        frames = self.log_probs.size(-1)
        sentence = torch.arange(rows.size(0), device=rows.device) // self.beam_size  # (N',)
        x = self.log_probs[sentence, tokens].double()  # (N', S)
        start = torch.where(repeat, blank, torch.logaddexp(label, blank))[:, :frames] + x  # (N', S) first frame of c
        sums = x.cumsum(-1)  # (N', S)
        new_label = sums + torch.logcumsumexp(start - sums, dim=-1)  # (N', S) r^n_t(h + c)
        blanks = self.blank_sums[sentence]  # (N', S + 1)
        label_before = F.pad(new_label[:, :-1], (1, 0), value=-torch.inf)  # (N', S) r^n_{t-1}(h + c)
        new_blank = blanks[:, 1:] + torch.logcumsumexp(label_before - blanks[:, :-1], dim=-1)  # r^b_t(h + c)
        self.forward_vars = F.pad(torch.stack([new_label, new_blank], dim=1), (1, 0), value=-torch.inf)
        valid = torch.arange(frames, device=x.device) < self.lengths[sentence].unsqueeze(1)  # (N', S)
        self.prefix = start.masked_fill(~valid, -torch.inf).logsumexp(-1)  # (N',) log psi(h + c)
        self.last = tokens
