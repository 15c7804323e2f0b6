"""Worker processes: the loop they run, the typed messages they exchange with
the main process, the pool that starts and stops them, and how a worker's
exception travels home. See docs/design/workers.md for the state machine.
"""
