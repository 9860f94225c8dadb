#!/usr/bin/env python3
"""`mlprof run` stopped as launchers stop ranks (torchrun sends SIGTERM to each
worker's pid, mpirun and timeout(1) to a process group, a closed terminal
SIGHUP): the signal reaches the program once, in its own process group (its
children too), the program's trace is merged, and mlprof run dies of the
signal itself; a program that ignores SIGTERM is killed after --term-timeout;
SIGINT sent to mlprof run is passed on and the program's status kept; ^C in a
terminal reaches the program once; a run stopped over and over while it
merges still merges; mlprof run killed outright leaves its program SIGTERM,
not running on; and a rank of a job stopped so writes its done file and the
job is merged whole. Nothing here is timed: every wait is for a line, a file
or an end, with a generous bound that only a hang reaches.

usage: run_signal_check.py MLPROF RUN_SIGNALS OUTDIR
"""
import glob
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time

failures = []


def check(cond, what):
    """Records a failure unless cond; returns cond."""
    if not cond:
        failures.append(what)
        print(f"FAIL: {what}", file=sys.stderr)
    return cond

MLPROF, PROG, OUT = sys.argv[1:4]
PROG = os.path.abspath(PROG)
shutil.rmtree(OUT, ignore_errors=True)
os.makedirs(OUT)
SANITIZED = os.environ.get("RUN_CHECK_SANITIZED") == "1"
# under ASan its own malloc comes before any preloaded one
HOOKS = ["--hooks", "blas"] if SANITIZED else []
BOUND = 120  # seconds: only a hang reaches it
LAUNCHER_VARS = re.compile(r"^(OMPI_|PMIX_|PMI_|MPI_LOCAL|SLURM_|RANK$|WORLD_SIZE$|LOCAL_RANK$|"
                           r"LOCAL_WORLD_SIZE$|TORCHELASTIC_|MLPROF_)")
BASE_ENV = {k: v for k, v in os.environ.items() if not LAUNCHER_VARS.match(k)}


def read_line(p, what):
    """The next line of p's standard output; None (said) when none comes."""
    ready, _, _ = select.select([p.stdout], [], [], BOUND)
    line = p.stdout.readline() if ready else ""
    check(line, f"{what}: no line from the program")
    return line


def start(name, mode, *options, session=False, env=None):
    """mlprof run -o OUT/name.json -- run_signals mode, once the program has said
    it is ready: (process, output, [pid, pgid, child...])."""
    out = os.path.join(OUT, name + ".json")
    p = subprocess.Popen([MLPROF, "run", "-o", out, *HOOKS, *options, "--", PROG, mode],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=session,
                         env=env or BASE_ENV)
    line = read_line(p, name)
    ids = [int(w) for w in line.split()[1:]] if line.startswith("ready") else []
    return p, out, ids


def finish(p, name, ids=()):
    """mlprof run's end: (status, stdout, stderr). Should it hang (or leave its program
    running, with the output pipes open), mlprof run and the program are killed."""
    try:
        so, se = p.communicate(timeout=BOUND)
    except subprocess.TimeoutExpired:
        check(False, f"{name}: mlprof run did not end, or left its program running")
        for pid in [p.pid, *ids[:1], *ids[2:]]:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        so, se = p.communicate()
    sys.stdout.write(so)
    sys.stderr.write(se)
    return p.returncode, so, se


def gone(pid):
    """Whether pid has ended (no process, or a zombie nobody reaps)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def wait_for(cond):
    end = time.monotonic() + BOUND
    while not cond() and time.monotonic() < end:
        time.sleep(0.02)
    return cond()


def merged_pids(out, why):
    if not check(os.path.exists(out), f"{why}: {out} was not written"):
        return set()
    with open(out) as f:
        t = json.load(f)
    return {e["pid"] for e in t["traceEvents"] if e.get("name") == "process_name"}


def test_term():
    """SIGTERM to mlprof run alone (torchrun's way): passed on, merged, and mlprof run dies of it."""
    p, out, ids = start("term", "wait")
    if not ids:
        return
    pid, pgid = ids[:2]
    check(pgid == pid, f"term: the program leads a process group of its own: pid {pid}, pgid {pgid}")
    p.send_signal(signal.SIGTERM)
    rc, so, se = finish(p, "term", ids)
    check(rc == -signal.SIGTERM, f"term: mlprof run ended with {rc}, not by SIGTERM")
    check(se.count("SIGTERM: passed on") == 1, f"term: the signal passed on once, said: {se!r}")
    check("was killed by signal 15" in so, f"term: the summary gives the program's end: {so!r}")
    check(pid in merged_pids(out, "term"), f"term: the program's trace is merged")
    check(gone(pid), f"term: the program {pid} still runs")
    check(glob.glob(out + ".parts/trace.*.json"), "term: the parts are kept")


def test_group():
    """SIGTERM to mlprof run's whole process group (mpirun, timeout): the program gets it once, through mlprof run."""
    p, out, ids = start("group", "wait", session=True)
    if not ids:
        return
    os.killpg(p.pid, signal.SIGTERM)
    rc, so, se = finish(p, "group", ids)
    check(rc == -signal.SIGTERM, f"group: mlprof run ended with {rc}, not by SIGTERM")
    check(se.count("SIGTERM: passed on") == 1, f"group: passed on once: {se!r}")
    check(ids[0] in merged_pids(out, "group"), "group: the program's trace is merged")
    check(gone(ids[0]), f"group: the program {ids[0]} still runs")


def test_children():
    """The signal goes to the program's process group: a child it forked gets it too, and both traces are merged."""
    p, out, ids = start("children", "fork")
    if len(ids) < 3:
        check(False, f"children: the program's ready line: {ids}")
        return
    pid, _, child = ids
    p.send_signal(signal.SIGTERM)
    rc, so, se = finish(p, "children", ids)
    check(rc == -signal.SIGTERM, f"children: mlprof run ended with {rc}")
    check("exited with status 143" in so, f"children: the program's own status is reported: {so!r}")
    pids = merged_pids(out, "children")
    check({pid, child} <= pids, f"children: both processes merged: {sorted(pids)}, wanted {pid} and {child}")
    check(gone(child), f"children: the child {child} still runs")


def test_ignored():
    """A program that ignores SIGTERM is killed after --term-timeout, and mlprof run still ends by SIGTERM."""
    p, out, ids = start("ignored", "ignore", "--term-timeout", "1")
    if not ids:
        return
    p.send_signal(signal.SIGTERM)
    rc, so, se = finish(p, "ignored", ids)
    check(rc == -signal.SIGTERM, f"ignored: mlprof run ended with {rc}")
    check("did not end within 1 s of SIGTERM: killed (SIGKILL)" in se, f"ignored: the kill is said: {se!r}")
    check("was killed by signal 9" in so, f"ignored: the summary: {so!r}")
    check(gone(ids[0]), f"ignored: the program {ids[0]} still runs")


def test_hup():
    p, out, ids = start("hup", "wait")
    if not ids:
        return
    p.send_signal(signal.SIGHUP)
    rc, so, se = finish(p, "hup", ids)
    check(rc == -signal.SIGHUP, f"hup: mlprof run ended with {rc}, not by SIGHUP")
    check("SIGHUP: passed on" in se, f"hup: passed on: {se!r}")
    check(ids[0] in merged_pids(out, "hup"), "hup: the program's trace (written as it died of SIGHUP) is merged")


def test_busy():
    """SIGHUP straight to a program whose eight threads allocate without end (their
    records fill the buffers while the continuous dump drains, and they go on
    running while the trace is written): the trace is written, the program dies of
    SIGHUP, and mlprof run says so with its status (129)."""
    p, out, ids = start("busy", "busy")
    if not ids:
        return
    time.sleep(1)
    os.kill(ids[0], signal.SIGHUP)
    rc, so, se = finish(p, "busy", ids)
    check(rc == 128 + signal.SIGHUP, f"busy: mlprof run ended with {rc}, not the program's 129")
    check("killed by signal 1 (Hangup): the trace up to it is written" in se and "not written" not in se
          and "in time" not in se, f"busy: the program's trace written as it died: {se!r}")
    check(ids[0] in merged_pids(out, "busy"), "busy: the program's trace is merged")


def test_int():
    """SIGINT sent to mlprof run alone is passed on; the program's status is mlprof run's, as for ^C."""
    p, out, ids = start("int", "wait")
    if not ids:
        return
    p.send_signal(signal.SIGINT)
    rc, so, se = finish(p, "int", ids)
    check(rc == 128 + signal.SIGINT, f"int: the program's status is passed on: {rc}")
    check("SIGINT: passed on" in se, f"int: passed on: {se!r}")
    check(ids[0] in merged_pids(out, "int"), "int: the program's trace is merged")


def test_repeated():
    """SIGTERM again and again until mlprof run ends: the program gets one, and the merge is made all the same."""
    p, out, ids = start("repeated", "wait")
    if not ids:
        return
    end = time.monotonic() + BOUND
    while p.poll() is None and time.monotonic() < end:
        try:
            p.send_signal(signal.SIGTERM)
        except ProcessLookupError:
            break
        time.sleep(0.005)
    rc, so, se = finish(p, "repeated", ids)
    check(rc == -signal.SIGTERM, f"repeated: mlprof run ended with {rc}")
    check(se.count("SIGTERM: passed on") == 1, f"repeated: passed on once: {se!r}")
    check(ids[0] in merged_pids(out, "repeated"), "repeated: the program's trace is merged")
    check(glob.glob(out + ".parts/trace.*.json"), "repeated: the parts are kept")


def test_killed():
    """mlprof run killed outright (SIGKILL, a launcher's last word): its program gets SIGTERM and writes its
    trace, instead of running on alone."""
    p, out, ids = start("killed", "wait")
    if not ids:
        return
    p.kill()
    finish(p, "killed", ids)
    if not check(wait_for(lambda: gone(ids[0])), f"killed: the program {ids[0]} still runs after mlprof run was killed"):
        os.kill(ids[0], signal.SIGKILL)
    check(wait_for(lambda: os.path.exists(os.path.join(out + ".parts", f"trace.{ids[0]}.json"))),
          "killed: the program wrote its trace as SIGTERM ended it")


def test_terminal():
    """In a terminal's foreground, the program shares mlprof run's process group and the terminal's ^C reaches it
    once (mlprof run does not pass the terminal's own signal on again)."""
    try:
        import pty
        pid, fd = pty.fork()
    except OSError as e:
        print(f"run_signal: no terminal test: no pseudo-terminal here ({e})")
        return
    if pid == 0:
        try:
            os.execve(MLPROF, [MLPROF, "run", "-q", "-o", os.path.join(OUT, "tty.json"), *HOOKS, "--", PROG,
                               "count"], BASE_ENV)
        finally:
            os._exit(127)
    buf = b""
    completed = False

    def until(pattern):
        """Reads the terminal until pattern (a regex) is in what it said; the match, or None."""
        nonlocal buf
        end = time.monotonic() + BOUND
        while not re.search(pattern, buf) and time.monotonic() < end:
            r, _, _ = select.select([fd], [], [], 1)
            if r:
                try:
                    d = os.read(fd, 4096)
                except OSError:  # the terminal's other end is closed
                    break
                if not d:
                    break
                buf += d
        return re.search(pattern, buf)

    try:
        m = until(rb"ready (\d+) (\d+)")
        if not check(m, f"terminal: the program did not start: {buf!r}"):
            return
        pgid = int(m.group(2))
        check(pgid == pid, f"terminal: the program is in mlprof run's group {pid}, not {pgid}")
        os.write(fd, b"\x03")  # ^C: the terminal sends SIGINT to its foreground group
        if not check(until(rb"got"), f"terminal: ^C did not reach the program: {buf!r}"):
            return

        def handled():  # mlprof run's SIGINT no longer pending: its handler has run
            with open(f"/proc/{pid}/status") as f:
                st = dict(line.split(":", 1) for line in f if ":" in line)
            mask = int(st["SigPnd"], 16) | int(st["ShdPnd"], 16)
            return not mask & (1 << (signal.SIGINT - 1))
        check(wait_for(handled), "terminal: mlprof run's SIGINT stays pending")
        os.write(fd, b"go\n")  # a SIGINT passed on by mlprof run reaches the program before its read returns
        m = until(rb"count (\d+)\s")
        check(m and m.group(1) == b"1", f"terminal: the program got ^C {m.group(1) if m else '?'} times, not once")
        until(rb"(?!)")  # the rest, to the terminal's end (mlprof run's exit)
        check(b"passed on" not in buf, f"terminal: mlprof run passed the terminal's ^C on: {buf!r}")
        completed = True
    finally:
        st = None
        end = time.monotonic() + BOUND
        while completed and st is None and time.monotonic() < end:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                st = status
            else:
                time.sleep(0.02)
        if st is None:  # a check failed on the way, or it hangs: end what was started
            os.killpg(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(fd)
        print(buf.decode(errors="replace"))
    check(st is not None and os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0, f"terminal: mlprof run ended with {st}")


def rank_env(rank, world, job):
    env = dict(BASE_ENV)
    env.update(OMPI_COMM_WORLD_RANK=str(rank), OMPI_COMM_WORLD_SIZE=str(world),
               OMPI_COMM_WORLD_LOCAL_RANK=str(rank), OMPI_COMM_WORLD_LOCAL_SIZE=str(world),
               OMPI_MCA_ess_base_jobid=job)
    return env


def test_rank_stopped():
    """A job whose rank 1 fails while rank 0 runs on, and the launcher then stops rank 0 with SIGTERM (torchrun's
    way): rank 0 writes its done file, merges both ranks and dies of SIGTERM; rank 1 keeps its status."""
    out = os.path.join(OUT, "job.json")
    r0, _, ids = start("job", "wait", env=rank_env(0, 2, "701"))
    r1 = subprocess.Popen([MLPROF, "run", "-o", out, *HOOKS, "--", PROG, "exit1"], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, env=rank_env(1, 2, "701"))
    # rank 1 has ended and waits for rank 0 (up to the merge timeout, 120 s)
    check(wait_for(lambda: glob.glob(out + ".parts/done.rank1.*") or r1.poll() is not None),
          "rank stopped: rank 1's done file")
    r0.send_signal(signal.SIGTERM)
    rc0, so0, se0 = finish(r0, "rank 0", ids)
    rc1, so1, se1 = finish(r1, "rank 1")
    check(rc0 == -signal.SIGTERM, f"rank stopped: rank 0 ended with {rc0}, not by SIGTERM")
    check(rc1 == 1, f"rank stopped: rank 1's status is its program's: {rc1}")
    check(f"trace: {out}" in so0 and "the last rank to end merges" in so1,
          f"rank stopped: rank 0 merges, rank 1 says so: {so0!r} {so1!r}")
    if check(os.path.exists(out), "rank stopped: the job's trace"):
        with open(out) as f:
            mg = json.load(f)["otherData"]["merge"]
        labels = sorted(i["label"] for i in mg["inputs"])
        check(labels == ["rank 0", "rank 1"] and mg.get("missing_ranks") == [],
              f"rank stopped: merged {labels}, missing {mg.get('missing_ranks')}")
    left = [f for f in os.listdir(out + ".parts") if f.startswith("done.")]
    check(not left, f"rank stopped: done files left: {left}")
    if ids:
        check(gone(ids[0]), f"rank stopped: rank 0's program {ids[0]} still runs")


test_term()
test_group()
test_children()
test_ignored()
test_hup()
test_busy()
test_int()
test_repeated()
test_killed()
test_terminal()
test_rank_stopped()
if failures:
    print(f"{len(failures)} failures", file=sys.stderr)
    sys.exit(1)
print("run_signal: all checks passed")
