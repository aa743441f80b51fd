"""Ending owned tasks (protocol/tasks.py): every one is cancelled and has finished on return."""

from __future__ import annotations

import asyncio

from protocol.tasks import cancel_and_wait


async def test_every_task_is_cancelled_and_finished_and_none_is_skipped() -> None:
    cleaned: list[str] = []

    async def worker(name: str) -> None:
        try:
            await asyncio.Event().wait()
        finally:
            cleaned.append(name)

    tasks = [asyncio.create_task(worker(name)) for name in ("a", "b")]
    await asyncio.sleep(0)  # let both start

    await cancel_and_wait(tasks[0], None, tasks[1])

    assert all(task.cancelled() for task in tasks)
    assert sorted(cleaned) == ["a", "b"]


async def test_a_task_that_already_ended_is_fine() -> None:
    async def done() -> int:
        return 1

    task = asyncio.create_task(done())
    await task
    await cancel_and_wait(task)
    assert task.result() == 1
