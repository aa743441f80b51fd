"""The live streams both services serve (docs/design.md section 7): the per-client outboxes and
the fan-out that fills them, stream authentication, one client's connection and the service that
runs them.

What differs between the agent and the cloud is what feeds the fan-out (the agent's device runtime
and event log; the cloud's committed sync batches) and how a caller's farms are found (the agent's
store rule; the cloud's row-level security): both come in, as a ``StreamScope`` and as calls
to ``StreamFanout.publish``.
"""
