"""The lab: this loader measured against its peers, from a clone of the repository.

Not installed with the library (``pyproject.toml`` packages ``dataloader*`` only) and not
imported by it; every module here uses the public API of ``dataloader`` only
(tests/test_layering.py holds that). Each bench runs from the clone's root as
``python -m benchmarks.<name>``; ``python -m benchmarks`` lists them, and README.md beside this
file gives their options. The measure of a user's own machine is ``python -m dataloader bench``.

Benches (each a module with ``main(argv)``):

- ``compare``: this loader against ``torch.utils.data.DataLoader`` and against no loader, on
  twelve workloads, and settings of this loader (preload, threads, monitoring).
- ``floor``: the floor of a process transport on this machine, against our loader.
- ``gpu``: feeding a GPU: device copy and preload against PyTorch's pinned-memory recipe.
- ``vision``: each vision transform against torchvision, OpenCV or Pillow.
- ``columnar``: Parquet and Arrow reading against the plain reader, PyTorch, Hugging Face
  ``datasets`` and ImageFolder.
- ``raydata``: Ray Data's ``iter_batches`` against ``RayStream`` and this loader alone.
- ``autotune``: ``num_workers="auto"`` against a sweep of fixed ``num_workers``.
- ``resume``: what keeping track of the loader's position costs, against the commit before it.
- ``remote``: Parquet and tar streams read from a local S3 server behind injected latency,
  against the local disk and WebDataset's own loader.
- ``serial_cost``: CPU per batch of the serial path on small samples, against another checkout.
- ``packing``: ``PackedStream`` against Grain's first-fit and best-fit packers (padding and
  throughput), and ``BucketSampler``'s padding against random batches.
- ``freethreading``: thread workers on free-threaded Python 3.14t against process workers there
  and on Python 3.14 with the GIL (samples/s, peak memory), each run in a child interpreter.
- ``decode``: JPEG decode + RandomResizedCrop(224) + flip at three image sizes: the fused
  ``DecodeRandomResizedCrop`` against today's path, PyTorch, tf.data, DALI, Grain and SPDL.
- ``jpeg_decoders``: JPEG decoders at full and reduced scale, one thread, and the fused crop
  against the two-step one per image (time and PSNR).

Their parts: ``config``, ``workloads``, ``small``, ``batches``, ``loaders``, ``measure``,
``schedule``, ``summary``, ``tables``, ``machine`` and ``plot`` (the ``compare`` bench);
``floor_workers``; ``vision_ops``; ``columnar_contenders`` and ``columnar_data``;
``autotune_runs``, ``autotune_measure`` and ``autotune_report``; ``remote_contenders`` and
``remote_data``; ``packing_contenders`` and ``packing_data``; ``freethreading_runs``,
``freethreading_child``, ``freethreading_workloads`` and ``freethreading_report``;
``decode_contenders``, ``decode_child`` and ``decode_data``; and, shared by all,
``repetitions`` (rotating order, paired medians), ``output`` (cells, tables, JSON) and
``options`` (the command-line options they share).
"""

#: The benches, by module name, with what each measures (``python -m benchmarks`` prints them).
BENCHES = {
    "compare": "this loader vs torch.utils.data.DataLoader vs no loader, and its own settings",
    "floor": "the floor of a process transport on this machine, against our loader",
    "gpu": "feeding a GPU: device copy and preload vs pin_memory=True (needs CUDA)",
    "vision": "each vision transform vs torchvision, OpenCV or Pillow",
    "columnar": "Parquet and Arrow reading vs the plain reader, PyTorch and Hugging Face datasets",
    "raydata": "Ray Data as a source: RayStream vs Ray's iter_batches (needs the ray extra)",
    "autotune": 'num_workers="auto" vs a sweep of fixed num_workers',
    "resume": "what tracking the position costs: state_dict() time, rate vs the commit before",
    "remote": "Parquet and tar streams from S3 (local moto, 0/20/50 ms latency) vs local disk and WebDataset",
    "serial_cost": "CPU per batch with num_workers=0 on small samples, this checkout or another (--tree)",
    "packing": "PackedStream vs Grain's packers (padding, throughput); BucketSampler vs random batches",
    "freethreading": "thread vs process workers on free-threaded 3.14t, and vs 3.14 (GIL) processes",
    "decode": "JPEG decode + RandomResizedCrop + flip: fused vs unfused vs torch, tf.data, DALI, Grain, SPDL",
    "jpeg_decoders": "JPEG decoders at 1/1, 1/2, 1/4 scale; the fused crop vs the two-step one per image",
}
