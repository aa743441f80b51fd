"""The one table of sync record kinds and their direction (protocol/sync_kinds.py)."""

from __future__ import annotations

from agent.sync.batcher import build_records
from agent.sync.outbox_rows import EntityRow, Selection
from cloud.services.sync import ROLLUPS
from cloud.store.sync_mirror import ENTITIES
from protocol.sync import ROLLUP_BLOCK
from protocol.sync_kinds import identity_kinds, refusal, upload_kinds


def test_identity_flows_down_only_and_unknown_kinds_are_refused() -> None:
    assert identity_kinds() == {"users", "permissions", "sessions", "api_keys"}
    assert not identity_kinds() & upload_kinds()
    for kind in identity_kinds():
        assert refusal(kind) == "identity flows from the cloud only"
    assert refusal("no_such_kind") == "unknown record kind"
    for kind in upload_kinds():
        assert refusal(kind) is None


def test_the_cloud_mirror_applies_exactly_the_kinds_that_flow_up() -> None:
    # Contact points and handed-over notifications go to the cloud's notification store
    # (cloud/store/notify.py), not the mirror.
    notify = {"contact_points", "notifications"}
    assert ENTITIES | {"readings", ROLLUP_BLOCK, *ROLLUPS, *notify} == upload_kinds()


def test_the_agent_never_puts_an_identity_row_in_a_batch() -> None:
    rows = Selection(
        entities=[
            EntityRow(seq=1, lane=0, kind="permission", entity="permissions", entity_id="p",
                      op="upsert", payload="{}", bytes=2),
            EntityRow(seq=2, lane=0, kind="farm", entity="farms", entity_id="f", op="upsert",
                      payload='{"id": "f"}', bytes=11),
        ]
    )  # fmt: skip
    out = build_records(rows, {})
    assert [r.kind for r in out.records] == ["farms"]
    assert out.dropped == 1
