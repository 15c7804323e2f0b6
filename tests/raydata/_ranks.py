"""A training rank in a process of its own: joins the driver's Ray, reads its split for 3 epochs."""

from __future__ import annotations

import pickle


def read_rank(address: str, blob: bytes, epochs: int, queue) -> None:
    """Put ``[ids of epoch 0, ids of epoch 1, ...]`` (and the batch counts) on ``queue``."""
    import ray

    from dataloader import DataLoader, RayStream, StreamSampler

    ray.init(address=address, log_to_driver=False, configure_logging=False)
    try:
        loader = DataLoader(RayStream(pickle.loads(blob), batch_size=8), StreamSampler(), preload=True)
        seen = []
        for _ in range(epochs):
            batches = [batch["id"].tolist() for batch in loader]
            seen.append((len(batches), [i for batch in batches for i in batch]))
        queue.put(seen)
    except BaseException as error:
        queue.put(repr(error))
    finally:
        ray.shutdown()
