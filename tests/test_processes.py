"""The cross-process primitives: no lost step counts, a stop flag that cannot deadlock."""

import time

import torch.multiprocessing as mp

from a3c_torch.processes import StepCounter, StopFlag


def _count(counter, times):
    for _ in range(times):
        counter.add(1)


def test_step_counter_loses_no_increments_across_processes():
    ctx = mp.get_context("spawn")
    counter = StepCounter(ctx, start=5)
    processes = [ctx.Process(target=_count, args=(counter, 20000)) for _ in range(2)]
    for p in processes:
        p.start()
    for p in processes:
        p.join(timeout=120)
    assert counter.value == 5 + 2 * 20000


def _count_updates(counter, times):
    for _ in range(times):
        counter.add_update()


def test_update_counter_loses_no_increments_and_starts_at_zero():
    ctx = mp.get_context("spawn")
    counter = StepCounter(ctx, start=5)
    assert counter.updates == 0
    processes = [ctx.Process(target=_count_updates, args=(counter, 5000)) for _ in range(2)]
    for p in processes:
        p.start()
    for p in processes:
        p.join(timeout=120)
    assert counter.updates == 2 * 5000 and counter.value == 5  # the step count is apart


def _wait_then_report(flag, done):
    done.value = 1 if flag.wait(timeout=30) else 2


def test_stop_flag_reaches_a_waiting_child_and_never_blocks_the_setter():
    ctx = mp.get_context("spawn")
    flag, done = StopFlag(ctx), ctx.RawValue("i", 0)
    child = ctx.Process(target=_wait_then_report, args=(flag, done))
    child.start()
    time.sleep(2)
    child.kill()  # killed while waiting: an Event.set() would now hang
    child.join()
    started = time.monotonic()
    flag.set()
    assert flag.is_set() and time.monotonic() - started < 0.5
    child = ctx.Process(target=_wait_then_report, args=(flag, done))
    child.start()
    child.join(timeout=30)
    assert done.value == 1
