"""hpcrun -a python's workload: pure Python (inner, called by outer) on the main thread and
on a thread of the threading module and one _thread started (raw_worker), numpy's matrix product (BLAS, below numpy's C frames)
called from blas(), a coroutine that asyncio's C task code steps (Python called back
from C), and a forked child's Python (child_work). Prints what it computed; the time goes about half to Python and half to the
product."""
import asyncio
import os
import sys
import _thread
import threading

import numpy as np


def inner(n):
    s = 0
    for i in range(n):
        s += i * i
    return s


def outer(n):
    return inner(n) + inner(n // 2)


def blas(rounds):
    a = np.ones((300, 300))
    for _ in range(rounds):
        a = a @ a / 300.0
    return float(a.sum())


async def coro(n):
    s = 0
    for i in range(n):
        s += i
        if i % 10000 == 0:
            await asyncio.sleep(0)
    return s


def child_work(n):
    os._exit(0 if outer(n) > 0 else 1)


def worker(n, out):
    out.append(outer(n))


def raw_worker(n, out, done):
    out.append(outer(n))
    done.release()


scale = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0
got = []
t = threading.Thread(target=worker, args=(int(1000000 * scale), got))
t.start()
raw_got, raw_done = [], _thread.allocate_lock()
raw_done.acquire()
_thread.start_new_thread(raw_worker, (int(600000 * scale), raw_got, raw_done))
r = outer(int(2000000 * scale))
b = blas(int(40 * scale))
c = asyncio.run(coro(int(1000000 * scale)))
pid = os.fork()
if pid == 0:
    child_work(int(500000 * scale))
_, status = os.waitpid(pid, 0)
t.join()
raw_done.acquire()
print("python_work", r, got[0], raw_got[0], round(b, 3), c, status)
