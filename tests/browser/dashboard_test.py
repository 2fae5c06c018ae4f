#!/usr/bin/env python3
"""The dashboard in a real browser (CTest label `browser`): headless Chromium driven over
WebDriver (chromedriver), against real satrap processes on loopback.

usage: dashboard_test.py SATRAP_BINARY embedded|cluster ARTIFACT_DIR

embedded  `satrap train --status-port`: the page shows the local node, the job's actors and the
          running job; the loss plot has points, has drawn them, and grows between two loads;
          POSTs are refused (read-only); no console errors; screenshot.
cluster   a 3-node cluster (`satrap up`) running a job with a second one queued: nodes with their
          labels, actors per node, the jobs table, the pending job's plan; the plots grow; a
          checkpoint from the page is refused without the admin token (401) and with a wrong one
          (403), and done with the right one; a killed node shows as dead; no console errors;
          screenshots on a wide and on a laptop-sized window.
Ports 5400-5499. Exits 77 (skipped) when Chromium or chromedriver is missing or cannot start.
Screenshots are written to ARTIFACT_DIR; their paths are printed.
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from webdriver import Chrome, WebDriverError, chromium_binary  # noqa: E402

satrap = os.path.abspath(sys.argv[1])
mode = sys.argv[2]
artifacts = os.path.abspath(sys.argv[3])
os.makedirs(artifacts, exist_ok=True)
work = tempfile.mkdtemp(prefix=f"satrap-dashboard-{mode}.")
state = os.path.join(work, "state")
PORTS = {"embedded": 5400, "cluster": 5410}  # 5400-5409 and 5410-5429
base = PORTS[mode]
started = []  # processes this script started itself
t0 = time.time()


def log(msg):
    print(f"[{time.time() - t0:6.1f}s] {msg}", flush=True)


def fail(msg):
    print(f"dashboard_test[{mode}]: FAIL: {msg}", file=sys.stderr)
    for d in (state, work):
        for name in sorted(os.listdir(d)) if os.path.isdir(d) else []:
            if name.endswith(".log"):
                with open(os.path.join(d, name), errors="replace") as f:
                    print(f"== {name}\n" + "".join(f.readlines()[-20:]), file=sys.stderr)
    raise SystemExit(1)


def http(url, method="GET", headers=None, body=b""):
    req = urllib.request.Request(url, method=method, headers=headers or {},
                                 data=body if method == "POST" else None)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError as e:
        return 0, str(e)


def wait_http(url, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if http(url)[0] == 200:
            return
        time.sleep(0.2)
    fail(f"{url} did not answer within {timeout} s")


# Scripts run in the page (window.satrapDashboard is the page's own state).
POINTS = "const u = window.satrapDashboard.plots.loss; return u ? u.data[0].length : 0;"
# Pixels of the loss series' colour (#0b63c5) inside the plot area: the line was really drawn.
DRAWN = """
const u = window.satrapDashboard.plots.loss;
if (!u) return 0;
const b = u.bbox, px = u.ctx.getImageData(b.left, b.top, b.width, b.height).data;
let n = 0;
for (let i = 0; i < px.length; i += 4)
  if (px[i + 3] > 128 && px[i] < 90 && px[i + 1] > 60 && px[i + 1] < 150 && px[i + 2] > 150) n++;
return n;
"""
ROWS = "return Array.from(document.querySelectorAll(arguments[0])).map(e => e.dataset);"


def console_errors(chrome, expected=()):
    """SEVERE console entries and the page's own caught errors, less the `expected` ones (the
    browser logs every refused POST as a failed resource load)."""
    severe = [e["message"] for e in chrome.console() if e.get("level") == "SEVERE"]
    severe += chrome.run("return window.satrapDashboard.errors")
    return [m for m in severe if not any(x in m for x in expected)]


def check_plot(chrome, min_points):
    n1 = chrome.wait(f"const n = (() => {{ {POINTS} }})(); return n >= {min_points} ? n : 0;",
                     f"a loss plot with at least {min_points} points", timeout=60)
    drawn = chrome.wait(DRAWN, "loss line pixels on the plot canvas", timeout=10)
    log(f"loss plot: {n1} points, {drawn} line pixels")
    # Load the page again: the history comes back from the server, and keeps growing.
    chrome.refresh()
    n2 = chrome.wait(f"const n = (() => {{ {POINTS} }})(); return n > {n1} ? n : 0;",
                     "the loss plot to grow after a reload", timeout=30)
    log(f"after reload: {n2} points")
    return n1, n2


def start_browser(width=1600, height=1000):
    if not chromium_binary():
        print("dashboard_test: SKIP: chromium is not installed (ops/setup.sh installs it)")
        raise SystemExit(77)
    try:
        return Chrome(base + 9, width, height, log_path=os.path.join(work, "chromedriver.log"))
    except FileNotFoundError as e:
        print(f"dashboard_test: SKIP: {e}")
        raise SystemExit(77)
    except WebDriverError as e:
        print(f"dashboard_test: SKIP: chromium cannot run here: {e}")
        raise SystemExit(77)


def embedded():
    status_port = base + 1
    job = os.path.join(work, "job.yaml")
    with open(job, "w") as f:  # small and slow enough to watch: ~40k samples/s for minutes
        f.write("name: browser-embedded\n"
                "data:\n  synthetic: {slots: 4, vocab: 2000}\n"
                "training: {batch_size: 64, train_batches: 400000, test_batches: 4, staleness: 1}\n"
                "placement: {shards: 2, aggregators: 1, loaders: 1, trainers: 2}\n")
    out = open(os.path.join(work, "train.log"), "w")
    p = subprocess.Popen([satrap, "train", "--job", job, "--threads", "2",
                          "--status-port", str(status_port)], stdout=out, stderr=out)
    started.append(p)
    url = f"http://127.0.0.1:{status_port}/"
    wait_http(url + "status", 30)
    chrome = start_browser()
    try:
        chrome.get(url)
        nodes = chrome.wait("const r = document.querySelectorAll('#nodes tbody tr'); "
                            "return r.length ? Array.from(r).map(e => e.dataset) : null;",
                            "the nodes table", timeout=20)
        if [n["node"] for n in nodes] != ["local"] or nodes[0]["state"] != "alive":
            fail(f"nodes table: {nodes}")
        chrome.wait("return document.querySelector('#jobs tr[data-state=RUNNING]') !== null",
                    "the running job in the jobs table", timeout=20)
        roles = chrome.wait("const c = document.querySelectorAll('#actors .cell'); "
                            "return c.length ? Array.from(c).map(e => e.dataset.role) : null;",
                            "the actors heat map", timeout=20)
        for role in ("embedding_shard", "gradient_aggregator", "data_loader", "dense_trainer"):
            if role not in roles:
                fail(f"actor role {role} not shown: {roles}")
        log(f"actors shown: {len(roles)}")
        n1, n2 = check_plot(chrome, 5)
        # Read-only: no controls on the page, and the server refuses POSTs.
        if chrome.run("return document.querySelectorAll('#jobs button').length") != 0:
            fail("an embedded job's page shows controls")
        code, body = http(url + "jobs/embedded/cancel", "POST")
        if code != 403 or "read-only" not in body:
            fail(f"POST to an embedded job: {code} {body}")
        code, body = http(url + "jobs/embedded/checkpoint", "POST", {"X-Satrap-Token": "x"})
        if code != 403:
            fail(f"POST with a token to an embedded job: {code} {body}")
        errors = console_errors(chrome)
        if errors:
            fail(f"console errors: {errors}")
        shot = chrome.screenshot(os.path.join(artifacts, "dashboard-embedded.png"))
        log(f"screenshot: {shot}")
    finally:
        chrome.close()
    if p.poll() is not None:
        fail(f"satrap train ended early (exit {p.returncode})")
    print(f"dashboard_test[embedded]: PASS loss_points={n1}->{n2} actors={len(roles)} "
          f"seconds={time.time() - t0:.1f}")


def cluster():
    manifest = os.path.join(work, "manifest.yaml")
    with open(manifest, "w") as f:
        f.write(f"""cluster: browser-{os.getpid()}
head: {{host: 127.0.0.1, port: {base}, status_port: {base + 8}}}
nodes:
  - name: node-{{i}}
    count: 2
    host: 127.0.0.1
    port: {base + 1}
    resources: {{cores: 4, memory: 4GiB, gpus: 0}}
    labels: {{tier: cpu, zone: a}}
  - name: mem-0
    host: 127.0.0.1
    port: {base + 3}
    resources: {{cores: 2, memory: 8GiB, gpus: 0}}
    labels: {{tier: memory, zone: b}}
""")
    token = "browser-test-token-" + str(os.getpid())
    token_file = os.path.join(work, "admin.token")
    with open(token_file, "w") as f:
        f.write(token + "\n")
    os.chmod(token_file, 0o600)
    common = ["--manifest", manifest, "--state-dir", state, "--token-file", token_file]
    # A job that trains for minutes (it is cancelled at the end), and one queued behind it.
    long_job = os.path.join(work, "long.yaml")
    with open(long_job, "w") as f:
        f.write("name: browser-long\n"
                "data:\n  synthetic: {slots: 4, vocab: 2000}\n"
                "training: {batch_size: 64, train_batches: 400000, test_batches: 4, staleness: 1}\n"
                "placement: {shards: 3, aggregators: 1, loaders: 1, trainers: 2}\n"
                "checkpoint: {dir: ckpt}\n")
    queued_job = os.path.join(work, "queued.yaml")
    with open(queued_job, "w") as f:
        f.write("name: browser-queued\n"
                "training: {train_batches: 100}\n")
    r = subprocess.run([satrap, "up", *common, "--wait", "60"], cwd=work, capture_output=True,
                       text=True, timeout=120)
    if r.returncode != 0:
        fail(f"satrap up: {r.stdout} {r.stderr}")
    for job in (long_job, queued_job):
        r = subprocess.run([satrap, "submit", job, *common], cwd=work, capture_output=True,
                           text=True, timeout=60)
        if r.returncode != 0:
            fail(f"satrap submit {job}: {r.stdout} {r.stderr}")
    url = f"http://127.0.0.1:{base + 8}/"
    log("cluster up, jobs submitted")
    chrome = start_browser()
    try:
        chrome.get(url)
        nodes = chrome.wait("const r = Array.from(document.querySelectorAll('#nodes tbody tr'))"
                            ".map(e => e.dataset); "
                            "return r.length === 3 && r.every(n => n.state === 'alive') ? r : null;",
                            "three alive nodes", timeout=30)
        labels = chrome.run("return document.querySelector('#nodes tr[data-node=\"mem-0\"]')"
                            ".textContent")
        if "tier=memory" not in labels:
            fail(f"mem-0's labels not shown: {labels}")
        chrome.wait("return document.querySelector('#jobs tr[data-state=RUNNING]') !== null",
                    "the running job in the jobs table", timeout=60)
        jobs = chrome.run(ROWS, "#jobs tbody tr")
        if sorted(j["state"] for j in jobs) != ["PENDING", "RUNNING"]:
            fail(f"jobs table: {jobs}")
        per_node = chrome.wait(
            "const m = {}; for (const n of document.querySelectorAll('#actors .node-actors')) "
            "m[n.dataset.node] = n.querySelectorAll('.cell').length; "
            "return Object.values(m).filter(x => x > 0).length >= 2 ? m : null;",
            "actors on at least two nodes", timeout=30)
        log(f"actors per node: {per_node}")
        plan = chrome.wait("const r = document.querySelectorAll('#plan-table tbody tr'); "
                           "return r.length ? Array.from(r).map(e => e.textContent) : null;",
                           "the pending job's plan", timeout=10)
        if len(plan) != 3:
            fail(f"plan table: {plan}")
        n1, n2 = check_plot(chrome, 5)

        # Controls: refused without the token, and with a wrong one; done with the right one.
        chrome.wait("return document.querySelector('#jobs button[data-action=checkpoint]')",
                    "the checkpoint button", timeout=10)
        chrome.click("#jobs button[data-action=checkpoint]")
        last = chrome.wait("return window.satrapDashboard.lastControl", "the page's POST", 30)
        if last["status"] != 401:
            fail(f"checkpoint without a token: {last}")
        notice = chrome.run("return document.querySelector('#notice').textContent")
        if "refused" not in notice:
            fail(f"the refusal is not shown: {notice!r}")
        running = [j["job"] for j in jobs if j["state"] == "RUNNING"][0]
        code, body = http(f"{url}jobs/{running}/cancel", "POST", {"X-Satrap-Token": "wrong"})
        if code != 403:
            fail(f"cancel with a wrong token: {code} {body}")
        code, body = http(f"{url}status", "POST")
        if code != 404:
            fail(f"POST /status: {code} {body}")
        chrome.type("#token", token)
        chrome.run("window.satrapDashboard.lastControl = null")
        chrome.click("#jobs button[data-action=checkpoint]")
        last = chrome.wait("return window.satrapDashboard.lastControl", "the page's POST", 60)
        if last["status"] != 200 or "checkpoint_step" not in last["body"]:
            fail(f"checkpoint with the token: {last}")
        log(f"checkpoint from the page: {last['body'].strip()}")
        # The checkpoint shows in the jobs table and as a mark on the plots' time axis.
        chrome.wait("const j = window.satrapDashboard.status.jobs.find(j => j.state === 'RUNNING');"
                    " return j && j.history.events.some(e => e.kind === 'checkpoint');",
                    "the checkpoint event in the job's history", timeout=20)
        refused = f"/jobs/{running}/checkpoint - Failed to load resource: the server responded " \
                  "with a status of 401"
        errors = console_errors(chrome, [refused])
        if errors:
            fail(f"console errors: {errors}")
        time.sleep(2)  # a few more points after the mark
        shot = chrome.screenshot(os.path.join(artifacts, "dashboard-cluster.png"))
        log(f"screenshot (1600x1000): {shot}")
        chrome.set_size(1280, 800)
        time.sleep(2.5)
        shot = chrome.screenshot(os.path.join(artifacts, "dashboard-cluster-laptop.png"))
        log(f"screenshot (1280x800): {shot}")
        chrome.set_size(1600, 1000)

        # A stopped node shows as dead (its heartbeats stop; the per-host supervisor that
        # `satrap up` left restarts only processes that exit).
        with open(os.path.join(state, "node-mem-0.pid")) as f:
            victim = int(f.read().split()[0])  # pid file: pid, start time, cmdline
        os.kill(victim, signal.SIGSTOP)
        killed = time.time()
        chrome.wait("const r = document.querySelector('#nodes tr[data-node=\"mem-0\"]'); "
                    "return r && r.dataset.state === 'dead';", "mem-0 shown as dead", timeout=30)
        dead_shown_s = time.time() - killed
        log(f"stopped node shown dead after {dead_shown_s:.1f} s")
        time.sleep(1)
        shot = chrome.screenshot(os.path.join(artifacts, "dashboard-cluster-node-dead.png"))
        log(f"screenshot (node stopped): {shot}")
        # Killed, its supervisor starts it again: alive, with one process restart in its row.
        os.kill(victim, signal.SIGKILL)
        chrome.wait("const r = document.querySelector('#nodes tr[data-node=\"mem-0\"]'); "
                    "const c = r && r.querySelector('td.restarts-col');"
                    "return r && r.dataset.state === 'alive' && c && !c.hidden && "
                    "c.textContent.trim() === '1';",
                    "mem-0 alive again with 1 restart shown", timeout=40)
        log(f"killed node restarted and shown with its restart after {time.time() - killed:.1f} s")
        errors = console_errors(chrome)
        if errors:
            fail(f"console errors: {errors}")
    finally:
        chrome.close()
    print(f"dashboard_test[cluster]: PASS loss_points={n1}->{n2} "
          f"dead_shown_s={dead_shown_s:.1f} seconds={time.time() - t0:.1f}")


def cleanup():
    for p in started:
        if p.poll() is None:
            p.kill()
            p.wait()
    if mode == "cluster":
        manifest = os.path.join(work, "manifest.yaml")
        subprocess.run([satrap, "down", "--manifest", manifest, "--state-dir", state],
                       capture_output=True, timeout=60)
        for name in ("head", "node-node-0", "node-node-1", "node-mem-0"):  # whatever `down` left
            try:
                with open(os.path.join(state, name + ".pid")) as f:
                    pid = int(f.read().split()[0])
                with open(f"/proc/{pid}/cmdline", "rb") as f:  # still ours, not a reused pid
                    if state.encode() in f.read():
                        os.kill(pid, signal.SIGKILL)
            except (OSError, ValueError):
                pass
    subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    try:
        {"embedded": embedded, "cluster": cluster}[mode]()
    except AssertionError as e:
        fail(str(e))
    finally:
        cleanup()
