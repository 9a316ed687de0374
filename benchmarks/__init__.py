"""The speed benchmark behind scripts/benchmark.py: variants, naive baseline, FLOPs, timing and memory.

It lives outside the installed ``attend`` package (nothing in ``attend`` imports it): run from the
repository root, or put the root on ``sys.path`` as scripts/benchmark.py does.
"""
