"""Tuning sweeps on a Ray cluster: configs as tasks, compiled on CPUs, timed on chips.

`spec` says which cluster and which chips (no Ray); `connect` finds them and what each
chip kind's workers run; `work` is what a worker does (compile, time, check), `tasks`
wraps it in Ray tasks; `dispatch` submits them, streams what they report, retries
configs whose worker was lost and cancels the rest on an interrupt; `sweep` is a
tuning run on the cluster, with its cache. Ray is imported by `connect`, `tasks` and
`dispatch` only, on first use: nothing of it loads with pallaslab.
"""
