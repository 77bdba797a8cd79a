"""Smoke test through Debian's python3-mpi4py, which initialises MPI with
MPI_THREAD_MULTIPLE: probe, mprobe/mrecv, improbe, isend/irecv and a
one-sided window (put, get, accumulate, fetch-and-op), each checked.
Run with 2 or more processes; prints "ok mpi4py ..." from rank 0 and exits
non-zero on the first wrong answer."""
import sys

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
peer = (rank + 1) % size
left = (rank - 1) % size


def check(cond, what):
    if not cond:
        print(f"FAIL mpi4py rank {rank}: {what}", flush=True)
        comm.Abort(1)


check(MPI.Query_thread() == MPI.THREAD_MULTIPLE, "thread level is not MPI_THREAD_MULTIPLE")

# isend/irecv around the ring
req = comm.isend({"from": rank}, dest=peer, tag=7)
got = comm.irecv(source=left, tag=7).wait()
req.wait()
check(got == {"from": left}, f"isend/irecv got {got}")

# probe, then receive what it saw
comm.send(list(range(rank + 3)), dest=peer, tag=11)
st = MPI.Status()
comm.probe(source=MPI.ANY_SOURCE, tag=11, status=st)
check(st.Get_source() == left, f"probe saw source {st.Get_source()}")
got = comm.recv(source=st.Get_source(), tag=11)
check(got == list(range(left + 3)), f"probe then recv got {got}")

# mprobe/mrecv (the call that needs Open MPI's 128-bit compare-and-swap)
comm.send(b"x" * (100 + rank), dest=peer, tag=12)
msg = comm.mprobe(source=left, tag=12)
got = msg.recv()
check(got == b"x" * (100 + left), "mprobe/mrecv payload")

# improbe until the message is there
comm.send(rank * 10, dest=peer, tag=13)
msg = None
while msg is None:
    msg = comm.improbe(source=left, tag=13)
check(msg.recv() == left * 10, "improbe/mrecv payload")

# one-sided: put, get, accumulate, fetch-and-op on a window of 4 ints
import array

buf = array.array("i", [0, 0, 0, 0])
win = MPI.Win.Create(buf, disp_unit=buf.itemsize, comm=comm)
win.Fence()
win.Put(array.array("i", [rank + 1]), peer, target=0)
win.Fence()
check(buf[0] == left + 1, f"put landed {buf[0]}")
out = array.array("i", [0])
win.Fence()
win.Get(out, peer, target=0)
win.Fence()
check(out[0] == rank + 1, f"get read {out[0]}")
win.Fence()
win.Accumulate(array.array("i", [1]), 0, target=1, op=MPI.SUM)
win.Fence()
if rank == 0:
    check(buf[1] == size, f"accumulate sum {buf[1]}")
win.Lock(0)
old = array.array("i", [0])
win.Fetch_and_op(array.array("i", [2]), old, 0, target_disp=2, op=MPI.SUM)
win.Unlock(0)
comm.Barrier()
if rank == 0:
    win.Lock(0)
    final = array.array("i", [0])
    win.Get(final, 0, target=2)
    win.Unlock(0)
    check(final[0] == 2 * size, f"fetch-and-op total {final[0]}")
win.Free()

comm.Barrier()
if rank == 0:
    print(f"ok mpi4py np={size} thread_multiple probe mprobe improbe isend/irecv one-sided", flush=True)
