"""Stages 2-4 as the parent sees them: which records make each batch (a job), and
the state after it.

``choose.epoch_plan`` picks the plan of an epoch: ``plan.MapPlan`` for a sampler
over a map-style dataset, ``batch_sampler.BatchSamplerPlan`` for a batch sampler,
``stream.StreamPlan`` for a stream read in this process and ``parts.StreamParts``
for a stream split across workers. Each is a ``plan.EpochPlan``: the iterator
reads them all through the same few members. Executors (``stoker._exec``) run the
jobs.
"""
