"""Every attention type of conf/attention/ side by side: forward + backward time and peak memory."""

from __future__ import annotations

import statistics

import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf

from attend.config.compose import CONF_DIR
from attend.memory import Memory, length_mask
from benchmarks.memory import PeakMeter, in_subprocess, timed


def attention_types() -> list[str]:
    """The names of conf/attention/*.yaml: the list of options."""
    return sorted(path.stem for path in (CONF_DIR / "attention").glob("*.yaml"))


def measure_type(name: str, sizes: dict, repeats: int, device_name: str, queue) -> None:
    """In a fresh process: one forward + backward of ``name`` for memory, then ``repeats`` timed ones.

    Queries of all T steps at once (T > 1, as teacher forcing without input feeding asks); a type whose
    state chains the steps (location) runs T steps of one query, as its decoders do. Sources have
    between half and all of ``frames`` positions (padding as in a real batch).
    """
    device = torch.device(device_name)
    torch.manual_seed(0)
    batch, steps, frames = sizes["batch"], sizes["steps"], sizes["frames"]
    attention = instantiate(OmegaConf.load(CONF_DIR / "attention" / f"{name}.yaml"))
    attention = attention(query_dim=sizes["query_dim"], value_dim=sizes["value_dim"]).to(device).train()
    values = torch.randn(batch, frames, sizes["value_dim"], device=device, requires_grad=True)  # (B, S, Dv)
    queries = torch.randn(batch, steps, sizes["query_dim"], device=device, requires_grad=True)  # (B, T, Dq)
    lengths = torch.randint(frames // 2, frames + 1, (batch,), device=device)
    mask = length_mask(lengths, frames)  # (B, S)

    def forward_backward(values: torch.Tensor = values, queries: torch.Tensor = queries, mask: torch.Tensor = mask):
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            memory = attention.prepare(Memory(values=values, mask=mask))
            state = attention.init_state(memory)
            if state:  # the steps depend on each other
                outputs = []
                for t in range(queries.size(1)):
                    out = attention(queries[:, t : t + 1], memory, state)  # context (B, 1, Dv)
                    state = out.state
                    outputs.append(out.context)
                context = torch.cat(outputs, dim=1)  # (B, T, Dv)
                log_prob = None
            else:
                out = attention(queries, memory, state)  # context (B, T, Dv)
                context, log_prob = out.context, out.log_prob
            loss = context.float().square().mean()
            if log_prob is not None:  # hard attention: the REINFORCE surrogate's gradient
                loss = loss + log_prob.float().mean()
        loss.backward()

    forward_backward(values[:1, :2], queries[:1, :1], mask[:1, :2])  # one-off start-up (autograd threads)
    meter = PeakMeter(device)
    meter.start()
    forward_backward()
    peak = meter.megabytes()
    times = timed(forward_backward, repeats, device)
    queue.put({"peak_mb": peak, "ms": 1000 * statistics.median(times), "stepwise": bool(attention.init_state(
        attention.prepare(Memory(values=values.detach(), mask=mask))))})


def compare_attention_types(all_sizes: dict[str, dict], repeats: int, device: str) -> dict[str, dict]:
    """{size name: {type: {"peak_mb", "ms", "stepwise"}}}, each measured in its own process."""
    return {
        size_name: {name: in_subprocess(measure_type, name, sizes, repeats, device) for name in attention_types()}
        for size_name, sizes in all_sizes.items()
    }
