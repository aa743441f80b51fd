"""The live fan-out: the event fan-out, its event types and the per-client outboxes it fills.

One small package below events, streams, climate and control, which all publish into it."""
