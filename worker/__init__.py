"""bats.worker: the lightweight worker baked into machine images.

It connects to the master, runs shell tasks one at a time (one more prefetched) and reports exit
codes, runtimes and output tails. The entry point is :func:`bats.worker.main.main`
(``bats-worker`` / ``python -m bats.worker``); it imports only the stdlib, ``bats.common`` and
pyzmq/msgpack, so images need nothing heavier.
"""
