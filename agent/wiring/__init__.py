"""Wiring of the agent: one module per capability, each a ``cleanup_ctx`` that builds its objects.

Only agent.app and these modules construct services; every other module receives its
dependencies through its constructor.
"""
