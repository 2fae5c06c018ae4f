#!/usr/bin/env python3
"""satrap under a real Slurm: `satrap slurm`'s batch script on a one-host Slurm cluster.

Usage: slurm_test.py SATRAP [--compare-embedded]

Starts munged and slurmctld and four slurmd (Slurm nodes sn0..sn3, all this host at 127.0.0.1,
`slurmd -N`; ProctrackType=proctrack/linuxproc, TaskPlugin=task/none, cores oversubscribed) from
Debian's slurm-wlm and munge, all as root in a temporary folder with their own ports and socket.
Then:
  1. `satrap slurm` renders the 3-node manifest's batch script (the default job) and sbatch
     submits it: a heterogeneous job, the head on sn0 and node-0..2 on sn1..sn3;
  2. once the job trains, node-2's process (found by its SLURM_JOB_ID and SLURMD_NODENAME) is
     killed with SIGKILL: satrap's recovery re-places the job on the nodes alive, the script
     starts the task again and it rejoins; the Slurm job COMPLETES with the satrap job SUCCEEDED
     and its restart counted;
  3. a second submission gets USR1 in its batch shell (what --signal=B:USR1@S sends before the
     time limit) while it trains: a checkpoint lands in the state dir's checkpoints/job; then it is
     scancel-ed: Slurm's job ends CANCELLED and no process of it is left.
At the end (and on failure) everything it started is stopped and no process is left behind.
With --compare-embedded (a figure, not in CTest) step 2 kills nothing and the same default job
then runs embedded (`satrap train --json`) right after it: both samples/s and their ratio.
Prints figures as key=value: seconds from sbatch to the first step, from the kill to training
again, samples/s. Exit 77 (skipped) when Slurm cannot run here (not root, no slurm-wlm/munge,
the daemons do not come up). Ports 5170-5189 (the deployment tests' block, below 32768).
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

SKIP = 77
satrap = os.path.abspath(sys.argv[1])
compare = "--compare-embedded" in sys.argv[2:]
PORT_CTLD = 5170
PORT_SLURMD = 5171  # sn0..sn3: 5171-5174
PORT_HEAD = 5180    # nodes 5181-5183, status 5189
STATUS_URL = "http://127.0.0.1:5189/status"
SBIN = ["/usr/sbin", "/usr/bin", "/sbin", "/bin"]


def which(name):
    for d in SBIN:
        p = os.path.join(d, name)
        if os.access(p, os.X_OK):
            return p
    return shutil.which(name)


def skip(why):
    print(f"SKIPPED: {why}", flush=True)
    sys.exit(SKIP)


if os.geteuid() != 0:
    skip("needs root (slurmd runs the tasks; the daemons run as root here)")
tools = {n: which(n) for n in ["munged", "slurmctld", "slurmd", "sbatch", "scontrol", "scancel",
                               "sinfo"]}
missing = [n for n, p in tools.items() if not p]
if missing:
    skip(f"not installed: {' '.join(missing)} (Debian: slurm-wlm munge; ops/setup.sh)")

work = tempfile.mkdtemp(prefix="satrap-slurm.")
os.chmod(work, 0o755)
conf = os.path.join(work, "slurm.conf")
env = dict(os.environ, SLURM_CONF=conf)
daemons = []  # Popen of what this test started
t_begin = time.time()


def log(msg):
    print(f"[{time.time() - t_begin:6.1f}s] {msg}", flush=True)


def run(*args, check=True, timeout=60):
    p = subprocess.run(list(args), env=env, cwd=work, capture_output=True, text=True,
                       timeout=timeout)
    if check and p.returncode != 0:
        fail(f"{' '.join(args)}: exit {p.returncode}: {p.stdout}{p.stderr}")
    return p


def tail(path, n=25):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return ""


def procs_of_test():
    """Processes of this test: Slurm's (their environment names our SLURM_CONF) and satrap's."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            with open(f"/proc/{d}/environ", "rb") as f:
                environ = f.read()
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        if f"SLURM_CONF={conf}".encode() in environ or work in cmd:
            out.append((int(d), cmd))
    return out


def process_env(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            items = f.read().split(b"\0")
    except OSError:
        return {}
    out = {}
    for kv in items:
        k, _, v = kv.partition(b"=")
        out[k.decode(errors="replace")] = v.decode(errors="replace")
    return out


def cleanup():
    for job in list(submitted):
        subprocess.run([tools["scancel"], str(job)], env=env, capture_output=True)
    deadline = time.time() + 20
    while time.time() < deadline and any(
            "slurmstepd" in c or " node " in c or " head " in c for _, c in procs_of_test()):
        time.sleep(0.5)
    for p in reversed(daemons):
        if p.poll() is None:
            p.terminate()
    for p in reversed(daemons):
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    left = procs_of_test()
    for pid, _ in left:  # only processes of this test (our SLURM_CONF or our folder)
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return left


submitted = []


def fail(msg):
    print(f"FAIL slurm_test: {msg}", flush=True)
    for name in sorted(os.listdir(work)):
        if name.endswith(".out"):
            print(f"--- {name}\n{tail(os.path.join(work, name))}")
    state = os.path.join(work, ".satrap", "slurmtest")
    if os.path.isdir(state):
        for name in sorted(os.listdir(state)):
            if name.endswith(".log"):
                print(f"--- {name}\n{tail(os.path.join(state, name), 15)}")
    for name in ["slurmctld.log", "slurmd-sn1.log"]:
        print(f"--- {name}\n{tail(os.path.join(work, name), 10)}")
    cleanup()
    sys.exit(1)


def wait_for(pred, what, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.25)
    fail(f"timed out after {timeout} s waiting for {what}")


def status():
    try:
        with urllib.request.urlopen(STATUS_URL, timeout=2) as r:
            return json.loads(r.read())
    except Exception:  # noqa: BLE001 (not up yet, or between heads)
        return None


def running_job():
    doc = status()
    if not doc:
        return None
    jobs = [j for j in doc.get("jobs", []) if j.get("state") == "RUNNING"]
    return jobs[-1] if jobs else None


def slurm_job(job_id):
    p = run(tools["scontrol"], "show", "job", "-o", str(job_id), check=False)
    fields = dict(re.findall(r"(\w+)=(\S*)", p.stdout.splitlines()[0])) if p.stdout else {}
    return fields


def satrap_pid(job_id, slurm_node):
    """The pid of `satrap node` running as a task of job_id on slurm_node."""
    for pid, cmd in procs_of_test():
        if f"{satrap} node" not in cmd:
            continue
        e = process_env(pid)
        if e.get("SLURM_JOB_ID") == str(job_id) and e.get("SLURMD_NODENAME") == slurm_node:
            return pid
    return None


# --- one-host Slurm: munged, slurmctld, slurmd x4 -------------------------------------------
munge = os.path.join(work, "munge")
os.makedirs(munge, mode=0o700)
with open(os.path.join(munge, "munge.key"), "wb") as f:
    f.write(os.urandom(1024))
os.chmod(os.path.join(munge, "munge.key"), 0o400)
sock = os.path.join(munge, "munge.sock")
daemons.append(subprocess.Popen(
    [tools["munged"], "--foreground", "--force", "--key-file", os.path.join(munge, "munge.key"),
     "--socket", sock, "--pid-file", os.path.join(munge, "munged.pid"), "--log-file",
     os.path.join(munge, "log"), "--seed-file", os.path.join(munge, "seed")],
    stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT))
plugins = next((d for d in ["/usr/lib/x86_64-linux-gnu/slurm-wlm", "/usr/lib/aarch64-linux-gnu/slurm-wlm",
                            "/usr/lib/slurm-wlm", "/usr/lib64/slurm"] if os.path.isdir(d)), None)
with open(conf, "w") as f:
    f.write(f"""ClusterName=satraptest
SlurmctldHost={os.uname().nodename}(127.0.0.1)
SlurmctldPort={PORT_CTLD}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={sock}
CredType=cred/munge
StateSaveLocation={work}/ctld
SlurmdSpoolDir={work}/spool-%n
SlurmctldPidFile={work}/slurmctld.pid
SlurmdPidFile={work}/slurmd-%n.pid
SlurmctldLogFile={work}/slurmctld.log
SlurmdLogFile={work}/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
MpiDefault=none
ReturnToService=2
KillWait=5
MinJobAge=600
InactiveLimit=0
SchedulerType=sched/backfill
# Heterogeneous jobs start only from the backfill scheduler: every second, not every 30 s.
SchedulerParameters=bf_interval=1
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
{'PluginDir=' + plugins if plugins else ''}
NodeName=sn[0-3] NodeHostname={os.uname().nodename} NodeAddr=127.0.0.1 Port=[{PORT_SLURMD}-{PORT_SLURMD + 3}] CPUs=4 RealMemory=8192 State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE
""")
os.makedirs(os.path.join(work, "ctld"))
try:
    wait_for(lambda: os.path.exists(sock), "munged's socket", 10)
    daemons.append(subprocess.Popen([tools["slurmctld"], "-D", "-i", "-f", conf], env=env,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT))
    for i in range(4):
        daemons.append(subprocess.Popen([tools["slurmd"], "-D", "-f", conf, "-N", f"sn{i}"],
                                        env=env, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.STDOUT))

    def idle():
        p = run(tools["sinfo"], "-h", "-o", "%T %D", check=False)
        return p.returncode == 0 and p.stdout.split() == ["idle", "4"]
    deadline = time.time() + 30
    while time.time() < deadline and not idle():
        if any(d.poll() is not None for d in daemons):
            break
        time.sleep(0.5)
    if not idle():
        msg = tail(os.path.join(work, "slurmctld.log"), 8) + tail(os.path.join(work, "slurmd-sn0.log"), 8)
        cleanup()
        shutil.rmtree(work, ignore_errors=True)
        skip(f"the one-host Slurm cluster did not come up:\n{msg}")
    log("slurm up: sn[0-3] idle")

    # --- 1. the default job, one node killed ------------------------------------------------
    manifest = os.path.join(work, "manifest.yaml")
    with open(manifest, "w") as f:
        f.write(f"""cluster: slurmtest
head: {{host: 127.0.0.1, port: {PORT_HEAD}, status_port: 5189}}
nodes:
  - name: node-{{i}}
    count: 3
    host: 127.0.0.1
    port: {PORT_HEAD + 1}
    resources: {{cores: 2, memory: 6GiB, gpus: 0}}
""")
    script = os.path.join(work, "run.sh")
    run(satrap, "slurm", "--manifest", manifest, "-o", script)

    def sbatch():
        t = time.time()
        p = run(tools["sbatch"], "--parsable", f"--output={work}/job-%j.out", script)
        job_id = int(p.stdout.strip().split(";")[0].split("+")[0])
        submitted.append(job_id)
        return job_id, t

    job1, t_sbatch = sbatch()
    log(f"sbatch: job {job1}")
    j = wait_for(lambda: (lambda j: j if j and j.get("steps", 0) > 0 else None)(running_job()),
                 "the first training step", 120)
    first_step_s = time.time() - t_sbatch
    log(f"first step after {first_step_s:.1f} s ({j['id']})")
    doc = status()
    names = sorted(n["name"] for n in doc["nodes"])
    if names != ["node-0", "node-1", "node-2"] or not all(n["alive"] for n in doc["nodes"]):
        fail(f"/status nodes: {doc['nodes']}")
    if compare:
        f = wait_for(lambda: (lambda f: f if f.get("JobState") not in ("PENDING", "RUNNING",
                                                                       "COMPLETING") else None)(
            slurm_job(job1)), "the Slurm job to end", 600)
        out = tail(os.path.join(work, f"job-{job1}.out"), 200)
        m = re.search(r"^job (\S+) SUCCEEDED: .* (\d+) samples\s+(\d+) samples/s", out, re.M)
        if not m:
            fail(f"no SUCCEEDED line in the job's output:\n{out}")
        p = subprocess.run([satrap, "train", "--json"], capture_output=True, text=True,
                           timeout=900)
        embedded = json.loads(p.stdout.strip().splitlines()[-1])["samples_per_sec"]
        cleanup()
        shutil.rmtree(work, ignore_errors=True)
        print(f"slurm_test: compare sbatch_to_first_step_s={first_step_s:.1f} "
              f"slurm_samples_per_s={int(m.group(3))} embedded_samples_per_s={embedded:.0f} "
              f"ratio={int(m.group(3)) / embedded:.2f}", flush=True)
        sys.exit(0)
    victim = satrap_pid(job1, "sn3")
    if not victim:
        fail("no satrap node process of the job on sn3")
    steps_before = j["steps"]
    os.kill(victim, signal.SIGKILL)
    t_kill = time.time()
    log(f"killed node-2 (pid {victim}) at step {steps_before}")

    def training_again():
        j = running_job()
        return j if j and j.get("restarts", 0) >= 1 and j.get("steps", 0) > 0 else None
    wait_for(training_again, "training again after the kill", 120)
    recover_s = time.time() - t_kill
    log(f"training again after {recover_s:.1f} s")

    def node2_back():
        doc = status()
        n = doc and next((n for n in doc["nodes"] if n["name"] == "node-2"), None)
        return n if n and n["alive"] and satrap_pid(job1, "sn3") not in (None, victim) else None
    back = wait_for(node2_back, "node-2's task started again and joined", 60)
    log(f"node-2 rejoined: restarts={back.get('restarts')} rejoins={back.get('rejoins')}")

    def slurm_done(job_id):
        f = slurm_job(job_id)
        return f if f.get("JobState") in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT",
                                          "NODE_FAIL", "OUT_OF_MEMORY") else None
    f = wait_for(lambda: slurm_done(job1), "the Slurm job to end", 240)
    out = tail(os.path.join(work, f"job-{job1}.out"), 200)
    if f.get("JobState") != "COMPLETED" or f.get("ExitCode") != "0:0":
        fail(f"Slurm job {job1}: {f.get('JobState')} exit {f.get('ExitCode')}")
    m = re.search(r"^job (\S+) SUCCEEDED: .* (\d+) samples\s+(\d+) samples/s", out, re.M)
    if not m:
        fail(f"no SUCCEEDED line in the job's output:\n{out}")
    record = json.loads([line for line in out.splitlines() if line.startswith("{")][-1])
    if record.get("restarts", 0) < 1:
        fail(f"the job's record shows no restart: {record}")
    log(f"job {job1}: {m.group(0)}")
    samples_per_s = int(m.group(3))

    # --- 2. scancel while training: nothing of the job is left ------------------------------
    job2, _ = sbatch()
    log(f"sbatch: job {job2}")
    wait_for(lambda: (lambda j: j if j and j.get("steps", 0) > 0 else None)(running_job()),
             "the second job's first step", 120)
    # Slurm's signal before the time limit (--signal=B:USR1@S) goes to the batch shell: the
    # script asks for a checkpoint, into the state dir (the default job names no folder).
    run(tools["scancel"], "--batch", "--signal=USR1", str(job2))
    t_usr1 = time.time()
    wait_for(lambda: (lambda j: j if j and j.get("checkpoints", 0) >= 1 else None)(running_job()),
             "a checkpoint after USR1", 60)
    usr1_s = time.time() - t_usr1
    ckpt = os.path.join(work, ".satrap", "slurmtest", "checkpoints", "job")
    if not os.path.isdir(ckpt) or not os.listdir(ckpt):
        fail(f"no checkpoint in {ckpt} after USR1")
    log(f"USR1: checkpoint in {ckpt} after {usr1_s:.1f} s")
    pids2 = [pid for pid, c in procs_of_test()
             if process_env(pid).get("SLURM_JOB_ID") == str(job2)]
    run(tools["scancel"], str(job2))
    t_cancel = time.time()
    wait_for(lambda: (lambda f: f if f.get("JobState") == "CANCELLED" else None)(slurm_job(job2)),
             "the scancel-ed job to be CANCELLED", 60)

    if not pids2:
        fail("found no process of the second job before scancel")

    def alive(pid):  # running, not a zombie its parent has yet to reap
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] != "Z"
        except OSError:
            return False

    def gone():
        left = [pid for pid, c in procs_of_test() if alive(pid) and (
            process_env(pid).get("SLURM_JOB_ID") == str(job2) or "slurmstepd" in c)]
        return not left and not any(alive(p) for p in pids2)
    deadline = time.time() + 60
    while time.time() < deadline and not gone():
        time.sleep(0.25)
    if not gone():
        still = [(p, open(f"/proc/{p}/cmdline", "rb").read().replace(b"\0", b" ")[:120])
                 for p in pids2 if alive(p)]
        fail(f"processes of job {job2} left 60 s after scancel: {still}")
    cancel_s = time.time() - t_cancel
    log(f"scancel: {len(pids2)} processes ended within {cancel_s:.1f} s")
except SystemExit:
    raise
except Exception as e:  # noqa: BLE001
    fail(f"{type(e).__name__}: {e}")

left = cleanup()
daemon_left = [pid for pid, _ in procs_of_test()]
if left or daemon_left:
    print(f"FAIL slurm_test: processes left behind: {left} {daemon_left}")
    sys.exit(1)
shutil.rmtree(work, ignore_errors=True)
print(f"slurm_test: OK sbatch_to_first_step_s={first_step_s:.1f} kill_to_training_s={recover_s:.1f} "
      f"samples_per_s={samples_per_s} usr1_checkpoint_s={usr1_s:.1f} scancel_clean_s={cancel_s:.1f} total_s={time.time() - t_begin:.0f}",
      flush=True)
