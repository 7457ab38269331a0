#!/usr/bin/env python3
"""CPU and wall time of one durable log append, three ways: appending to a
growing file, writing into zero-written room, writing into fallocate'd
room (what the store's log does since it reserves room).

    python3 bench/fsync-cost.py [dir (target/fsync-cost)] [syncs (5000)] [rounds (3)]

Each sync is a 700-byte write followed by fdatasync; CPU is this process's
user+system time per sync.
"""
import os
import resource
import sys
import time

d = sys.argv[1] if len(sys.argv) > 1 else "target/fsync-cost"
n = int(sys.argv[2]) if len(sys.argv) > 2 else 5000
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
os.makedirs(d, exist_ok=True)
record = b"x" * 700


def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def run(name):
    path = os.path.join(d, name)
    fd = os.open(path, os.O_CREAT | os.O_TRUNC | os.O_RDWR)
    room = n * len(record) + 4096
    if name == "zeros":
        os.write(fd, b"\0" * room)
        os.fsync(fd)
        os.lseek(fd, 0, os.SEEK_SET)
    elif name == "fallocate":
        os.posix_fallocate(fd, 0, room)
        os.fsync(fd)
    c0, t0 = cpu(), time.time()
    for _ in range(n):
        os.write(fd, record)
        os.fdatasync(fd)
    c1, t1 = cpu(), time.time()
    print(f"{name:10} CPU/sync {(c1 - c0) / n * 1e3:.3f} ms  wall/sync {(t1 - t0) / n * 1e3:.3f} ms")
    os.close(fd)
    os.unlink(path)


for _ in range(rounds):
    for way in ("append", "zeros", "fallocate"):
        run(way)
