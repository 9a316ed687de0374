"""The speed benchmark behind scripts/benchmark.py: variants, naive baseline, FLOPs, timing and memory."""
