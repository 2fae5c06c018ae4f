#!/usr/bin/env python3
"""The cluster in containers on a real container runtime (CTest label `container`).

usage: container_test.py SATRAP_BINARY SOURCE_ROOT [TRAIN_BATCHES]

Builds the base image (ops/container/base-image.sh, cached) and the satrap image
(ops/container/build-image.sh), renders ops/manifests/local-3node.yaml (its ports moved into this
test's block, 5150-5159) with `satrap k8s --flavor podman`, runs it with `podman kube play`,
submits the default job shortened, kills the main process of one node's container with kill -9
and checks: podman restarts the container by its restart policy (nobody by hand), the node
rejoins, /status shows its restart, the job SUCCEEDS within 0.003 test AUC of the embedded run of
the same job; `podman kube down` leaves no container, pod or volume behind.
Exit 77 (skipped) when podman is missing or cannot run a container here.
The last line is key=value figures.
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

satrap = os.path.abspath(sys.argv[1])
source = os.path.abspath(sys.argv[2])
batches = int(sys.argv[3]) if len(sys.argv) > 3 else 1500
build_dir = os.path.dirname(os.path.dirname(satrap))
work = tempfile.mkdtemp(prefix="satrap-container.")
image = "localhost/satrap:ctest"
base_image = "localhost/debian:12-slim"
base = 5150
status_url = f"http://127.0.0.1:{base + 9}"
play = os.path.join(work, "play.yaml")
played = False
figures = {}


def log(msg):
    print(f"container_test: {msg}", flush=True)


def fail(msg):
    print(f"container_test: FAIL: {msg}", file=sys.stderr)
    for name in ("ctest-local-head", "ctest-local-node-0", "ctest-local-node-1", "ctest-local-node-2"):
        r = subprocess.run(["podman", "logs", "--tail", "15", name], capture_output=True, text=True)
        print(f"== podman logs {name}\n{r.stdout}{r.stderr}", file=sys.stderr)
    raise SystemExit(1)


def sh(*args, check=True, timeout=300):
    r = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout, cwd=work)
    if check and r.returncode != 0:
        fail(f"{' '.join(args)}: exit {r.returncode}: {r.stdout[-2000:]} {r.stderr[-2000:]}")
    return r


def skip(msg):
    print(f"container_test: SKIP: {msg}")
    raise SystemExit(77)


def get(path):
    try:
        with urllib.request.urlopen(status_url + path, timeout=2) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, ""
    except Exception:
        return None, ""


def status():
    code, body = get("/status")
    return json.loads(body) if code == 200 else None


def wait_for(pred, what, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.2)
    fail(f"timed out after {timeout} s waiting for {what}")


def job_record(doc):
    jobs = [j for j in (doc or {}).get("jobs", []) if j["name"] == "container-test"]
    return jobs[-1] if jobs else None


def ours(kind):
    """Names of our pods/containers/volumes podman lists."""
    fmt = {"pod": ["pod", "ps", "--format", "{{.Name}}"],
           "container": ["ps", "-a", "--format", "{{.Names}}"],
           "volume": ["volume", "ls", "--format", "{{.Name}}"]}[kind]
    r = subprocess.run(["podman", *fmt], capture_output=True, text=True)
    return set(r.stdout.split())


def main():
    global played
    if not shutil.which("podman"):
        skip("podman is not installed (ops/setup.sh installs it)")
    t0 = time.monotonic()
    r = subprocess.run([os.path.join(source, "ops/container/base-image.sh"), "--cache",
                        os.path.join(build_dir, "container-cache")],
                       capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        if "needs root" in r.stderr or "debootstrap is missing" in r.stderr:
            skip(f"cannot build the base image here: {r.stderr.strip()}")
        fail(f"base-image.sh: {r.stdout} {r.stderr}")
    figures["base_image_s"] = time.monotonic() - t0
    r = subprocess.run(["podman", "run", "--rm", "--network", "host", base_image, "true"],
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        skip(f"podman cannot run a container here: {r.stderr.strip()}")
    t1 = time.monotonic()
    # Without libtorch (516 MB with what Debian's links): this test runs the built-in models.
    sh(os.path.join(source, "ops/container/build-image.sh"), "--build-dir", build_dir,
       "--base", base_image, "--tag", image, "--no-torch", timeout=600)
    figures["image_build_s"] = time.monotonic() - t1
    figures["image_mb"] = int(sh("podman", "image", "inspect", "--format", "{{.Size}}",
                                 image).stdout.strip()) / 1e6

    # The local 3-node manifest, its ports moved into this test's block.
    text = open(os.path.join(source, "ops/manifests/local-3node.yaml")).read()
    for old, new in (("4710", base), ("4711", base + 1), ("4780", base + 9)):
        if old not in text:
            fail(f"ops/manifests/local-3node.yaml has no port {old} any more; update this test")
        text = text.replace(old, str(new))
    text = text.replace("cluster: local", "cluster: ctest-local")
    # Mutual TLS as everywhere: satrap k8s makes the certificates there and puts them in the
    # pod (a ConfigMap for kube play); this test's own `satrap submit` reads the client's pair.
    text += f"security: {{certs: {os.path.join(work, 'certs')}}}\n"
    manifest = os.path.join(work, "manifest.yaml")
    open(manifest, "w").write(text)
    token = os.path.join(work, "admin.token")
    open(token, "w").write("container-test-token\n")
    sh(satrap, "k8s", "--manifest", manifest, "--flavor", "podman", "--image", image,
       "--token-file", token, "-o", play)
    with open(os.path.join(work, "job.yaml"), "w") as f:
        f.write(f"name: container-test\ntraining: {{train_batches: {batches}}}\n")
    ref = json.loads(sh(satrap, "train", "--job", "job.yaml", "--json",
                        timeout=600).stdout.strip().splitlines()[-1])

    before = {k: ours(k) for k in ("pod", "container", "volume")}
    t2 = time.monotonic()
    played = True
    sh("podman", "kube", "play", play, timeout=300)
    wait_for(lambda: get("/readyz")[0] == 200, "the head to be ready (every node joined)", 120)
    figures["cluster_ready_s"] = time.monotonic() - t2
    out = sh(satrap, "submit", "job.yaml", "--manifest", manifest, "--token-file", token).stdout
    log(out.strip())

    def running():
        j = job_record(status())
        return j if j and j["state"] == "RUNNING" and j["steps"] >= 100 else None
    wait_for(running, "the job to run 100 steps", 300)
    victim = "node-1"
    container = f"ctest-local-{victim}"  # kube play names containers <pod>-<container>
    pid = int(sh("podman", "inspect", "--format", "{{.State.Pid}}", container).stdout.strip())
    restarts_before = int(sh("podman", "inspect", "--format", "{{.RestartCount}}",
                             container).stdout.strip())
    log(f"kill -9 {pid} (the main process of container {container})")
    t_kill = time.monotonic()
    os.kill(pid, signal.SIGKILL)

    def restarted():
        r = sh("podman", "inspect", "--format", "{{.RestartCount}} {{.State.Running}} {{.State.Pid}}",
               container, check=False)
        parts = r.stdout.split()
        return len(parts) == 3 and int(parts[0]) > restarts_before and parts[1] == "true" \
            and int(parts[2]) != pid
    wait_for(restarted, f"podman to restart container {container}", 60)
    figures["container_restarted_s"] = time.monotonic() - t_kill

    def rejoined():
        d = status()
        return d and any(n["name"] == victim and n["alive"] and n["restarts"] >= 1
                         and n["rejoins"] >= 1 for n in d["nodes"])
    wait_for(rejoined, f"node {victim} to rejoin with its restart counted", 60)
    figures["node_back_s"] = time.monotonic() - t_kill

    final = wait_for(lambda: (lambda j: j if j and j["state"] in ("SUCCEEDED", "FAILED", "CANCELLED")
                              else None)(job_record(status())), "the job to end", 600)
    if final["state"] != "SUCCEEDED":
        fail(f"job ended {final['state']}: {final['message']}")
    delta = abs(final["test_auc"] - ref["test_auc"])
    log(f"job SUCCEEDED: auc {final['test_auc']:.4f}, embedded {ref['test_auc']:.4f}, "
        f"restarts {final['restarts']}")
    if delta > 0.003:
        fail(f"test AUC differs from the embedded run by {delta:.4f} (> 0.003)")
    node = next(n for n in status()["nodes"] if n["name"] == victim)
    code, metrics = get("/metrics")
    if f'satrap_node_restarts_total{{node="{victim}"}} {node["restarts"]}' not in metrics:
        fail(f"/metrics does not show the restart of {victim}")

    t3 = time.monotonic()
    sh("podman", "kube", "down", play, timeout=300)
    # podman 4.3 keeps the volume of a mounted ConfigMap (the certificates) after kube down;
    # README "Deployment" says to remove it so.
    sh("podman", "volume", "rm", "ctest-local-certs")
    played = False
    figures["kube_down_s"] = time.monotonic() - t3
    for kind in ("pod", "container", "volume"):
        left = ours(kind) - before[kind]
        if left:
            fail(f"podman kube down left {kind}(s) behind: {sorted(left)}")
    if get("/healthz")[0] is not None:
        fail("the head still answers after podman kube down")
    figures.update(auc=final["test_auc"], auc_embedded=ref["test_auc"], auc_delta=delta,
                   node_restarts=node["restarts"], job_restarts=final["restarts"],
                   total_s=time.monotonic() - t0)
    print(" ".join(f"{k}={v:.4f}" if k.startswith("auc") else
                   f"{k}={v:.2f}" if isinstance(v, float) else f"{k}={v}"
                   for k, v in figures.items()))
    log("PASS")


try:
    main()
finally:
    if played:
        subprocess.run(["podman", "kube", "down", play], capture_output=True, timeout=300)
        subprocess.run(["podman", "volume", "rm", "ctest-local-certs"], capture_output=True,
                       timeout=60)
    shutil.rmtree(work, ignore_errors=True)
