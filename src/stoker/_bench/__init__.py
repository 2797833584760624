"""``stoker bench``: stoker against the PyTorch DataLoader and bare NumPy, on built-in workloads.

The command line lives in ``stoker._cli``; :func:`harness.run` does the work, the
workloads live one per module in :mod:`stoker._bench.workloads`.
"""
