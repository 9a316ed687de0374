"""Peak memory and time of additive attention energies, computed at once or in chunks, forward + backward.

    .venv/bin/python scripts/bench_attention_memory.py [--batch 8] [--steps 100] [--frames 500] [--hidden 128]
                                                       [--max-elements 33554432]

Each mode runs in a fresh process, so its peak resident memory (ru_maxrss) is its own. The (B, T, S, A)
tensor of tanh inputs is what long audio memories make large: B utterances, T output steps, S encoder
frames, A the attention size.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import resource
import time


def measure(batch: int, steps: int, frames: int, hidden: int, max_elements: int, queue) -> None:
    import torch

    from attend.attention.energy import additive_energies

    torch.manual_seed(0)
    queries = torch.randn(batch, steps, hidden, requires_grad=True)  # (B, T, A)
    keys = torch.randn(batch, frames, hidden, requires_grad=True)  # (B, S, A)
    v = torch.nn.Linear(hidden, 1, bias=False)
    baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    energies = additive_energies(queries, keys, v, max_elements)  # (B, T, S)
    energies.square().sum().backward()
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    queue.put((seconds, (peak - baseline) / 1024))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--frames", type=int, default=500)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--max-elements", type=int, default=2**25)
    args = parser.parse_args()
    size = args.batch * args.steps * args.frames * args.hidden
    print(f"B x T x S x A = {args.batch} x {args.steps} x {args.frames} x {args.hidden} = {size:,} elements "
          f"({size * 4 / 2**20:,.0f} MB in fp32)")
    # large blocks are mmapped and go back to the system when freed, so the peak is what was live at once
    # (glibc reads this when a process starts: the spawned children inherit it)
    os.environ.setdefault("MALLOC_MMAP_THRESHOLD_", "131072")
    context = multiprocessing.get_context("spawn")
    for name, limit in (("at once", size), (f"chunks of <= {args.max_elements:,}", args.max_elements)):
        queue = context.Queue()
        process = context.Process(
            target=measure, args=(args.batch, args.steps, args.frames, args.hidden, limit, queue)
        )
        process.start()
        seconds, megabytes = queue.get()
        process.join()
        print(f"{name:>28}: {seconds:6.2f} s forward + backward, peak memory +{megabytes:,.0f} MB")


if __name__ == "__main__":
    main()
