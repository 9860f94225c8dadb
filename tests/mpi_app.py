"""mpi_app.py - the mpi4py side of mpi_check.py: known messages and
collectives through mpi4py's buffer interface (MPI_Send, MPI_Recv,
MPI_Isend, MPI_Irecv, MPI_Wait, MPI_Allreduce, MPI_Bcast, MPI_Barrier), run on
4 ranks under `mlprof run --hooks mpi`.

Rank r sends 10*(r+1) bytes with tag 3 to (r+1)%n three times and receives
three from (r-1)%n; then one Isend/Irecv pair of 32 bytes, tag 4, the other way
round, each completed by Wait; then MPI_Barrier, MPI_Bcast of 50 bytes from
root 3 and MPI_Allreduce of 4 doubles (an array.array: no numpy needed)."""
import array

from mpi4py import MPI

comm = MPI.COMM_WORLD
r, n = comm.Get_rank(), comm.Get_size()
nxt, prv = (r + 1) % n, (r - 1) % n
out = bytearray(10 * (r + 1))
inb = bytearray(10 * (prv + 1))
for _ in range(3):
    comm.Send([out, MPI.BYTE], dest=nxt, tag=3)
for _ in range(3):
    comm.Recv([inb, MPI.BYTE], source=prv, tag=3)
a, b = bytearray(32), bytearray(32)
rq = comm.Irecv([b, MPI.BYTE], source=nxt, tag=4)
sq = comm.Isend([a, MPI.BYTE], dest=prv, tag=4)
rq.Wait()
sq.Wait()
comm.Barrier()
buf = bytearray(50)
comm.Bcast([buf, MPI.BYTE], root=3)
x = array.array("d", [1.0, 2.0, 3.0, 4.0])
y = array.array("d", [0.0] * 4)
comm.Allreduce([x, MPI.DOUBLE], [y, MPI.DOUBLE], op=MPI.SUM)
assert y[3] == 4.0 * n
