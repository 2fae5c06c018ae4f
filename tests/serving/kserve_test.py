#!/usr/bin/env python3
"""KServe v2 / Open Inference Protocol tests of `satrap serve` (label `serving`), with clients
nobody here wrote: curl, and Python's urllib and http.client. A real server on loopback port 5720,
stopped on exit.

Scenario `http`: a synthetic model (4 dense features, 6 slots, a feature cross) trained and
exported, its test rows scored by `satrap predict`; then over /v2:
- health, readiness and metadata (curl);
- infer with JSON tensors (curl, urllib, http.client) and with the binary tensor data extension
  (curl and http.client; binary outputs too) give `satrap predict`'s scores (<= 1e-6) for every
  row, in requests of 1..64 instances; nested data, UINT64 ids, bags (ids_lengths) and the /v1
  route agree;
- each bad request gets its status (400/404/405/413) and an {"error"} naming the input and
  shapes, and the server keeps serving (a good request after each).

usage: kserve_test.py SATRAP WORKDIR SCENARIO    (SCENARIO: http)
"""
import http.client
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request

SATRAP, WORK, SCENARIO = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2]), sys.argv[3]
PORT = 5720
procs = []


def cleanup(*_):
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()


signal.signal(signal.SIGTERM, lambda *a: (cleanup(), sys.exit(1)))


def run(*args, check=True):
    r = subprocess.run([SATRAP, *args], capture_output=True, text=True)
    if check and r.returncode != 0:
        sys.exit("FAILED: satrap %s\nstdout:\n%s\nstderr:\n%s" % (" ".join(args), r.stdout, r.stderr))
    return r


def curl(*args, data=None):
    """curl -s with `args`; returns (status, body bytes, headers text)."""
    hdr = os.path.join(WORK, "curl-headers.txt")
    cmd = ["curl", "-sS", "-o", "-", "-D", hdr, *args]
    r = subprocess.run(cmd, input=data, capture_output=True, timeout=30)
    assert r.returncode == 0, ("curl failed", cmd, r.stderr)
    head = open(hdr, newline="").read()
    status = [int(l.split()[1]) for l in head.split("\r\n") if l.startswith("HTTP/")][-1]  # after a 100
    return status, r.stdout, head


def base(path):
    return "http://127.0.0.1:%d%s" % (PORT, path)


def split_binary(body, header_length):
    """The JSON part and each binary output's floats, in the outputs' order."""
    head = json.loads(body[:header_length])
    at = header_length
    values = {}
    for o in head["outputs"]:
        if "data" in o:
            values[o["name"]] = o["data"]
        else:
            n = o["parameters"]["binary_data_size"]
            values[o["name"]] = list(struct.unpack("<%df" % (n // 4), body[at:at + n]))
            at += n
    assert at == len(body), (at, len(body))
    return head, values


def json_request(rows, dense_features, nested=False, ids_type="INT64", outputs=None, **extra):
    n = len(rows)
    ids = [b[0] for r in rows for b in r["slots"]]
    if ids_type == "INT64":
        ids = [i - (1 << 64) if i >= (1 << 63) else i for i in ids]
    slots = len(rows[0]["slots"])
    dense = [x for r in rows for x in r["dense"]]
    if nested:
        ids = [ids[i * slots:(i + 1) * slots] for i in range(n)]
        dense = [dense[i * dense_features:(i + 1) * dense_features] for i in range(n)]
    req = {"id": "req-%d" % n, "inputs": [
        {"name": "dense", "shape": [n, dense_features], "datatype": "FP32", "data": dense},
        {"name": "ids", "shape": [n, slots], "datatype": ids_type, "data": ids}]}
    if outputs is not None:
        req["outputs"] = outputs
    req.update(extra)
    return json.dumps(req).encode()


def binary_request(rows, dense_features, outputs=None, binary_output=True):
    """A body with the binary extension: (body, header length)."""
    n = len(rows)
    slots = len(rows[0]["slots"])
    dense = struct.pack("<%df" % (n * dense_features), *[x for r in rows for x in r["dense"]])
    ids = struct.pack("<%dQ" % (n * slots), *[b[0] for r in rows for b in r["slots"]])
    head = {"inputs": [
        {"name": "dense", "shape": [n, dense_features], "datatype": "FP32",
         "parameters": {"binary_data_size": len(dense)}},
        {"name": "ids", "shape": [n, slots], "datatype": "INT64",
         "parameters": {"binary_data_size": len(ids)}}],
        "parameters": {"binary_data_output": binary_output}}
    if outputs is not None:
        head["outputs"] = outputs
    h = json.dumps(head).encode()
    return h + dense + ids, len(h)


class Conn:
    """One kept-alive http.client connection."""

    def __init__(self):
        self.c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=30)

    def post(self, path, body, headers=None):
        self.c.request("POST", path, body=body, headers=headers or {})
        r = self.c.getresponse()
        return r.status, r.read(), r.getheader("Inference-Header-Content-Length")

    def infer(self, model, body, header_length=None):
        headers = {"Content-Type": "application/octet-stream" if header_length else "application/json"}
        if header_length is not None:
            headers["Inference-Header-Content-Length"] = str(header_length)
        st, data, hl = self.post("/v2/models/%s/infer" % model, body, headers)
        if st != 200:
            return st, json.loads(data), None
        if hl is None:
            out = json.loads(data)
            return st, out, {o["name"]: o["data"] for o in out["outputs"]}
        head, values = split_binary(data, int(hl))
        return st, head, values


def http_scenario():
    model = os.path.join(WORK, "model")
    run("train", "--name", "kv", "--slots", "6", "--dense-features", "4", "--vocab", "20000",
        "--cross", "0,1", "--train-batches", "40", "--test-batches", "3", "--batch-size", "128",
        "--export", model)
    inst_path = os.path.join(WORK, "inst.jsonl")
    scores_path = os.path.join(WORK, "p.tsv")
    run("predict", "--model", model, "--instances", inst_path, "--out", scores_path)
    rows = [json.loads(l) for l in open(inst_path)]
    scores = [float(l.split("\t")[-1]) for l in open(scores_path) if l.strip()]
    assert len(rows) == len(scores) == 384, (len(rows), len(scores))
    assert all(len(r["slots"]) == 6 and all(len(b) == 1 for b in r["slots"]) for r in rows)
    assert any(b[0] >= (1 << 63) for r in rows for b in r["slots"]), "want ids past 2^63"
    D, S = 4, 6
    log = open(os.path.join(WORK, "serve.log"), "w")
    p = subprocess.Popen([SATRAP, "serve", "--model", model, "--port", str(PORT), "--threads", "2",
                          "--max-body-mb", "1", "--log-level", "info"], stdout=log, stderr=subprocess.STDOUT)
    procs.append(p)
    deadline = time.time() + 20
    while True:
        assert p.poll() is None, open(log.name).read()
        try:
            if curl(base("/v2/health/ready"))[0] == 200:
                break
        except AssertionError:
            pass
        assert time.time() < deadline, "serve did not become ready"
        time.sleep(0.1)
    meta_version = json.loads(open(os.path.join(model, "MODEL.json")).read())["version"]

    # Health, readiness, metadata (curl).
    assert curl(base("/v2/health/live"))[0] == 200
    st, body, _ = curl(base("/v2"))
    assert st == 200 and "binary_tensor_data" in json.loads(body)["extensions"], body
    st, body, _ = curl(base("/v2/models/kv"))
    meta = json.loads(body)
    assert st == 200 and meta["name"] == "kv" and meta["versions"] == [meta_version], meta
    assert meta["inputs"] == [{"name": "dense", "datatype": "FP32", "shape": [-1, D]},
                              {"name": "ids", "datatype": "INT64", "shape": [-1, S]}], meta
    assert {o["name"] for o in meta["outputs"]} == {"predictions", "logits"}, meta
    assert curl(base("/v2/models/kv/ready"))[0] == 200
    assert curl(base("/v2/models/kv/versions/%s/ready" % meta_version))[0] == 200
    assert curl(base("/v2/models/kv/versions/nope/ready"))[0] == 404
    st, body, _ = curl(base("/v2/models/other"))
    assert st == 404 and b"kv" in body, body
    print("health, ready, metadata: ok (%s)" % meta_version)

    def close(got, want, what):
        assert len(got) == len(want), (what, len(got), len(want))
        worst = max(abs(a - b) for a, b in zip(got, want))
        assert worst <= 1e-6, "%s: a score differs from satrap predict's by %g" % (what, worst)
        return worst

    # curl: one JSON request and one binary request of 64 rows.
    st, body, head = curl("-X", "POST", "-H", "Content-Type: application/json", "--data-binary", "@-",
                          base("/v2/models/kv/infer"), data=json_request(rows[:64], D))
    out = json.loads(body)
    assert st == 200 and out["model_name"] == "kv" and out["model_version"] == meta_version, out
    assert out["id"] == "req-64", out
    preds = {o["name"]: o for o in out["outputs"]}
    assert preds["predictions"]["datatype"] == "FP32" and preds["predictions"]["shape"] == [64], out
    close(preds["predictions"]["data"], scores[:64], "curl JSON")
    bbody, hl = binary_request(rows[64:128], D)
    st, body, head = curl("-X", "POST", "-H", "Content-Type: application/octet-stream",
                          "-H", "Inference-Header-Content-Length: %d" % hl, "--data-binary", "@-",
                          base("/v2/models/kv/versions/%s/infer" % meta_version), data=bbody)
    assert st == 200, body
    rhl = [l.split(":")[1].strip() for l in head.split("\r\n") if l.lower().startswith("inference-header-content-length")]
    assert rhl, head
    _, values = split_binary(body, int(rhl[0]))
    close(values["predictions"], scores[64:128], "curl binary")
    print("curl: JSON and binary infer match satrap predict")

    # urllib: JSON infer of rows 128..191, nested data.
    req = urllib.request.Request(base("/v2/models/kv/infer"), data=json_request(rows[128:192], D, nested=True),
                                 headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(req, timeout=30) as r:
        out = json.loads(r.read())
    close([o for o in out["outputs"] if o["name"] == "predictions"][0]["data"], scores[128:192], "urllib nested JSON")

    # http.client, kept alive: every row, JSON and binary, in requests of 1, 64, 13, 2 rows.
    c = Conn()
    got_json, got_bin, got_logits = [None] * len(rows), [None] * len(rows), [None] * len(rows)
    sizes, i, k = [1, 64, 13, 2], 0, 0
    while i < len(rows):
        chunk = rows[i:i + sizes[k % 4]]
        st, out, v = c.infer("kv", json_request(chunk, D, ids_type="UINT64" if k % 2 else "INT64"))
        assert st == 200, out
        got_json[i:i + len(chunk)] = v["predictions"]
        body, hl = binary_request(chunk, D, outputs=[{"name": "predictions"},
                                                     {"name": "logits", "parameters": {"binary_data": False}}])
        st, head, v = c.infer("kv", body, hl)
        assert st == 200, head
        assert "data" in [o for o in head["outputs"] if o["name"] == "logits"][0], head
        got_bin[i:i + len(chunk)] = v["predictions"]
        got_logits[i:i + len(chunk)] = v["logits"]
        i += len(chunk)
        k += 1
    w1 = close(got_json, scores, "http.client JSON")
    w2 = close(got_bin, scores, "http.client binary")
    import math
    close([1 / (1 + math.exp(-l)) for l in got_logits], scores, "logits")
    print("http.client: %d rows, JSON and binary, max |diff| %.2g / %.2g" % (len(rows), w1, w2))

    # Bags (ids_lengths) give the /v1 route's scores for the same bags, empty bags included.
    bag_rows = []
    for j in range(8):
        slots = [list(b) for b in rows[j]["slots"]]
        slots[1] = slots[1] + rows[j + 8]["slots"][1]
        if j % 2:
            slots[4] = []
        bag_rows.append({"dense": rows[j]["dense"], "slots": slots})
    st, v1, _ = c.post("/v1/models/kv:predict", json.dumps({"instances": bag_rows}).encode(),
                       {"Content-Type": "application/json"})
    assert st == 200, v1
    v1 = json.loads(v1)["predictions"]
    flat = [i - (1 << 64) if i >= (1 << 63) else i for r in bag_rows for b in r["slots"] for i in b]
    lengths = [len(b) for r in bag_rows for b in r["slots"]]
    req = {"inputs": [
        {"name": "ids_lengths", "shape": [8, S], "datatype": "INT32", "data": lengths},
        {"name": "ids", "shape": [len(flat)], "datatype": "INT64", "data": flat},
        {"name": "dense", "shape": [8, D], "datatype": "FP32", "data": [x for r in bag_rows for x in r["dense"]]}],
        "outputs": [{"name": "predictions"}]}
    st, out, v = c.infer("kv", json.dumps(req).encode())
    assert st == 200, out
    close(v["predictions"], v1, "bags: v2 ids_lengths vs v1")
    print("bags: ids_lengths matches /v1")

    # Bad requests: status, an {"error"} naming the problem, and the server keeps serving.
    good = json.loads(json_request(rows[:2], D))
    bin_body, bin_hl = binary_request(rows[:2], D)

    def with_input(which, **changes):
        r = json.loads(json.dumps(good))
        for t in r["inputs"]:
            if t["name"] == which:
                t.update(changes)
        return json.dumps(r).encode()

    def without(name):
        r = json.loads(json.dumps(good))
        r["inputs"] = [t for t in r["inputs"] if t["name"] != name]
        return json.dumps(r).encode()

    bin_head = json.loads(bin_body[:bin_hl])
    bin_head["inputs"][0]["parameters"]["binary_data_size"] = 31
    bad_size = json.dumps(bin_head).encode()
    nan_dense = struct.pack("<8f", *([float("nan")] + [0.0] * 7))
    cases = [
        # (what, path, body, header length, status, text in the error)
        ("wrong datatype", "kv", with_input("dense", datatype="FP64"), None, 400, "wrong datatype FP64"),
        ("wrong ids datatype", "kv", with_input("ids", datatype="FP32"), None, 400, "input 'ids': wrong datatype FP32"),
        ("shape mismatch", "kv", with_input("dense", shape=[2, D + 1], data=[0.5] * (2 * (D + 1))), None, 400,
         "input 'dense': shape [2, %d] does not match the model's [N, %d]" % (D + 1, D)),
        ("rows differ", "kv", with_input("dense", shape=[1, D], data=[0.5] * D), None, 400, "input 'dense' has 1 rows"),
        ("values vs shape", "kv", with_input("ids", data=[1] * 13), None, 400, "input 'ids': more values in data than its shape [2, 6]"),
        ("too few values", "kv", with_input("dense", data=[0.5] * 7), None, 400, "7 values in data, shape [2, 4] needs 8"),
        ("missing input", "kv", without("ids"), None, 400, "missing input 'ids' (INT64 [N, 6])"),
        ("missing dense", "kv", without("dense"), None, 400, "missing input 'dense' (FP32 [N, 4])"),
        ("unknown input", "kv", with_input("ids", name="idz"), None, 400, "unknown input 'idz'"),
        ("unknown key", "kv", with_input("ids", colour="red"), None, 400, "unknown key \"colour\""),
        ("a string in data", "kv", with_input("dense", data=["x"] * 8), None, 400, "input 'dense'.data[0]: expected a number"),
        ("fraction in ids", "kv", with_input("ids", data=[1.5] * 12), None, 400, "expected an integer"),
        ("INT64 out of range", "kv", with_input("ids", data=[1 << 63] * 12), None, 400, "out of range for INT64"),
        ("unknown output", "kv", json.dumps(dict(good, outputs=[{"name": "probs"}])).encode(), None, 400, "unknown output 'probs'"),
        ("malformed JSON", "kv", b'{"inputs": [', None, 400, "malformed JSON"),
        ("no inputs", "kv", b'{"inputs": []}', None, 400, "non-empty"),
        ("binary size mismatch", "kv", bad_size + bin_body[bin_hl:], len(bad_size), 400,
         "input 'dense': binary_data_size 31, shape [2, 4] of FP32 needs 32 bytes"),
        ("binary bytes left over", "kv", bin_body + b"\0" * 8, bin_hl, 400, "binary data: 136 bytes after the JSON header"),
        ("binary without the header", "kv", bin_body, None, 400, "bytes after the JSON object"),
        ("binary_data_size without the header", "kv", bin_body[:bin_hl], None, 400, "without an Inference-Header-Content-Length"),
        ("a NaN in binary", "kv", bin_body[:bin_hl] + nan_dense + bin_body[bin_hl + 32:], bin_hl, 400, "not a finite FP32 value"),
        ("header length past the body", "kv", bin_body, len(bin_body) + 1, 400, "is past the body's"),
        ("header length past the limit", "kv", bin_body, 1 << 40, 413, "past the server's body limit"),
        ("header length not a number", "kv", bin_body, "12x", 400, "expected a byte count"),
        ("too many instances", "kv", *binary_request(rows[:1] * 4097, D), 413, "4097 instances, at most 4096"),
        ("unknown model", "other", json_request(rows[:1], D), None, 404, "no model named 'other'"),
    ]
    for what, name, body, hl, status, text in cases:
        headers = {"Content-Type": "application/json"}
        if hl is not None:
            headers["Inference-Header-Content-Length"] = str(hl)
        st, data, _ = c.post("/v2/models/%s/infer" % name, body, headers)
        err = json.loads(data)
        assert st == status and text in err["error"], (what, st, err)
        st, _, v = c.infer("kv", json_request(rows[:1], D))
        assert st == 200 and abs(v["predictions"][0] - scores[0]) <= 1e-6, (what, "then", st)
        print("  %-38s %d %s" % (what, status, err["error"][:100]))
    # A version not served, a wrong method, a body past --max-body-mb (curl, urllib).
    st, body, _ = curl("-X", "POST", "--data-binary", "@-", base("/v2/models/kv/versions/v0/infer"),
                       data=json_request(rows[:1], D))
    assert st == 404 and b"no version 'v0'" in body, body
    st, body, _ = curl(base("/v2/models/kv/infer"))
    assert st == 405 and b"POST" in body, body
    big, big_hl = binary_request(rows * 45, D)  # 17280 rows, > 1 MiB
    assert len(big) > (1 << 20)
    req = urllib.request.Request(base("/v2/models/kv/infer"), data=big, method="POST",
                                 headers={"Inference-Header-Content-Length": str(big_hl)})
    try:
        urllib.request.urlopen(req, timeout=30)
        raise AssertionError("a body past --max-body-mb was taken")
    except urllib.error.HTTPError as e:
        assert e.code == 413 and b"larger than" in e.read(), e
    except (urllib.error.URLError, ConnectionResetError, BrokenPipeError):
        pass  # the server answered 413 and closed before the whole body was sent
    # The server's lean HTTP loop (runtime/http_server's http_limits::lean), as raw clients send it.
    import socket

    def raw(data, read_all=True):
        sock = socket.create_connection(("127.0.0.1", PORT), timeout=10)
        sock.sendall(data)
        got = b""
        while True:
            try:
                chunk = sock.recv(65536)
            except socket.timeout:
                break
            if not chunk:
                break
            got += chunk
            if not read_all:
                break
        sock.close()
        return got

    one, one_hl = binary_request(rows[:1], D)
    req = (b"POST /v2/models/kv/infer HTTP/1.1\r\nHost: x\r\nInference-Header-Content-Length: %d\r\n"
           b"Content-Length: %d\r\n\r\n" % (one_hl, len(one))) + one
    sock = socket.create_connection(("127.0.0.1", PORT), timeout=10)
    sock.sendall(req + req)  # two requests in one write (pipelined): two answers, in order
    got = b""
    while got.count(b"HTTP/1.1 200 OK") < 2:
        chunk = sock.recv(65536)
        assert chunk, got
        got += chunk
    sock.close()
    got = raw(b"POST /v2/models/kv/infer HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
    assert got.startswith(b"HTTP/1.1 411") and b"Content-Length" in got, got
    got = raw(b"GET /v2/health/live HTTP/1.0\r\n\r\n")
    assert got.startswith(b"HTTP/1.1 200") and b"Connection: close" in got, got
    got = raw(b"GET /v2/health/live HTTP/1.1\r\nX-Big: " + b"a" * 9000 + b"\r\n\r\n")
    assert got.startswith(b"HTTP/1.1 431"), got[:80]
    got = raw(b"NONSENSE\r\n\r\n")
    assert got.startswith(b"HTTP/1.1 400") and b"malformed HTTP request" in got, got
    # Expect: 100-continue (curl asks it for large bodies): the body follows the 100.
    mid, mid_hl = binary_request(rows * 30, D)  # 11520 rows, ~0.7 MB: past 4096 rows, a 413
    st, body, _ = curl("-X", "POST", "-H", "Expect: 100-continue", "-H", "Inference-Header-Content-Length: %d" % mid_hl,
                       "--data-binary", "@-", base("/v2/models/kv/infer"), data=mid)
    assert st == 413 and b"11520 instances" in body and "100 Continue" in _, (st, body, _)
    print("lean HTTP: pipelined, HTTP/1.0, chunked 411, 431, 400, Expect: 100-continue")
    st, _, v = Conn().infer("kv", *binary_request(rows[:3], D))
    assert st == 200 and close(v["predictions"], scores[:3], "after the bad requests") <= 1e-6
    st, body, _ = curl(base("/metrics"))
    m = body.decode()
    assert 'satrap_serve_errors_total{reason="bad_request"}' in m and 'satrap_serve_errors_total{reason="unknown_model"}' in m, m
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=15) == 0, "serve did not stop cleanly"
    print("bad requests: %d cases refused, the server kept serving" % (len(cases) + 3))


if __name__ == "__main__":
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    os.chdir(WORK)
    try:
        {"http": http_scenario}[SCENARIO]()
    finally:
        cleanup()
    print("PASS", SCENARIO)
