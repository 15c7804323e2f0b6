"""Autotuning: the policy that picks num_workers and the prefetch depth, and what feeds it."""
