"""What one benchmark run measures: :class:`BenchConfig`, validated at construction."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from .workloads import WORKLOADS, default_workloads, missing_module


@dataclass(frozen=True)
class BenchConfig:
    """What one benchmark run measures."""

    # All twelve (cv2 only where OpenCV is importable, torchconv where torch is): about 8.5
    # minutes on 2 quiet cores.
    workloads: tuple[str, ...] = field(default_factory=default_workloads)
    workers: tuple[int, ...] = (0, 2)
    # Five repetitions give a median that one noisy repetition cannot move.
    reps: int = 5
    # Each run lasts this long after its warm-up batches: ~100 decode batches, and 5 reps of
    # the 47 runs of all workloads take ~5.5 minutes.
    seconds: float = 1.5
    # None: each loader's default (PyTorch's 2 batches per worker; ours, two messages of
    # batches sized from measured ones). An integer: both get it, with its PyTorch meaning.
    prefetch_factor: int | None = None
    use_torch: bool = True
    # Smaller datasets (fewer JPEGs to encode, a smaller memcpy buffer) for smoke runs.
    small: bool = False
    # The machine is shared. Before each (workload, num_workers) group of runs, wait up to
    # quiet_wait s for other processes to go quiet (< 0.3 CPUs busy); a group during which
    # they used more than noisy_cpus is measured again. Waiting and re-measuring together
    # get at most patience s; after that, disturbed groups are kept and counted as such.
    quiet_wait: float = 10.0
    noisy_cpus: float = 0.5
    patience: float = 150.0
    seed: int = 0
    # Workloads with num_workers values of their own (preload: 0 and 2; cv2 and pyloop: 2)
    # keep them; False: ``workers`` applies to every workload (--workers given explicitly).
    own_workers: bool = True

    def __post_init__(self) -> None:
        unknown = sorted(set(self.workloads) - set(WORKLOADS))
        if unknown or not self.workloads:
            raise ValueError(f"workloads must be among {sorted(WORKLOADS)}; got {self.workloads}.")
        for name in self.workloads:
            missing = missing_module(name)
            if missing is not None:
                raise ValueError(
                    f"workload {name} needs {missing}, which is not importable here; install "
                    f"it or leave {name} out of the workloads."
                )
        if not self.workers or any(not isinstance(n, int) or n < 0 for n in self.workers):
            raise ValueError(f"workers must be non-negative integers; got {self.workers}.")
        if not (self.patience >= 0 and self.quiet_wait >= 0):  # NaN fails every comparison
            raise ValueError(
                f"patience and quiet_wait must be >= 0; got {self.patience}, {self.quiet_wait}."
            )
        if self.reps < 1 or not 0 < self.seconds < math.inf or (
            self.prefetch_factor is not None and self.prefetch_factor < 1
        ):  # a NaN or infinite run would never end
            raise ValueError(
                f"reps and prefetch_factor must be >= 1 and seconds > 0; got {self.reps}, "
                f"{self.prefetch_factor}, {self.seconds}."
            )

    @classmethod
    def quick(cls, **overrides: Any) -> "BenchConfig":
        """A smoke run: one short repetition on small datasets (about 15 s)."""
        return cls(**{"reps": 1, "seconds": 0.25, "small": True, "patience": 0.0, **overrides})

    @property
    def torch_prefetch_factor(self) -> int:
        """PyTorch's ``prefetch_factor`` in these runs (its default where none is set)."""
        return 2 if self.prefetch_factor is None else self.prefetch_factor

    def workers_for(self, workload: str) -> tuple[int, ...]:
        """The num_workers values ``workload`` runs with: its own, or the configured ones."""
        own = WORKLOADS[workload].workers
        return own if own and self.own_workers else self.workers
