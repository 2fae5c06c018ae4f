#!/usr/bin/env python3
"""Soak: the 3-node loopback cluster runs many short jobs back to back (CTest label `soak`, not in
the default CI run: `cd build && ctest -L soak --output-on-failure`).

usage: soak_test.py SATRAP_BINARY [JOBS] [TRAIN_BATCHES]

Every job must SUCCEED. During every third job a random node of node-1 and node-2 is kill -9-ed
mid-training and started again (node-0 and the head are never killed: they are the processes
whose growth is measured); during every other job a checkpoint is asked for. Jobs are long
enough (1,500 batches, 12-16 s each here) that every kill and every checkpoint request lands
mid-training: the test fails unless JOBS//3 kills (each job then reports a restart) and JOBS//2
checkpoints landed. After the first few jobs (the baseline is taken after job 6) the resident
memory, open files and threads of the head and node-0 must stay flat (RSS within 5%, open files and threads within +4), and every job's
checkpoint folder holds at most checkpoint.keep complete checkpoints. Loopback ports 5640-5649.
Each figure is taken once RSS has settled after the job; heap_in_use (MiB) is malloc's count of
bytes in use from the process's last memory_released log event (printed, not checked: it tells a
leak from memory malloc keeps free).
The last line: jobs=.. succeeded=.. rss_growth_pct=.. fds_growth=.. threads_growth=..
heap_in_use_growth_pct=.. state_dir_mb=..
(the cluster's state folder: logs, job table) ckpt_dir_max_mb=.. (the largest job's checkpoint
folder, which checkpoint.keep bounds; each is removed after its job is checked).
"""
import glob
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cluster"))
import harness  # noqa: E402  (tests/cluster/harness.py)

satrap = os.path.abspath(sys.argv[1])
jobs = int(sys.argv[2]) if len(sys.argv) > 2 else 30
batches = int(sys.argv[3]) if len(sys.argv) > 3 else 1500
KEEP = 2
BASELINE_JOB = 6
if jobs <= BASELINE_JOB:
    print(f"soak_test: JOBS must be more than {BASELINE_JOB} (the figures are growth after job "
          f"{BASELINE_JOB}); got {jobs}", file=sys.stderr)
    raise SystemExit(2)
seed = int(os.environ.get("SATRAP_SOAK_SEED", "14"))
rng = random.Random(seed)
work = tempfile.mkdtemp(prefix="satrap-soak.")
state = os.path.join(work, "state")
base = 5640
status_url = f"http://127.0.0.1:{base + 9}/status"
manifest = os.path.join(work, "manifest.yaml")
cluster = harness.Cluster(satrap, work, manifest, status_url, f"soak_test (seed {seed})", 20)
fail, common, run, status = cluster.fail, cluster.common, cluster.run, cluster.status
wait_for, pid_of, start = cluster.wait_for, cluster.pid_of, cluster.start
started = cluster.started


def proc_figures(pid):
    rss = threads = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) * 1024
            elif line.startswith("Threads:"):
                threads = int(line.split()[1])
    return rss, len(os.listdir(f"/proc/{pid}/fd")), threads


def settled_figures(names, timeout=10.0):
    """The figures once every process's RSS has settled (two samples 0.5 s apart within 0.5%):
    a job's last actors free their memory and the process gives it back (memory_released in its
    log) just after the job ends, so a figure taken at once may catch it half-way."""
    last = {n: proc_figures(pid_of(n)) for n in names}
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        time.sleep(0.5)
        now = {n: proc_figures(pid_of(n)) for n in names}
        if all(abs(now[n][0] - last[n][0]) <= 0.005 * last[n][0] for n in names):
            return now
        last = now
    return last


def heap_in_use_mib(name):
    """The heap in use (MiB) at the process's last memory_released event (its log), or None."""
    found = None
    with open(os.path.join(state, name + ".log"), errors="replace") as f:
        for line in f:
            if "memory_released" in line:
                for field in line.split():
                    if field.startswith("heap_in_use_mib="):
                        found = float(field.split("=", 1)[1])
    return found


def node_alive(doc, name):
    return doc and any(n["name"] == name and n["alive"] for n in doc["nodes"])


def job_of(doc, job_id):
    if not doc:
        return None
    for j in doc["jobs"]:
        if j["id"] == job_id:
            return j
    return None


def dir_mb(path):
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(root, name))
            except OSError:
                pass
    return total / 1048576.0


def cleanup():
    for p in started:
        try:
            os.kill(p.pid, signal.SIGCONT)
        except OSError:
            pass
    subprocess.run([satrap, "down", *common()], cwd=work, capture_output=True)
    for p in started:
        try:
            p.kill()
            p.wait(timeout=5)
        except Exception:
            pass


def main():
    cluster.write_manifest("soak", base)
    run("up", *common(), "--wait", "60", timeout=120)
    watched = ["head", "node-node-0"]  # pid records: head.pid, node-<name>.pid
    baseline = baseline_heap = None
    succeeded = 0
    kills = checkpoints_asked = 0
    ckpt_max_mb = 0.0
    t0 = time.monotonic()
    for i in range(1, jobs + 1):
        job = os.path.join(work, f"job-{i}.yaml")
        ckpt = os.path.join(work, "ckpt", f"job-{i}")
        with open(job, "w") as f:
            f.write(f"""name: soak-{i}
training: {{train_batches: {batches}}}
checkpoint: {{dir: {ckpt}, every_steps: 40, keep: {KEEP}}}
""")
        job_id = run("submit", job, *common()).stdout.split()[2]
        kill = i % 3 == 0
        ask_checkpoint = i % 2 == 0

        def running_past(steps):
            def pred():
                j = job_of(status(), job_id)
                if j and j["state"] in ("SUCCEEDED", "FAILED", "CANCELLED"):
                    return j
                return j if j and j["state"] == "RUNNING" and j["steps"] >= steps else None
            return pred
        if ask_checkpoint:
            j = wait_for(running_past(20), f"job {i} to run", 120)
            if j["state"] == "RUNNING":
                r = run("checkpoint", job_id, *common(), check=False, timeout=300)
                if r.returncode == 0:
                    checkpoints_asked += 1
                else:
                    fail(f"job {i}: satrap checkpoint: {r.stderr.strip()}")
            else:
                fail(f"job {i} ended before its checkpoint request: make the jobs longer")
        if kill:
            j = wait_for(running_past(60), f"job {i} to pass step 60", 180)
            if j["state"] == "RUNNING":
                victim = rng.choice(["node-1", "node-2"])
                os.kill(pid_of("node-" + victim), signal.SIGKILL)
                kills += 1
                wait_for(lambda: not node_alive(status(), victim), f"{victim} marked dead", 30)
                time.sleep(0.5)
                # A supervisor (satrap supervise) may restart it; else this test does.
                end = time.monotonic() + 10
                while time.monotonic() < end and not node_alive(status(), victim):
                    time.sleep(0.2)
                if not node_alive(status(), victim):
                    start(["node", "--name", victim], "node-" + victim)
                wait_for(lambda: node_alive(status(), victim), f"{victim} to rejoin", 60)
            else:
                fail(f"job {i} ended before its node kill: make the jobs longer")
        final = wait_for(lambda: (lambda j: j if j and j["state"] in ("SUCCEEDED", "FAILED", "CANCELLED")
                                  else None)(job_of(status(), job_id)), f"job {i} to end", 600)
        if final["state"] != "SUCCEEDED":
            fail(f"job {i} ({job_id}) ended {final['state']}: {final['message']}")
        if kill and final["restarts"] < 1:
            fail(f"job {i}: a node was killed mid-training but the job reports no restart")
        succeeded += 1
        complete = glob.glob(os.path.join(ckpt, "checkpoint-*.json"))
        if len(complete) > KEEP:
            fail(f"job {i}: {len(complete)} complete checkpoints in {ckpt} (keep {KEEP})")
        # Each job checkpoints into a folder of its own (a folder holding checkpoints is not
        # reused): its size is what checkpoint.keep bounds; then it goes, as an operator's would.
        ckpt_max_mb = max(ckpt_max_mb, dir_mb(ckpt))
        shutil.rmtree(ckpt, ignore_errors=True)
        # The job's actors stop after its result: none may be left.
        end = time.monotonic() + 15
        while True:
            doc = status()
            actors = len(doc["actors"]) if doc else -1
            if actors == 0 or time.monotonic() > end:
                break
            time.sleep(0.2)
        if actors != 0:
            print("left:", json.dumps(doc["actors"] if doc else None)[:1500], file=sys.stderr)
        figures = settled_figures(watched)
        heap = {n: heap_in_use_mib(n) for n in watched}
        print(f"job {i:2d} {job_id}: SUCCEEDED restarts={final['restarts']} "
              f"checkpoints={final['checkpoints']} actors_left={actors} "
              + " ".join(f"{n}:rss={f[0] / 1048576:.1f}MiB,heap_in_use={heap[n]}MiB,fds={f[1]},"
                         f"threads={f[2]}" for n, f in figures.items()),
              flush=True)
        if actors != 0:
            fail(f"job {i}: {actors} actors still running after the job ended")
        if i == BASELINE_JOB:
            baseline, baseline_heap = figures, heap
    last = settled_figures(watched)
    rss_growth = max((last[n][0] - baseline[n][0]) / baseline[n][0] * 100 for n in watched)
    heap = {n: heap_in_use_mib(n) for n in watched}
    # The heap in use (malloc's own count) tells a leak from memory malloc keeps free.
    heap_growth = max([(heap[n] - baseline_heap[n]) / baseline_heap[n] * 100 for n in watched
                       if heap[n] is not None and baseline_heap[n]] or [float("nan")])
    fds_growth = max(last[n][1] - baseline[n][1] for n in watched)
    threads_growth = max(last[n][2] - baseline[n][2] for n in watched)
    state_mb = dir_mb(state)  # logs, job table, certificates
    run("down", *common())
    print(f"soak: {jobs} jobs in {time.monotonic() - t0:.0f} s, {kills} node kills, "
          f"{checkpoints_asked} checkpoints asked; baseline after job {BASELINE_JOB}")
    result = (f"jobs={jobs} succeeded={succeeded} rss_growth_pct={rss_growth:.1f} "
              f"fds_growth={fds_growth} threads_growth={threads_growth} "
              f"heap_in_use_growth_pct={heap_growth:.1f} state_dir_mb={state_mb:.1f} "
              f"ckpt_dir_max_mb={ckpt_max_mb:.0f}")
    if kills != jobs // 3 or checkpoints_asked != jobs // 2:
        fail(f"{kills} node kills and {checkpoints_asked} checkpoints landed, expected "
             f"{jobs // 3} and {jobs // 2}: {result}")
    if rss_growth > 5.0:
        fail(f"RSS grew {rss_growth:.1f}% after job {BASELINE_JOB}: {result}")
    if fds_growth > 4 or threads_growth > 4:
        fail(f"open files or threads grew: {result}")
    print(result)


try:
    main()
finally:
    cleanup()
    shutil.rmtree(work, ignore_errors=True)
