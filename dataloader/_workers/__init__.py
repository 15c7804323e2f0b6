"""Worker processes: the loop they run, the typed messages they exchange with
the main process, the pool that starts and stops them, and how a worker's
exception travels home. See docs/design/workers.md for the state machine.

- ``loop.py``: the loop a worker process runs: it makes the tasks it is sent, in order.
- ``messages.py``: the protocol's typed messages; ``wire.py`` the socket that carries them.
- ``pool.py``: starting, watching and stopping worker processes; ``handle.py`` what the
  executor knows of one worker, process or thread; ``process_view.py`` a worker process as
  an epoch's ``worker_processes()`` shows it, still answering once reaped.
- ``exits.py``: waiting, with a bound, for a worker or probe to exit, then killing it.
- ``threads.py``: thread workers, the same loop and protocol in threads of this process;
  ``thread_channel.py`` their channels, which the pool closes even while a thread is stuck.
- ``remote_error.py``: a worker's exception carried home and re-raised as its own type.
- ``probe.py``: finding the sample that kills its worker, one sample at a time in a fresh process.
- ``descriptors.py``: the file descriptors a pool needs, checked against ``ulimit -n``;
  ``fd_passing.py`` how a worker hands the main process a segment's descriptor.
- ``native_threads.py``: the libraries' thread pools capped at one thread in each worker.
- ``heap.py``: a worker's malloc keeps freed memory for the next batch (no page faults per batch).
- ``arrow_pool.py``: a forked worker's Arrow allocations from a memory pool of its own.
- ``fork_safety.py``: a process forked by user code leaves the parent's workers alone.
- ``main_guard.py``: a spawn script without the ``__main__`` guard, told so on both sides.
"""
