"""One rank of test_dist.py's 2-rank gloo jobs: known collectives and
messages under mlprof.dist.trace(), its trace written to OUT/rank%r.json.
Usage: dist_worker.py RANK WORLD STORE OUT [CLOCK_SHIFT]."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import mlprof  # noqa: E402
import mlprof.dist  # noqa: E402

rank, world, store, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
if len(sys.argv) > 5 and sys.argv[5]:
    mlprof.set_config(clock_shift=sys.argv[5])
mlprof.set_config(filename=os.path.join(out, "rank%r.json"), rank=rank)
dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=world)
mlprof.set_state("run")
with mlprof.dist.trace():  # a clock sample here, one at sync() and one at the end
    dist.all_reduce(torch.ones(1000, dtype=torch.float32))                         # seq 0: 4000 bytes
    dist.broadcast(torch.zeros(150, dtype=torch.int32), src=1)                      # seq 1: 600
    outs = [torch.zeros(10, dtype=torch.int64) for _ in range(world)]
    dist.all_gather(outs, torch.full((10,), rank, dtype=torch.int64))             # seq 2: 80
    assert [int(o[0]) for o in outs] == list(range(world))
    dist.barrier()                                                                 # seq 3: 0
    dist.reduce(torch.ones(5, dtype=torch.float64), dst=0, op=dist.ReduceOp.MAX)   # seq 4: 40
    dist.gather(torch.ones(4), [torch.zeros(4) for _ in range(world)] if rank == 0 else None, dst=0)  # 5: 16
    dist.scatter(torch.zeros(3, dtype=torch.int64),                                # 6: the root 48, others 24
                 [torch.ones(3, dtype=torch.int64)] * world if rank == 0 else None, src=0)
    dist.all_to_all_single(torch.zeros(2 * world), torch.ones(2 * world))         # 7: 16
    for call in (lambda: dist.all_to_all([torch.zeros(2)] * world, [torch.ones(2)] * world),  # 8: 16
                 lambda: dist.all_gather_into_tensor(torch.zeros(2 * world), torch.ones(2)),  # 9: 8
                 lambda: dist.reduce_scatter(torch.zeros(2), [torch.ones(2)] * world),        # 10: 16
                 lambda: dist.reduce_scatter_tensor(torch.zeros(2), torch.ones(2 * world))):  # 11: 16
        try:  # gloo has none of these: each raises, on every rank alike
            call()
        except RuntimeError:
            pass
    mlprof.dist.sync()
    if rank == 0:
        dist.send(torch.arange(7, dtype=torch.float64), dst=1)                     # 56 bytes
        dist.isend(torch.arange(3, dtype=torch.int32), dst=1, tag=5).wait()       # 12 bytes
        dist.send(torch.ones(2), dst=1, tag=9)                                     # the stream (0, 1, 9): 0
        dist.send(torch.ones(2), dst=1, tag=9)                                     # and 1
    else:
        got = torch.zeros(7, dtype=torch.float64)
        assert dist.recv(got) == 0 and got[6] == 6                                 # from any source
        dist.irecv(torch.zeros(3, dtype=torch.int32), src=0, tag=5).wait()
        dist.irecv(torch.zeros(2), tag=9).wait()  # from any source: numbered when it has come, in its wait
        dist.recv(torch.zeros(2), src=0, tag=9)   # the next of that stream
    work = dist.all_reduce(torch.ones(4, dtype=torch.float32), async_op=True)      # seq 12: 16
    work.wait()
mlprof.dump()
dist.destroy_process_group()
