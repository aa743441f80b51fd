"""The confinement of every write of an agent's batch to that agent's farms: SQL fragments
where ``$1`` is the agent id."""

from __future__ import annotations

__all__ = ["MINE", "VOUCHED"]

MINE = "(SELECT f.id FROM farms AS f WHERE f.agent_id = $1)"

# Who an agent may name as a farm's creator: its owner, or a user the owner granted one of the
# agent's farms (the grant's granted_by). Anyone else (another owner, an admin) is replaced by
# the owner: an agent could otherwise make a farm of theirs, with a creator grant, on its own say
# (issue 24).
VOUCHED = f"""(u.id = (SELECT a.owner_id FROM agents AS a WHERE a.id = $1)
    OR u.id IN (SELECT p.user_id FROM permissions AS p WHERE p.farm_id IN {MINE}
                AND p.granted_by = (SELECT a.owner_id FROM agents AS a WHERE a.id = $1)))"""
