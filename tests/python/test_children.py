"""The processes a recording Python program starts keep their traces
(src/record/children.c, python/mlprof/__init__.py's _ChildHook): the
children of multiprocessing, which end in os._exit; a Pool's workers, which
`with Pool()` stops by SIGTERM; children started anew with the parent's
MLPROF_FILENAME, which must not replace the parent's trace; and a hand-made
fork that ends in os._exit, whose lost events the parent names; and a
script stopped by ^C, which Python ends by a SIGINT of its own after its exit
handlers and before the C library's."""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
import mlprof  # noqa: E402

FORK_SCRIPT = r'''
import multiprocessing as mp, os, sys
import mlprof
mlprof.set_config(filename="fork.json")
mlprof.set_state("run")
d = mlprof.Domain("d")

def work(i):
    with d.new_task("mp_work"):
        return i * i

if __name__ == "__main__":
    with d.new_task("parent_work"):
        pass
    ctx = mp.get_context("fork")
    p = ctx.Process(target=work, args=(3,))
    p.start()
    p.join()
    with ctx.Pool(2) as pool:  # terminate() at the end: SIGTERM
        assert pool.map(work, range(6)) == [i * i for i in range(6)]
    pool = ctx.Pool(2)  # close and join: the workers end in os._exit
    assert pool.map(work, range(4)) == [i * i for i in range(4)]
    pool.close()
    pool.join()
    print("parent", os.getpid(), "process", p.pid, "exitcode", p.exitcode)
'''

SPAWN_SCRIPT = r'''
import multiprocessing as mp, os
import mlprof

def work(i):
    with mlprof.Domain("d").new_task(f"child{i}"):
        pass
    os.write(1, f"child {i} {os.getpid()}\n".encode())  # one write: the children run at once

if __name__ == "__main__":
    with mlprof.Domain("d").new_task("parent"):
        pass
    ctx = mp.get_context("spawn")
    ps = [ctx.Process(target=work, args=(i,)) for i in range(2)]
    for p in ps:
        p.start()
    for p in ps:
        p.join()
    print("parent", os.getpid(), flush=True)
'''

OS_EXIT_SCRIPT = r'''
import os
import mlprof
mlprof.set_config(filename="x.json")
mlprof.set_state("run")
d = mlprof.Domain("d")
pid = os.fork()
if pid == 0:
    with d.new_task("lost_work"):
        pass
    os._exit(0)
os.waitpid(pid, 0)
pid2 = os.fork()
if pid2 == 0:
    with d.new_task("kept_work"):
        pass
    mlprof.dump()
    os._exit(0)
os.waitpid(pid2, 0)
print("lost", pid, "kept", pid2, flush=True)
'''

CTRL_C_SCRIPT = r'''
import os, signal, threading, time
import mlprof
mlprof.set_config(filename="c.json")
mlprof.set_state("run")
d = mlprof.Domain("d")
threading.Timer(0.2, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
with d.new_task("before_ctrl_c"):
    pass
while True:
    with d.new_task("step"):
        time.sleep(0.01)
'''


def run(tmp_path, script, **env):
    env = dict(os.environ, PYTHONPATH=os.path.join(HERE, "..", "..", "python"),
               LIBMLPROF_PATH=mlprof._lib.lib.path, **env)
    (tmp_path / "script.py").write_text(script)  # a file: spawn's children import it again
    p = subprocess.run([sys.executable, "script.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    return p


def spans(path):
    with open(path) as f:
        trace = json.load(f)
    return trace["otherData"]["pid"], [e["name"] for e in trace["traceEvents"] if e.get("ph") == "X"]


def test_multiprocessing_fork_children_write_their_traces(tmp_path):
    p = run(tmp_path, FORK_SCRIPT)
    words = p.stdout.split()
    parent, child = int(words[1]), int(words[3])
    assert words[5] == "0", p.stdout
    pid, names = spans(tmp_path / "fork.json")
    assert pid == parent and names == ["parent_work"], names
    children = {}
    for f in os.listdir(tmp_path):
        if f.startswith("fork.") and f != "fork.json":
            pid, names = spans(tmp_path / f)
            assert f == f"fork.{pid}.json" and set(names) <= {"mp_work"}, (f, names)
            children[pid] = len(names)
    # the Process, and every task of both pools, whichever worker ran it
    assert children.get(child) == 1, children
    assert sum(children.values()) == 1 + 6 + 4, children
    assert len(children) == 5, children
    assert "wrote no trace" not in p.stderr and "killed by signal" not in p.stderr, p.stderr


def test_spawned_children_do_not_replace_the_parents_trace(tmp_path):
    # a claim of an ancestor on another file stays, and does not stop the parent's
    p = run(tmp_path, SPAWN_SCRIPT, MLPROF_AUTOSTART="1", MLPROF_FILENAME="sp.json",
            MLPROF_TRACE_OWNER="1 /nonexistent/other.json")
    pids = {}
    for line in p.stdout.splitlines():
        words = line.split()
        pids[words[0] if words[0] == "parent" else f"child{words[1]}"] = int(words[-1])
    assert sorted(pids) == ["child0", "child1", "parent"], (p.stdout, p.stderr)
    pid, names = spans(tmp_path / "sp.json")
    assert pid == pids["parent"] and names == ["parent"], names
    for i in range(2):
        cpid = pids[f"child{i}"]
        pid, names = spans(tmp_path / f"sp.{cpid}.json")
        assert pid == cpid and names == [f"child{i}"], names
        said = [line for line in p.stderr.splitlines() if f"process {cpid} writes its trace to sp.{cpid}.json" in line]
        assert len(said) == 1 and f"process {pids['parent']}'s trace" in said[0], p.stderr


def test_a_child_leaving_by_os_exit_is_named(tmp_path):
    p = run(tmp_path, OS_EXIT_SCRIPT)
    words = p.stdout.split()
    lost, kept = int(words[1]), int(words[3])
    assert not (tmp_path / f"x.{lost}.json").exists()
    assert spans(tmp_path / f"x.{kept}.json")[1] == ["kept_work"]
    said = [line for line in p.stderr.splitlines() if "recorded events but wrote no trace" in line]
    assert len(said) == 1 and f"the forked child {lost} recorded" in said[0] and str(kept) not in said[0], p.stderr


def test_ctrl_c_keeps_the_trace(tmp_path):
    # Python ends by SIGINT (status -2), its exit handlers run, the C library's not
    env = dict(os.environ, PYTHONPATH=os.path.join(HERE, "..", "..", "python"),
               LIBMLPROF_PATH=mlprof._lib.lib.path)
    (tmp_path / "script.py").write_text(CTRL_C_SCRIPT)
    p = subprocess.run([sys.executable, "script.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == -2 and "KeyboardInterrupt" in p.stderr, (p.returncode, p.stderr)
    pid, names = spans(tmp_path / "c.json")
    assert names[0] == "before_ctrl_c" and set(names[1:]) == {"step"} and len(names) >= 2, names
