#!/usr/bin/env python3
"""Fault tests on a real 3-node cluster on loopback (CTest label `fault`).

usage: fault_test.py SATRAP_BINARY SCENARIO [TRAIN_BATCHES]
scenarios:
  kill_shard_node    kill -9 the node process holding an embedding shard, mid-training; then
                     start that node again and check that it rejoins
  stop_trainer_node  SIGSTOP the node of the dense trainer for longer than the heartbeat timeout,
                     then SIGCONT it
  kill_loader_node   kill -9 the node process holding a data loader
  kill_head          kill -9 the head; start it again: it reloads the job table and the job
                     resumes from its newest checkpoint
  restart_node       kill -9 the node process of the dense trainer and restart nobody by hand:
                     `satrap up`'s per-host supervisor (satrap supervise) starts it again within
                     5 s, it rejoins, and /status and /metrics show its restart
Nodes killed with kill -9 come back by themselves (the per-host supervisor restarts them).
Each scenario: the job must SUCCEED, its test AUC must be within 0.003 of the undisturbed
embedded run of the same job (same seed, same checkpoint schedule), the node loss must show in
/status within twice the heartbeat timeout, and no satrap process may be left. The last line is
key=value figures: detection time, time to resume training, AUC delta, batches replayed.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cluster"))
import harness  # noqa: E402  (tests/cluster/harness.py)

HEARTBEAT_TIMEOUT_S = 5.0  # the head's (admin_config.heartbeat_timeout_ms) and the middleman's

satrap = os.path.abspath(sys.argv[1])
scenario = sys.argv[2]
# Long enough that the fault lands well inside the run: the default job does about 400 steps/s here,
# and /status lists an actor only after its node's first heartbeat (1 s).
batches = int(sys.argv[3]) if len(sys.argv) > 3 else 3000
work = tempfile.mkdtemp(prefix=f"satrap-fault-{scenario}.")
state = os.path.join(work, "state")
# Below the kernel's ephemeral range (32768-60999 here): a port in it can be taken by any outgoing
# connection while the head is down, and the restarted head then cannot listen (seen in CI).
base = 25000 + (os.getpid() % 500) * 10  # 25000-29999
if scenario == "restart_node":
    base = 5110  # the deployment tests' block of ports (5100-5199)
status_url = f"http://127.0.0.1:{base + 9}/status"
manifest = os.path.join(work, "manifest.yaml")
job = os.path.join(work, "job.yaml")
ckpt = os.path.join(work, "ckpt")
cluster = harness.Cluster(satrap, work, manifest, status_url, f"fault_test[{scenario}]", 25)
fail, common, run, status = cluster.fail, cluster.common, cluster.run, cluster.status
wait_for, pid_of, start = cluster.wait_for, cluster.pid_of, cluster.start
started = cluster.started


def job_record(doc):
    if not doc:
        return None
    jobs = [j for j in doc["jobs"] if j["name"] == "fault-test"]
    return jobs[-1] if jobs else None


def node_of(doc, role):
    for a in doc["actors"]:
        if a["role"] == role:
            return a["node"]
    fail(f"no {role} in /status")


def cleanup():
    for p in started:
        try:
            os.kill(p.pid, signal.SIGCONT)
        except OSError:
            pass
    subprocess.run([satrap, "down", *common()], cwd=work, capture_output=True)
    subprocess.run(["pkill", "-9", "-f", "--", f"--state-dir {state}"], capture_output=True)
    for p in started:
        try:
            p.wait(timeout=5)
        except Exception:
            pass


def main():
    cluster.write_manifest("fault", base)
    with open(job, "w") as f:
        f.write(f"""name: fault-test
training: {{train_batches: {batches}}}
checkpoint: {{dir: ckpt, every_steps: 100}}
""")
    # The undisturbed run: embedded, same job and checkpoint schedule (into its own folder).
    ref_job = os.path.join(work, "reference.yaml")
    with open(ref_job, "w") as f:
        f.write(open(job).read().replace("dir: ckpt", "dir: ckpt-reference"))
    ref = json.loads(run("train", "--job", ref_job, "--json", timeout=600).stdout.strip().splitlines()[-1])

    run("up", *common(), "--wait", "60")
    submitted = run("submit", job, *common()).stdout
    job_id = submitted.split()[2]

    victim_role = {"kill_shard_node": "embedding_shard", "stop_trainer_node": "dense_trainer",
                   "kill_loader_node": "data_loader", "restart_node": "dense_trainer"}.get(scenario)

    # Mid-training: after the second checkpoint, between two checkpoints (so that some applied
    # gradients are rolled back and their batches replayed), and once /status lists the victim's
    # actor (a node reports its actors in its heartbeats, so a fast job can be past its second
    # checkpoint before they show).
    def mid_training():
        d = status()
        j = job_record(d)
        ok = j and j["state"] == "RUNNING" and j["checkpoint_step"] >= 200 \
            and j["steps"] >= j["checkpoint_step"] + 30 \
            and (victim_role is None or any(a["role"] == victim_role for a in d["actors"]))
        return d if ok else None
    doc = wait_for(mid_training, "the job to pass its second checkpoint", 300)
    victim = node_of(doc, victim_role) if victim_role else "head"
    pid = pid_of("head" if victim == "head" else "node-" + victim)
    steps_at_fault = job_record(doc)["steps"]
    t_fault = time.monotonic()
    if scenario == "stop_trainer_node":
        os.kill(pid, signal.SIGSTOP)
    else:
        os.kill(pid, signal.SIGKILL)

    detect_s = resume_s = back_s = None
    if scenario == "restart_node":
        # Nobody restarts it by hand: the supervisor does, and the head sees the new process.
        def back():
            d = status()
            return d and any(n["name"] == victim and n["alive"] and n["restarts"] >= 1
                             and n["rejoins"] >= 1 for n in d["nodes"])
        wait_for(back, f"node {victim} to be restarted by its supervisor and rejoin", 10)
        back_s = time.monotonic() - t_fault
        if back_s > 5.0:
            fail(f"node {victim} came back after {back_s:.1f} s (bound 5 s)")
        if pid_of("node-" + victim) == pid:
            fail("the node's pid file still names the killed process")
    if victim != "head":
        # The node is marked dead in /status within twice the heartbeat timeout (or, killed,
        # already replaced by a new process its supervisor started: a rejoin).
        def node_dead():
            d = status()
            return d and any(n["name"] == victim and (not n["alive"] or n["rejoins"] >= 1)
                             for n in d["nodes"])
        wait_for(node_dead, f"node {victim} marked dead", 2 * HEARTBEAT_TIMEOUT_S + 5)
        detect_s = time.monotonic() - t_fault
        if detect_s > 2 * HEARTBEAT_TIMEOUT_S:
            fail(f"node loss seen after {detect_s:.1f} s (bound {2 * HEARTBEAT_TIMEOUT_S} s)")
        # Training resumes: the job restarted and makes progress past its checkpoint again.
        def resumed():
            j = job_record(status())
            return j and j["restarts"] >= 1 and j["steps"] > j["checkpoint_step"] >= 0 \
                and j["state"] == "RUNNING" or (j and j["state"] == "SUCCEEDED")
        wait_for(resumed, "training to resume", 120)
        resume_s = time.monotonic() - t_fault
        if scenario == "stop_trainer_node":
            time.sleep(max(0.0, 2 * HEARTBEAT_TIMEOUT_S - (time.monotonic() - t_fault)))
            os.kill(pid, signal.SIGCONT)
    else:
        time.sleep(1.0)
        start(["head"], "head")  # a new head process: reloads jobs.json, nodes rejoin

        def requeued():
            j = job_record(status())
            return j and j["restarts"] >= 1 and j["state"] in ("PENDING", "PLACING", "RUNNING",
                                                               "SUCCEEDED")
        wait_for(requeued, "the restarted head to requeue the job", 60)
        detect_s = time.monotonic() - t_fault

        def running_again():
            j = job_record(status())
            return j and (j["state"] == "RUNNING" and j["steps"] > j["checkpoint_step"]
                          or j["state"] == "SUCCEEDED")
        wait_for(running_again, "the job to run again", 120)
        resume_s = time.monotonic() - t_fault

    final = wait_for(lambda: (lambda j: j if j and j["state"] in ("SUCCEEDED", "FAILED", "CANCELLED")
                              else None)(job_record(status())), "the job to end", 600)
    if final["state"] != "SUCCEEDED":
        fail(f"job ended {final['state']}: {final['message']}")
    if victim != "head" and scenario != "stop_trainer_node":
        # The lost node comes back as a new process (its supervisor restarts it) and rejoins.
        wait_for(lambda: (lambda d: d and any(n["name"] == victim and n["alive"] for n in d["nodes"]))(status()),
                 f"node {victim} to rejoin", 60)
        with urllib.request.urlopen(status_url.replace("/status", "/metrics"), timeout=2) as r:
            metrics = r.read().decode()
        if f'satrap_node_restarts_total{{node="{victim}"}} 0' in metrics \
                or f'satrap_node_restarts_total{{node="{victim}"}}' not in metrics:
            fail(f"/metrics shows no restart of {victim}")
    delta = abs(final["test_auc"] - ref["test_auc"])
    print(f"fault_test[{scenario}]: job {job_id} SUCCEEDED; cluster auc {final['test_auc']:.4f}, "
          f"undisturbed {ref['test_auc']:.4f}; restarts {final['restarts']}; "
          f"last failure: {final['last_failure']}")
    if final["restarts"] < 1:
        fail("no restart was recorded")
    if delta > 0.003:
        fail(f"AUC differs from the undisturbed run by {delta:.4f} (> 0.003)")
    run("down", *common())
    time.sleep(0.5)
    left = subprocess.run(["pgrep", "-f", "--", f"--state-dir {state}"], capture_output=True, text=True)
    if left.stdout.strip():
        fail(f"processes left after satrap down: {left.stdout.split()}")
    print(f"scenario={scenario} victim={victim} steps_at_fault={steps_at_fault} "
          + (f"node_back_s={back_s:.2f} " if back_s is not None else "") +
          f"detect_s={detect_s:.2f} resume_s={resume_s:.2f} auc={final['test_auc']:.4f} "
          f"auc_reference={ref['test_auc']:.4f} auc_delta={delta:.4f} "
          f"restarts={final['restarts']} batches_replayed={final['batches_replayed']} "
          f"gradients_lost={final['gradients_lost']} checkpoints={final['checkpoints']}")
    print(f"fault_test[{scenario}]: PASS")


try:
    main()
finally:
    cleanup()
    shutil.rmtree(work, ignore_errors=True)
