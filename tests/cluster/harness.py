"""What the multi-process cluster tests (fault, soak, finished_jobs) share: starting a satrap
process the way `satrap up` does, waiting for a condition, and one test's cluster (`Cluster`)."""
import json
import os
import subprocess
import sys
import time
import urllib.request


def start_recorded(argv, cwd, log_path, pid_path):
    """Starts `argv` as `satrap up` starts a cluster process: output appended to `log_path`, a
    session of its own, and the record `satrap down` checks (cli/process_record.hpp): pid, start
    time, argv."""
    with open(log_path, "a") as log:
        p = subprocess.Popen(argv, cwd=cwd, stdout=log, stderr=log, stdin=subprocess.DEVNULL,
                             start_new_session=True)
    with open(f"/proc/{p.pid}/stat") as f:
        start_time = f.read().rsplit(")", 1)[1].split()[19]
    with open(pid_path, "w") as f:
        f.write(f"{p.pid}\n{start_time}\n{(chr(0).join(argv) + chr(0)).encode().hex()}\n")
    return p


def wait_for(pred, what, timeout, fail):
    """pred()'s first true value within `timeout` seconds; else fail("timed out waiting for ...")."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.1)
    fail(f"timed out waiting for {what}")


class Cluster:
    """One test's loopback cluster: its satrap binary, work folder (the state folder is its
    `state`), manifest and /status address, and the calls each cluster test makes on them."""

    def __init__(self, satrap, work, manifest, status_url, label, log_lines=20):
        self.satrap, self.work, self.manifest, self.status_url = satrap, work, manifest, status_url
        self.state = os.path.join(work, "state")
        self.label, self.log_lines = label, log_lines
        self.started = []  # processes the test started itself (start)

    def fail(self, msg):
        """Prints msg and the tail of every process log in the state folder, then exits 1."""
        print(f"{self.label}: FAIL: {msg}", flush=True, file=sys.stderr)
        names = sorted(os.listdir(self.state)) if os.path.isdir(self.state) else []
        for name in names:
            if name.endswith(".log"):
                with open(os.path.join(self.state, name), errors="replace") as f:
                    lines = f.readlines()[-self.log_lines:]
                print(f"== {name}\n" + "".join(lines), file=sys.stderr)
        raise SystemExit(1)

    def common(self):
        return ["--manifest", self.manifest, "--state-dir", self.state]

    def write_manifest(self, name, base):
        """The 3-node loopback manifest: the head on `base` (status on base + 9), nodes from
        base + 1."""
        with open(self.manifest, "w") as f:
            f.write(f"""cluster: {name}-{os.getpid()}
head: {{host: 127.0.0.1, port: {base}, status_port: {base + 9}}}
nodes:
  - name: node-{{i}}
    count: 3
    host: 127.0.0.1
    port: {base + 1}
    resources: {{cores: 2, memory: 4GiB, gpus: 0}}
""")

    def run(self, *args, check=True, timeout=120):
        r = subprocess.run([self.satrap, *args], cwd=self.work, capture_output=True, text=True,
                           timeout=timeout)
        if check and r.returncode != 0:
            self.fail(f"satrap {' '.join(args)}: exit {r.returncode}: {r.stdout} {r.stderr}")
        return r

    def status(self):
        """/status as a dict, or None while the head does not answer."""
        try:
            with urllib.request.urlopen(self.status_url, timeout=2) as r:
                return json.loads(r.read())
        except Exception:
            return None

    def wait_for(self, pred, what, timeout):
        return wait_for(pred, what, timeout, self.fail)

    def pid_of(self, name):
        with open(os.path.join(self.state, name + ".pid")) as f:
            return int(f.readline().strip())

    def start(self, args, name):
        """Starts a satrap process as `satrap up` does (log and pid record in the state folder)."""
        argv = [self.satrap, *args, *self.common(), "--token-file",
                os.path.join(self.state, "admin.token")]
        p = start_recorded(argv, self.work, os.path.join(self.state, name + ".log"),
                           os.path.join(self.state, name + ".pid"))
        self.started.append(p)
        return p
