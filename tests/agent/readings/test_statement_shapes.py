"""Batches of any size become statements of a few fixed shapes: every row once, in order."""

from __future__ import annotations

from agent.store.statement_shapes import fixed_chunks


def test_any_batch_is_cut_into_full_chunks_and_powers_of_two_in_order() -> None:
    shapes: set[int] = set()
    for total in range(1, 1_300):
        chunks = list(fixed_chunks(range(total), 500))
        assert [item for chunk in chunks for item in chunk] == list(range(total))
        shapes.update(len(chunk) for chunk in chunks)
    assert shapes == {500, 256, 128, 64, 32, 16, 8, 4, 2, 1}
