#!/usr/bin/env python3
"""On-demand capture (mlprof capture PID) and capture ranges, end to end.

A program linked with libmlprof (capture_target) runs with on_demand=on and is
captured several times while it runs: each trace must hold exactly the
iterations that the program's own observer saw recorded during that capture,
a contiguous run of them, and no two captures may share one. Then the errors:
a dead pid, a pid without mlprof, a stale socket (of a dead and of a live
pid), a second capture at once, another user, --steps, a bad --config key, an
unwritable output. Then capture_range=span:NAME, and, when RUN_CAPTURE is not
"none" (not under ThreadSanitizer: a preload library), capture_range=
cudaProfilerStart and mlprof run --on-demand over an unmodified program.

usage: capture_check.py MLPROF CAPTURE_TARGET RUN_CAPTURE|none RUN_NVTX|none OUTDIR
"""
import atexit
import glob
import json
import os
import pwd
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

MLPROF, TARGET, RUN_CAPTURE, RUN_NVTX, OUT = sys.argv[1:6]
failures = []
# each line as it is printed: a test killed by ctest's timeout still shows how far it came
sys.stdout.reconfigure(line_buffering=True)


def check(cond, what):
    if not cond:
        failures.append(what)
        print(f"FAIL: {what}", file=sys.stderr)
    return cond


def describe(pid, why):
    """What a process that hangs is doing: its state, each thread's wait
    channel and, where gdb is installed, every thread's stack."""
    print(f"--- {why}: process {pid}", file=sys.stderr)
    try:
        for tid in sorted(os.listdir(f"/proc/{pid}/task"), key=int):
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                st = f.read().rsplit(")", 1)[1].split()[0]
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                comm = f.read().strip()
            with open(f"/proc/{pid}/task/{tid}/wchan") as f:
                wchan = f.read().strip()
            print(f"    thread {tid} ({comm}): state {st}, waits in {wchan or '-'}", file=sys.stderr)
    except OSError as e:
        print(f"    cannot read /proc/{pid}: {e}", file=sys.stderr)
        return
    if shutil.which("gdb"):
        try:
            g = subprocess.run(["gdb", "-p", str(pid), "-batch", "-nx", "-ex", "thread apply all bt 30"],
                               capture_output=True, text=True, timeout=120)
            print("\n".join("    " + l for l in g.stdout.splitlines() if l.startswith(("#", "Thread"))),
                  file=sys.stderr)
        except subprocess.TimeoutExpired:
            print("    gdb did not finish in 120 s", file=sys.stderr)


def family(pid):
    """pid and its descendants, from /proc."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            with open(f"/proc/{p}/task/{p}/children") as f:
                todo += [int(x) for x in f.read().split()]
        except OSError:
            pass
    return out


def capture(pid, *args, env=None, user=None):
    p = subprocess.Popen([MLPROF, "capture", str(pid), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=env, preexec_fn=user)
    try:
        out, err = p.communicate(timeout=200)
    except subprocess.TimeoutExpired:
        check(False, f"mlprof capture {pid} {' '.join(args)} did not end in 200 s")
        for q in family(p.pid) + family(pid):
            describe(q, "a capture that does not end")
        p.kill()
        out, err = p.communicate()
    print(f"$ mlprof capture {pid} {' '.join(args)} -> {p.returncode}\n{out}{err}", end="")
    return subprocess.CompletedProcess(p.args, p.returncode, out, err)


def read_line(pipe, what, pid, seconds=120):
    """A line from a child's pipe, or "" (a failure, said) when none comes in time."""
    deadline = time.time() + seconds
    buf = b""
    fd = pipe.fileno()
    while b"\n" not in buf:
        left = deadline - time.time()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            check(False, f"{what}: no line in {seconds} s")
            for q in family(pid):
                describe(q, what)
            return ""
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        buf += chunk
    return buf.decode(errors="replace")


def trace_iters(path):
    """The iteration numbers of the "iter N" spans in a trace."""
    with open(path) as f:
        t = json.load(f)
    return [int(e["name"][5:]) for e in t["traceEvents"] if e.get("name", "").startswith("iter ")
            and e.get("ph") in ("X", "B")]


def trace_spans(path, name):
    with open(path) as f:
        t = json.load(f)
    return [e for e in t["traceEvents"] if e.get("ph") == "X" and (name is None or e.get("name") == name)]


def wait_for(path, what, seconds=120):
    deadline = time.time() + seconds
    while not os.path.exists(path):
        if time.time() > deadline:
            check(False, f"{what}: {path} did not appear in {seconds} s")
            return False
        time.sleep(0.05)
    return True


started = []  # the targets: killed at exit, so that a failing check never leaves one running


@atexit.register
def kill_targets():
    for p in started:
        if p.poll() is None:
            for q in family(p.pid):  # a forked child too: none may hold ctest's pipes open
                try:
                    os.kill(q, signal.SIGKILL)
                except OSError:
                    pass


WATCHDOG_S = 480  # ctest's TIMEOUT is 600


def watchdog(signum=None, frame=None):
    """Before ctest's own timeout (600 s): say what every process still
    running is doing, then end with a failure. An alarm, not a thread:
    preexec_fn (another user's process) is not safe in a threaded program."""
    print(f"FAIL: capture_check has run {WATCHDOG_S} s: what is still running", file=sys.stderr)
    for q in family(os.getpid())[1:]:
        describe(q, "still running")
    kill_targets()
    os._exit(1)


signal.signal(signal.SIGALRM, watchdog)
signal.alarm(WATCHDOG_S)


def start_target(tag, env, mode="loop", user=None, workdir=None):
    workdir = workdir or OUT
    seen = os.path.join(workdir, f"{tag}.seen")
    stop = os.path.join(workdir, f"{tag}.stop")
    for f in (seen, stop):
        if os.path.exists(f):
            os.unlink(f)
    # unbuffered: the ready line is read with a deadline, straight from the pipe
    p = subprocess.Popen([TARGET, seen, stop, mode], stdout=subprocess.PIPE, env=env, preexec_fn=user, bufsize=0)
    started.append(p)
    line = read_line(p.stdout, f"{tag}: the target's ready line", p.pid)
    check(line.startswith("ready "), f"{tag}: the target started ({line!r})")
    return p, seen, stop


def finish_target(p, seen, stop, tag):
    open(stop, "w").close()
    try:
        rc = p.wait(timeout=200)
    except subprocess.TimeoutExpired:
        for q in family(p.pid):
            describe(q, f"{tag}: the target does not end")
        rc = None
    check(rc == 0, f"{tag}: the target's exit status {rc}")
    with open(seen) as f:
        return [int(x) for x in f.read().split()]


for old in glob.glob(os.path.join(OUT, "*")):
    shutil.rmtree(old) if os.path.isdir(old) else os.unlink(old)
rt = tempfile.mkdtemp(prefix="mlprof-rt-")  # a private XDG_RUNTIME_DIR (0700)
base_env = dict(os.environ, XDG_RUNTIME_DIR=rt)
for k in list(base_env):
    if k.startswith("MLPROF_"):
        del base_env[k]
env = dict(base_env, MLPROF_ON_DEMAND="1", MLPROF_FILENAME=os.path.join(OUT, "cap.%p.json"))

# ------------------------------------------------------- captures of one process
p, seen_file, stop_file = start_target("main", env)
pid = p.pid
sock = os.path.join(rt, "mlprof", f"{pid}.sock")
wait_for(sock, "the socket")
check(os.stat(os.path.join(rt, "mlprof")).st_mode & 0o777 == 0o700, "the socket's folder is private")
check(not glob.glob(os.path.join(OUT, f"cap.{pid}*.json")), "nothing written before a capture")

captures = []  # (path, kind)
c = capture(pid, "--duration", "300ms")
if check(c.returncode == 0, f"first capture: status {c.returncode}"):
    path = c.stdout.strip()
    check(path == os.path.join(OUT, f"cap.{pid}.capture1.json"), f"first capture's file name: {path}")
    captures.append((path, "duration"))
c = capture(pid, "--duration=0.2")
if check(c.returncode == 0, f"second capture: status {c.returncode}"):
    path = c.stdout.strip()
    check(path.endswith(f"cap.{pid}.capture2.json"), f"second capture's file name: {path}")
    captures.append((path, "duration"))
c = capture(pid, "--frames", "step:3")
if check(c.returncode == 0, f"frames capture: status {c.returncode}"):
    captures.append((c.stdout.strip(), "frames"))
    with open(c.stdout.strip()) as f:
        ev = json.load(f)["traceEvents"]
    # a frame is an async slice: a begin and an end
    check([len([e for e in ev if e.get("name") == "step" and e.get("ph") == ph]) for ph in "be"] == [3, 3],
          "frames capture: exactly 3 passes of the frame step, begun and ended")

# a second capture while one runs
first = subprocess.Popen([MLPROF, "capture", str(pid), "--duration", "5s", "--config", "level=2"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0)
line = read_line(first.stderr, "the long capture's first line", first.pid)
check("capturing" in line, f"the long capture says it started: {line!r}")
c = capture(pid, "--duration", "100ms")
check(c.returncode == 5, f"a second capture at once: status {c.returncode}, 5 expected")
check("already running" in c.stderr, "a second capture at once: the message says a capture is running")
out, err = first.communicate(timeout=200)
out, err = out.decode(), err.decode()
if check(first.returncode == 0, f"the long capture: status {first.returncode} ({err})"):
    captures.append((out.strip(), "duration"))

named = os.path.join(OUT, "named.json")
c = capture(pid, "--duration", "100ms", "-o", named)
if check(c.returncode == 0 and c.stdout.strip() == named, f"-o: status {c.returncode}, path {c.stdout!r}"):
    captures.append((named, "duration"))

c = capture(pid, "--duration", "100ms", "-o", "/nonexistent-mlprof-dir/x.json")
check(c.returncode == 1 and "cannot write" in c.stderr, f"unwritable output: status {c.returncode}, 1 expected")
c = capture(pid, "--duration", "100ms", "--config", "nosuchkey=1")
check(c.returncode == 2 and "nosuchkey" in c.stderr, f"unknown --config key: status {c.returncode}, 2 expected")
c = capture(pid, "--steps", "0")
check(c.returncode == 2 and "--steps" in c.stderr, f"--steps 0: status {c.returncode}, 2 expected")
c = capture(pid, "--steps", "4")
if check(c.returncode == 0, f"steps capture: status {c.returncode}"):
    captures.append((c.stdout.strip(), "steps"))
    steps = sorted(int(e["name"].split("#")[1]) for e in trace_spans(c.stdout.strip(), None)
                   if e["name"].startswith("ProfilerStep#"))
    check(len(steps) == 4 and steps == list(range(steps[0], steps[0] + 4)),
          f"steps capture: exactly 4 consecutive steps, got {steps}")
c = capture(pid, "--duration", "100ms", "--config", "level=2,counters=task-clock,page-faults")
if check(c.returncode == 0, f"--config with a comma list: status {c.returncode}"):
    captures.append((c.stdout.strip(), "duration"))

# another user
if os.geteuid() != 0:
    print("SKIP another user: not root, cannot run a process as another user")
else:
    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError:
        nobody = None
    def as_nobody():
        os.setgid(nobody.pw_gid)
        os.setuid(nobody.pw_uid)
    if nobody is None:
        print("SKIP another user: no user nobody")
    elif subprocess.run(["/bin/sh", "-c", 'test -x "$0" && test -x "$1"', MLPROF, TARGET],
                        preexec_fn=as_nobody).returncode != 0:
        # a checkout in a private folder (a mktemp -d, a home) is out of another user's reach
        print("SKIP another user: nobody cannot run the build's programs from this folder")
    else:
        c = capture(pid, "--duration", "100ms", user=as_nobody, env=dict(base_env, XDG_RUNTIME_DIR=""))
        check(c.returncode == 6, f"another user's capture of our process: status {c.returncode}, 6 expected")
        # and the process's own check (SO_PEERCRED): root asks nobody's process
        shared = tempfile.mkdtemp(prefix="mlprof-other-")
        os.chmod(shared, 0o777)
        other_env = dict(base_env, MLPROF_ON_DEMAND="1", MLPROF_FILENAME=os.path.join(shared, "o.json"))
        del other_env["XDG_RUNTIME_DIR"]
        o, oseen, ostop = start_target("other", other_env, user=as_nobody, workdir=shared)
        osock = f"/tmp/mlprof-{nobody.pw_uid}/{o.pid}.sock"
        if wait_for(osock, "another user's socket"):
            c = capture(o.pid, "--duration", "100ms")
            check(c.returncode == 6 and "refused" in c.stderr,
                  f"root asks another user's process: status {c.returncode}, 6 expected")
        finish_target(o, oseen, ostop, "other")
        shutil.rmtree(shared, ignore_errors=True)

seen = finish_target(p, seen_file, stop_file, "main")
check(not os.path.exists(sock), "the socket is removed at exit")
check(not os.path.exists(os.path.join(OUT, f"cap.{pid}.json")), "nothing written at exit after the captures")

# every capture holds exactly what the program saw recorded while it ran
windows = []
for path, kind in captures:
    its = trace_iters(path)
    check(len(its) == len(set(its)), f"{path}: no iteration twice")
    if not check(its, f"{path}: some iterations"):
        continue
    check(sorted(its) == list(range(min(its), max(its) + 1)), f"{path}: a contiguous window of iterations")
    if kind == "frames":
        check(len(its) == 3, f"{path}: exactly 3 iterations for 3 frames, got {len(its)}")
    if kind == "steps":
        check(len(its) == 4, f"{path}: exactly 4 iterations for 4 steps, got {len(its)}")
    windows.append(sorted(its))
    print(f"{os.path.basename(path)}: iterations {min(its)}-{max(its)} ({len(its)})")
allc = [i for w in windows for i in w]
check(len(allc) == len(set(allc)), "no iteration in two captures")
check(sorted(allc) == sorted(seen),
      f"the captures hold exactly what the program saw recorded ({len(allc)} in traces, {len(seen)} seen)")

# ------------------------------------------------------------------ errors
dead = subprocess.Popen(["true"])
dead.wait()
c = capture(dead.pid)
check(c.returncode == 3 and "no such process" in c.stderr, f"a dead pid: status {c.returncode}, 3 expected")

plain = subprocess.Popen(["sleep", "60"])
# an earlier process with this pid (another test's, killed) may have left its socket in the fallback folder
left = os.path.exists(f"/tmp/mlprof-{os.geteuid()}/{plain.pid}.sock")
c = capture(plain.pid, env=base_env)
check(c.returncode == 4 and ("stale socket" if left else "not profiled by mlprof") in c.stderr,
      f"a pid without mlprof: status {c.returncode}, 4 expected")
if left:
    c = capture(plain.pid, env=base_env)
    check(c.returncode == 4 and "not profiled by mlprof" in c.stderr,
          f"a pid without mlprof, its stale socket removed: status {c.returncode}, 4 expected")
# a socket file of a live pid that nobody serves
stale = os.path.join(rt, "mlprof", f"{plain.pid}.sock")
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(stale)
s.close()
c = capture(plain.pid, env=base_env)
check(c.returncode == 4 and "stale" in c.stderr and not os.path.exists(stale),
      f"a stale socket of a live pid: status {c.returncode}, 4 expected, and the file removed")
plain.kill()
plain.wait()

# the program's own filename cannot be written: said by the capture, which records nothing
b, bseen, bstop = start_target("badfile", dict(env, MLPROF_FILENAME="/nonexistent-mlprof-dir/t.%p.json"))
if wait_for(os.path.join(rt, "mlprof", f"{b.pid}.sock"), "badfile: the socket"):
    c = capture(b.pid, "--duration", "100ms")
    check(c.returncode == 1 and "/nonexistent-mlprof-dir/t." in c.stderr,
          f"an unwritable filename: status {c.returncode}, 1 expected, naming the file")
check(finish_target(b, bseen, bstop, "badfile") == [], "badfile: nothing was recorded")

# a socket left by a killed process
k, _, _ = start_target("killed", env)
ksock = os.path.join(rt, "mlprof", f"{k.pid}.sock")
if wait_for(ksock, "the killed target's socket"):
    k.kill()
    k.wait()
    check(os.path.exists(ksock), "a killed process leaves its socket")
    c = capture(k.pid, env=base_env)
    check(c.returncode == 3 and "stale socket" in c.stderr and not os.path.exists(ksock),
          f"a killed process's socket: status {c.returncode}, 3 expected, and the file removed")

# a stopped process takes the connection (the kernel's backlog) but cannot answer
st, stseen, ststop = start_target("stopped", env)
if wait_for(os.path.join(rt, "mlprof", f"{st.pid}.sock"), "the stopped target's socket"):
    os.kill(st.pid, signal.SIGSTOP)
    # kill() returns before the stop: a listener still running would take the request and say hello
    deadline = time.time() + 60
    while time.time() < deadline and not all(
            open(f"/proc/{st.pid}/task/{t}/stat").read().rsplit(")", 1)[1].split()[0] == "T"
            for t in os.listdir(f"/proc/{st.pid}/task")):
        time.sleep(0.01)
    c = capture(st.pid, "--duration", "100ms", "--answer-timeout", "1s", env=base_env)
    check(c.returncode == 1 and "did not answer in 1 s" in c.stderr,
          f"a stopped process: status {c.returncode}, 1 expected, with what it did not do")
    os.kill(st.pid, signal.SIGCONT)
c = capture(st.pid, "--answer-timeout", "0s")
check(c.returncode == 2 and "--answer-timeout" in c.stderr, f"--answer-timeout 0s: status {c.returncode}, 2 expected")
finish_target(st, stseen, ststop, "stopped")

# ------------------------------------------------------- --tree: a forked child
if RUN_CAPTURE == "none":
    print("SKIP --tree: ThreadSanitizer refuses threads started in forked children")
else:
    t, tseen, tstop = start_target("tree", env, mode="tree")
    # the child's pid is on the ready line; start_target read it already: find it by its parent
    with open(f"/proc/{t.pid}/task/{t.pid}/children") as f:
        kids = [int(x) for x in f.read().split()]
    check(len(kids) == 1, f"tree: one child, got {kids}")
    if kids and wait_for(os.path.join(rt, "mlprof", f"{t.pid}.sock"), "tree: the parent's socket") and \
            wait_for(os.path.join(rt, "mlprof", f"{kids[0]}.sock"), "tree: the child's socket"):
        c = capture(t.pid, "--tree", "--duration", "200ms")
        paths = c.stdout.split()
        check(c.returncode == 0 and sorted(paths) == sorted(os.path.join(OUT, f"cap.{x}.capture1.json")
                                                              for x in (t.pid, kids[0])),
              f"--tree: status {c.returncode}, a trace of each process: {paths}")
        c = capture(t.pid, "--tree", "--duration", "100ms", "-o", os.path.join(OUT, "tree.json"))
        paths = c.stdout.split()
        check(c.returncode == 0 and sorted(paths) == sorted(os.path.join(OUT, f"tree.{x}.json")
                                                              for x in (t.pid, kids[0])),
              f"--tree -o: status {c.returncode}, FILE with each pid: {paths}")
        for path in paths:
            check(os.path.exists(path) and trace_iters(path), f"--tree: {path} holds iterations")
    finish_target(t, tseen, tstop, "tree")

# -------------------------------------------------------- capture_range=span
renv = dict(base_env, MLPROF_CAPTURE_RANGE="span:window", MLPROF_FILENAME=os.path.join(OUT, "range.%p.json"))
r, rseen, rstop = start_target("range", renv, mode="range")
rc = r.wait(timeout=300)
check(rc == 0, f"range: exit status {rc}")
rfiles = [os.path.join(OUT, f"range.{r.pid}.capture{n}.json") for n in (1, 2)]
if check(all(os.path.exists(f) for f in rfiles), "capture_range=span:window: two traces"):
    check(sorted(trace_iters(rfiles[0])) == list(range(10, 15)), "first window: iterations 10-14")
    check(sorted(trace_iters(rfiles[1])) == list(range(25, 30)), "second window: iterations 25-29")
    check(len(trace_spans(rfiles[0], "window")) == 1, "the first window's span is in its trace")
with open(rseen) as f:
    check(sorted(int(x) for x in f.read().split()) == list(range(10, 15)) + list(range(25, 30)),
          "the program recorded exactly the two windows")
check(not os.path.exists(os.path.join(OUT, f"range.{r.pid}.capture3.json")), "no third trace")

# ---------------------------------------------------- through mlprof run (preload)
if RUN_CAPTURE == "none":
    print("SKIP mlprof run --on-demand and cudaProfilerStart: no preload library in this build (ThreadSanitizer)")
else:
    merged = os.path.join(OUT, "cuda_range.json")
    p2 = subprocess.run([MLPROF, "run", "-q", "-o", merged, "--hooks", "cuda", "--capture_range",
                         "cudaProfilerStart", "--", RUN_CAPTURE, "range"], capture_output=True, text=True,
                        timeout=300, env=base_env)
    print(p2.stdout + p2.stderr, end="")
    check(p2.returncode == 0, f"capture_range=cudaProfilerStart: status {p2.returncode}")
    parts = sorted(glob.glob(merged + ".parts/trace.*.capture*.json"))
    if check(len(parts) == 2, f"capture_range=cudaProfilerStart: two traces, got {parts}"):
        counts = [len(trace_spans(f, "cudaMalloc")) for f in parts]
        check(counts == [5, 3], f"cudaMalloc calls in the two ranges: {counts}, [5, 3] expected")

    if RUN_NVTX == "none":
        print("SKIP capture_range=nvtx: no NVTX 3 headers in this build")
    else:
        merged = os.path.join(OUT, "nvtx_range.json")
        p3 = subprocess.run([MLPROF, "run", "-q", "-o", merged, "--hooks", "nvtx", "--capture_range", "nvtx:epoch",
                             "--", RUN_NVTX], capture_output=True, text=True, timeout=300, env=base_env)
        print(p3.stdout + p3.stderr, end="")
        check(p3.returncode == 0, f"capture_range=nvtx:epoch: status {p3.returncode}")
        parts = sorted(glob.glob(merged + ".parts/trace.*.capture*.json"))
        if check(len(parts) == 1, f"capture_range=nvtx:epoch: one trace, got {parts}"):
            names = [e["name"] for e in trace_spans(parts[0], None)]
            check(names.count("epoch") == 1 and names.count("step") == 3 and "worker" not in names,
                  f"capture_range=nvtx:epoch: the range and its 3 steps, nothing after: {sorted(names)}")

    od = os.path.join(OUT, "od.json")
    ostop = os.path.join(OUT, "od.stop")
    run = subprocess.Popen([MLPROF, "run", "-q", "--on-demand", "-o", od, "--hooks", "cuda", "--", RUN_CAPTURE,
                            "loop", ostop], stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0,
                           env=base_env)
    started.append(run)
    line = read_line(run.stdout, "run --on-demand: the program's ready line", run.pid)
    check(line.startswith("ready "), f"run --on-demand: the program started ({line!r})")
    opid = int(line.split()[1]) if line.startswith("ready ") else 0
    if opid and wait_for(os.path.join(rt, "mlprof", f"{opid}.sock"), "run --on-demand's socket"):
        c = capture(opid, "--duration", "300ms", env=base_env)
        if check(c.returncode == 0, f"run --on-demand: capture status {c.returncode}"):
            path = c.stdout.strip()
            check(path.startswith(od + ".parts/") and len(trace_spans(path, "cudaMalloc")) > 0,
                  f"run --on-demand: the capture {path} holds the program's calls")
        # mlprof run's own pid: it does not wait, its child does
        c = capture(run.pid, "--duration", "100ms", env=base_env)
        check(c.returncode == 4 and "--tree" in c.stderr, f"mlprof run's pid: status {c.returncode}, 4 expected")
        c = capture(run.pid, "--tree", "--duration", "100ms", env=base_env)
        check(c.returncode == 0 and c.stdout.strip().endswith(f"trace.{opid}.capture2.json"),
              f"mlprof run's pid --tree: status {c.returncode}, its program's capture: {c.stdout!r}")
    open(ostop, "w").close()
    out, err = run.communicate(timeout=200)
    out, err = out.decode(), err.decode()
    print(out + err, end="")
    check(run.returncode == 0 and os.path.exists(od), f"run --on-demand: status {run.returncode}, merged trace")
    # each capture is a part once (not linked again as a finished dump's), merged once
    parts = sorted(os.listdir(od + ".parts")) if os.path.isdir(od + ".parts") else []
    check(parts and all(".capture" in p for p in parts if p.startswith("trace.")),
          f"run --on-demand: the captures alone are the parts: {parts}")
    if os.path.exists(od):
        with open(od) as f:
            inputs = json.load(f).get("otherData", {}).get("merge", {}).get("inputs", [])
        check(len(inputs) == len([p for p in parts if p.startswith("trace.")]),
              f"run --on-demand: each capture merged once: {inputs}")

signal.alarm(0)
shutil.rmtree(rt, ignore_errors=True)
if failures:
    print(f"capture_check: {len(failures)} failure(s)", file=sys.stderr)
    sys.exit(1)
print("capture_check: all passed")
