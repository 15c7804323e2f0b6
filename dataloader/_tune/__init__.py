"""Autotuning: the policy that picks num_workers and the prefetch depth, and what feeds it.

- ``policy.py``: pure rules from one window's measurements to the next settings.
- ``tuner.py``: the runtime: measures each window of an epoch, asks the policy, applies it.
- ``cpu.py``: how much CPU this process may use (affinity, cgroup quota) and how much is idle.
"""
