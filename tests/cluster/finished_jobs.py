#!/usr/bin/env python3
"""Finished jobs leave nothing behind (issue 14, item 2; CTest cluster/finished_jobs_leave_nothing,
label `cluster`, about 2 minutes here).

usage: finished_jobs.py SATRAP_BINARY [JOBS] [TRAIN_BATCHES]

The 3-node loopback cluster (`satrap up`, TLS, ports 5660-5669) runs JOBS (5) short identical
jobs one after another. After each job SUCCEEDS, /status must list no actor within 15 s (a
finished job stops every actor of its generation), and once the processes' RSS has settled, the
RSS of the head and of every node after the last job must be within RSS_SLACK_MIB (8) of its RSS
after job 2 (a job that left its actors running grew node-0 by about 22 MB). Every process the
test started is stopped (`satrap down`, then kill) on success and on failure.
The last line: jobs=.. actors_left_max=.. rss_growth_mib=<largest, over the processes>.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402  (tests/cluster/harness.py)

satrap = os.path.abspath(sys.argv[1])
jobs = int(sys.argv[2]) if len(sys.argv) > 2 else 5
batches = int(sys.argv[3]) if len(sys.argv) > 3 else 200
RSS_SLACK_MIB = 8.0
BASELINE_JOB = 2
base = 5660
work = tempfile.mkdtemp(prefix="satrap-finished-jobs.")
state = os.path.join(work, "state")
manifest = os.path.join(work, "manifest.yaml")
status_url = f"http://127.0.0.1:{base + 9}/status"
watched = ["head", "node-node-0", "node-node-1", "node-node-2"]  # pid records in the state dir
cluster = harness.Cluster(satrap, work, manifest, status_url, "finished_jobs", 15)
fail, common, run, status, pid_of = (cluster.fail, cluster.common, cluster.run, cluster.status,
                                     cluster.pid_of)


def rss_of(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def settled_rss(timeout=10.0):
    """RSS (MiB) of every watched process once two samples 0.5 s apart agree within 0.5%."""
    last = {n: rss_of(pid_of(n)) for n in watched}
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        time.sleep(0.5)
        now = {n: rss_of(pid_of(n)) for n in watched}
        if all(abs(now[n] - last[n]) <= 0.005 * last[n] for n in watched):
            return now
        last = now
    return last


def job_state(job_id):
    doc = status()
    for j in (doc or {}).get("jobs", []):
        if j["id"] == job_id:
            return j
    return None


def cleanup():
    pids = []
    for n in watched:
        try:
            pids.append(pid_of(n))
        except (OSError, ValueError):
            pass
    subprocess.run([satrap, "down", *common()], cwd=work, capture_output=True, timeout=60)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def main():
    cluster.write_manifest("finished-jobs", base)
    run("up", *common(), "--wait", "60", timeout=120)
    job = os.path.join(work, "job.yaml")
    with open(job, "w") as f:
        f.write(f"name: short\ntraining: {{train_batches: {batches}}}\n")
    rss = {}
    actors_left_max = 0
    for i in range(1, jobs + 1):
        job_id = run("submit", job, *common()).stdout.split()[2]
        final = harness.wait_for(
            lambda: (lambda j: j if j and j["state"] in ("SUCCEEDED", "FAILED", "CANCELLED")
                     else None)(job_state(job_id)), f"job {i} to end", 300, fail)
        if final["state"] != "SUCCEEDED":
            fail(f"job {i} ({job_id}) ended {final['state']}: {final.get('message')}")
        end = time.monotonic() + 15
        while True:
            doc = status()
            left = [a for a in (doc or {}).get("actors", [])]
            if doc and not left or time.monotonic() > end:
                break
            time.sleep(0.2)
        actors_left_max = max(actors_left_max, len(left))
        if left or not doc:
            fail(f"job {i}: {len(left)} actors still listed 15 s after the job ended: "
                 + json.dumps(left)[:1500])
        rss[i] = settled_rss()
        print(f"job {i} {job_id}: SUCCEEDED actors_left=0 "
              + " ".join(f"{n}:rss={v:.1f}MiB" for n, v in rss[i].items()), flush=True)
    growth = {n: rss[jobs][n] - rss[min(BASELINE_JOB, jobs)][n] for n in watched}
    result = (f"jobs={jobs} actors_left_max={actors_left_max} "
              f"rss_growth_mib={max(growth.values()):.1f}")
    for n, g in growth.items():
        if g > RSS_SLACK_MIB:
            fail(f"{n}: RSS grew {g:.1f} MiB from job {BASELINE_JOB} to job {jobs} "
                 f"(more than {RSS_SLACK_MIB}): {result}")
    run("down", *common())
    print(result)


try:
    main()
finally:
    cleanup()
    shutil.rmtree(work, ignore_errors=True)
