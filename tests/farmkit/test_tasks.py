"""Ending owned tasks (farmkit/tasks.py): every one is cancelled and has finished on return."""

from __future__ import annotations

import asyncio

from farmkit.tasks import cancel_and_wait


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


async def test_a_task_that_swallows_its_cancellation_is_cancelled_again() -> None:
    # Python 3.11's wait_for can swallow a cancellation that races with its completion; a
    # supervised loop then goes on. Shutdown must still end it.
    swallowed = asyncio.Event()

    async def stubborn_loop() -> None:
        while True:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                if swallowed.is_set():
                    raise
                swallowed.set()

    task = asyncio.create_task(stubborn_loop())
    await asyncio.sleep(0)
    ending = asyncio.create_task(cancel_and_wait(task))
    done, _ = await asyncio.wait({ending}, timeout=30)  # a hang fails instead of stalling
    assert ending in done, "the loop that swallowed its cancellation is still running"
    assert swallowed.is_set() and task.cancelled()
