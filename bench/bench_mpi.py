#!/usr/bin/env python3
"""The mpi hook's cost per call: an 8-byte ping-pong between 2 Open MPI ranks
under `mlprof run --hooks mpi` (bench_mpi_pingpong.c, built here with mpicc),
blocks of round trips through the hooked MPI_Send/MPI_Recv taking turns with
blocks through PMPI_Send/PMPI_Recv in the same run. A round trip is 4 hooked
calls on the critical path, so the cost per call is a quarter of the
difference. Skipped (saying so) without mpicc or mpirun.

usage: bench_mpi.py MLPROF [--rounds 10] [--iterations 20000]
Last line: mlprof-bench-mpi: plain_ns=... hooked_ns=... ratio=... per_call_ns=... load=...
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

ap = argparse.ArgumentParser()
ap.add_argument("mlprof")
ap.add_argument("--rounds", type=int, default=10)
ap.add_argument("--iterations", type=int, default=20000)
a = ap.parse_args()
mpicc, mpirun = shutil.which("mpicc"), shutil.which("mpirun")
if not mpicc or not mpirun:
    print("mlprof-bench-mpi: skipped: no mpicc or mpirun (Debian: openmpi-bin, libopenmpi-dev)")
    sys.exit(0)
here = os.path.dirname(os.path.abspath(__file__))
with tempfile.TemporaryDirectory() as tmp:
    prog = os.path.join(tmp, "pingpong")
    subprocess.run([mpicc, "-O2", "-o", prog, os.path.join(here, "bench_mpi_pingpong.c")], check=True)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    # one file per rank: the rank in the name
    wrapper = os.path.join(tmp, "rank.sh")
    with open(wrapper, "w") as f:
        f.write('#!/bin/sh\nexec "%s" run -q --hooks mpi -o "%s/trace.rank$OMPI_COMM_WORLD_RANK.json" -- "$@"\n'
                % (os.path.abspath(a.mlprof), tmp))
    p = subprocess.run([mpirun, "--oversubscribe", "-n", "2", "sh", wrapper, prog, str(a.rounds),
                        str(a.iterations)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=300)
    m = re.search(r"plain_ns=(\d+) hooked_ns=(\d+) plain_min_ns=(\d+) hooked_min_ns=(\d+)", p.stdout)
    if p.returncode != 0 or not m:
        sys.exit("bench_mpi: the ping-pong failed:\n" + p.stdout)
    plain, hooked, pmin, hmin = (int(x) for x in m.groups())
    load = os.getloadavg()[0]
    print("mpi hook, 8-byte ping-pong on 2 ranks (%d rounds of %d round trips each way):" % (a.rounds, a.iterations))
    print("  round trip: %d ns through PMPI, %d ns through the hook (minima %d, %d)" % (plain, hooked, pmin, hmin))
    print("mlprof-bench-mpi: plain_ns=%d hooked_ns=%d ratio=%.2f per_call_ns=%.0f load=%.2f"
          % (plain, hooked, hooked / plain, (hooked - plain) / 4, load))
