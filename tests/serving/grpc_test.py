#!/usr/bin/env python3
"""KServe v2 / Open Inference Protocol over gRPC (`satrap serve --grpc-port`, label `serving`),
with a client nobody here wrote: grpc's Python stub, generated at test time by grpc_tools from
serving/proto/grpc_predict_v2.proto. Real servers on loopback (gRPC port 5316, HTTP port 5317;
then 5314-5315), stopped on exit. Exits 77 (skipped) when the grpc Python modules (python3-grpcio,
python3-grpc-tools) are missing, or when satrap was built without gRPC (it then refuses
--grpc-port saying so, which is checked).

A synthetic model (4 dense features, 6 slots, a feature cross) trained and exported twice (steps
40 and 20), its test rows scored by `satrap predict`; then:
- ServerLive, ServerReady, ServerMetadata, ModelReady (the version served, an unknown version or
  model: NOT_FOUND), ModelMetadata (dense FP32 [-1, 4], ids INT64 [-1, 6], two outputs);
- ModelInfer gives `satrap predict`'s scores (<= 1e-6) for every row, in requests of 1..64
  instances, with raw_input_contents (answered in raw_output_contents) and with typed contents
  (answered in fp32_contents), INT64 and UINT64 ids, the version pinned or not, one output named;
  bags (ids_lengths) give the HTTP /v1 route's scores; 8 concurrent clients get their own scores;
- each bad request gets INVALID_ARGUMENT (NOT_FOUND for a model or version, RESOURCE_EXHAUSTED
  past --max-body-mb) with a message naming the input, and the server keeps serving;
- a hot reload (POST /admin/reload) under gRPC load: no call fails, each answer is wholly one
  version's scores, and a pin of the old version then gets NOT_FOUND.
- a model with several labels (a second server, ports 5314-5315) is refused with
  INVALID_ARGUMENT pointing to the /v1 route, as the HTTP v2 route refuses it.

usage: grpc_test.py SATRAP WORKDIR
"""
import json
import math
import os
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time
import urllib.request

try:
    import grpc
    import grpc_tools  # noqa: F401  (the stub is generated with it)
except ImportError as e:
    print("SKIP: grpc Python modules missing (%s): apt-get install python3-grpcio python3-grpc-tools" % e)
    sys.exit(77)

SATRAP, WORK = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
GRPC_PORT, HTTP_PORT = 5316, 5317
PROTO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "serving", "proto")
procs = []


def cleanup(*_):
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()


signal.signal(signal.SIGTERM, lambda *a: (cleanup(), sys.exit(1)))


def run(*args):
    r = subprocess.run([SATRAP, *args], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("FAILED: satrap %s\nstdout:\n%s\nstderr:\n%s" % (" ".join(args), r.stdout, r.stderr))
    return r


def stubs():
    """grpc_predict_v2_pb2 and _pb2_grpc, generated into WORK/gen by grpc_tools.protoc."""
    gen = os.path.join(WORK, "gen")
    os.makedirs(gen, exist_ok=True)
    r = subprocess.run([sys.executable, "-m", "grpc_tools.protoc", "-I", os.path.abspath(PROTO),
                        "--python_out=" + gen, "--grpc_python_out=" + gen, "grpc_predict_v2.proto"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    sys.path.insert(0, gen)
    import grpc_predict_v2_pb2 as pb
    import grpc_predict_v2_pb2_grpc as pb_grpc
    return pb, pb_grpc


def model_and_scores(name, batches):
    model = os.path.join(WORK, name)
    run("train", "--name", "kv", "--slots", "6", "--dense-features", "4", "--vocab", "20000",
        "--cross", "0,1", "--train-batches", str(batches), "--test-batches", "3", "--batch-size", "128",
        "--export", model)
    inst, out = os.path.join(WORK, name + "-inst.jsonl"), os.path.join(WORK, name + "-p.tsv")
    run("predict", "--model", model, "--instances", inst, "--out", out)
    rows = [json.loads(l) for l in open(inst)]
    scores = [float(l.split("\t")[-1]) for l in open(out) if l.strip()]
    version = json.loads(open(os.path.join(model, "MODEL.json")).read())["version"]
    return model, rows, scores, version


def main():
    # A satrap built without gRPC refuses --grpc-port, saying so: then there is nothing to test.
    r = subprocess.run([SATRAP, "serve", "--model", os.path.join(WORK, "none"), "--grpc-port",
                        str(GRPC_PORT), "--port", str(HTTP_PORT)], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0, r
    if "built without gRPC" in r.stderr:
        print("SKIP: %s" % r.stderr.strip())
        sys.exit(77)
    assert "none" in r.stderr, r.stderr  # the model folder's error: the gRPC port was taken
    pb, pb_grpc = stubs()
    model, rows, scores, version = model_and_scores("model", 40)
    model2, rows2, scores2, version2 = model_and_scores("model2", 20)
    assert len(rows) == len(scores) == 384, (len(rows), len(scores))
    assert rows2 == rows and version2 != version
    assert max(abs(a - b) for a, b in zip(scores, scores2)) > 1e-4, "the versions must score differently"
    assert any(b[0] >= (1 << 63) for r in rows for b in r["slots"]), "want ids past 2^63"
    D, S = 4, 6
    token = os.path.join(WORK, "token")
    with open(token, "w") as f:
        f.write("grpc-test-token\n")
    log = open(os.path.join(WORK, "serve.log"), "w")
    p = subprocess.Popen([SATRAP, "serve", "--model", model, "--port", str(HTTP_PORT), "--grpc-port",
                          str(GRPC_PORT), "--threads", "2", "--max-body-mb", "1", "--admin-token-file",
                          token, "--log-level", "info"], stdout=log, stderr=subprocess.STDOUT)
    procs.append(p)
    channel = grpc.insecure_channel("127.0.0.1:%d" % GRPC_PORT)
    stub = pb_grpc.GRPCInferenceServiceStub(channel)
    deadline = time.time() + 30
    while True:
        assert p.poll() is None, open(log.name).read()
        try:
            if stub.ServerLive(pb.ServerLiveRequest(), timeout=2).live:
                break
        except grpc.RpcError:
            pass
        assert time.time() < deadline, "serve's gRPC port did not come up"
        time.sleep(0.1)

    # Health and metadata.
    assert stub.ServerReady(pb.ServerReadyRequest()).ready
    meta = stub.ServerMetadata(pb.ServerMetadataRequest())
    assert meta.name == "satrap" and meta.version, meta
    assert stub.ModelReady(pb.ModelReadyRequest(name="kv")).ready
    assert stub.ModelReady(pb.ModelReadyRequest(name="kv", version=version)).ready

    def code_of(call, request):
        try:
            call(request)
        except grpc.RpcError as e:
            return e.code(), e.details()
        raise AssertionError("no error for %s" % request)

    code, why = code_of(stub.ModelReady, pb.ModelReadyRequest(name="kv", version="nope"))
    assert code == grpc.StatusCode.NOT_FOUND and "no version 'nope'" in why, (code, why)
    code, why = code_of(stub.ModelMetadata, pb.ModelMetadataRequest(name="other"))
    assert code == grpc.StatusCode.NOT_FOUND and "no model named 'other'" in why and "'kv'" in why, why
    m = stub.ModelMetadata(pb.ModelMetadataRequest(name="kv"))
    assert m.name == "kv" and list(m.versions) == [version] and m.platform == "satrap", m
    assert [(t.name, t.datatype, list(t.shape)) for t in m.inputs] == \
        [("dense", "FP32", [-1, D]), ("ids", "INT64", [-1, S])], m
    assert [(t.name, t.datatype, list(t.shape)) for t in m.outputs] == \
        [("predictions", "FP32", [-1]), ("logits", "FP32", [-1])], m
    print("health, ready, metadata: ok (%s)" % version)

    def as_int64(i):
        return i - (1 << 64) if i >= (1 << 63) else i

    def request(chunk, raw=True, ids_type="INT64", outputs=None, **kw):
        n = len(chunk)
        dense = [x for r in chunk for x in r["dense"]]
        ids = [b[0] for r in chunk for b in r["slots"]]
        req = pb.ModelInferRequest(model_name="kv", id="req-%d" % n, **kw)
        td = req.inputs.add(name="dense", datatype="FP32", shape=[n, D])
        ti = req.inputs.add(name="ids", datatype=ids_type, shape=[n, S])
        if raw:
            req.raw_input_contents.append(struct.pack("<%df" % len(dense), *dense))
            req.raw_input_contents.append(struct.pack("<%dQ" % len(ids), *ids))
        else:
            td.contents.fp32_contents.extend(dense)
            if ids_type == "INT64":
                ti.contents.int64_contents.extend([as_int64(i) for i in ids])
            else:
                ti.contents.uint64_contents.extend(ids)
        for o in outputs or []:
            req.outputs.add(name=o)
        return req

    def outputs_of(res):
        """{name: floats} from raw_output_contents or from contents.fp32_contents."""
        got = {}
        for k, o in enumerate(res.outputs):
            assert o.datatype == "FP32" and len(o.shape) == 1, o
            if res.raw_output_contents:
                vals = list(struct.unpack("<%df" % o.shape[0], res.raw_output_contents[k]))
            else:
                vals = list(o.contents.fp32_contents)
            assert len(vals) == o.shape[0], (o.name, len(vals), o.shape)
            got[o.name] = vals
        return got

    def close(got, want, what):
        assert len(got) == len(want), (what, len(got), len(want))
        worst = max(abs(a - b) for a, b in zip(got, want))
        assert worst <= 1e-6, "%s: a score differs from satrap predict's by %g" % (what, worst)
        return worst

    # Every row, raw and typed, in requests of 1, 64, 13, 2 rows.
    got_raw, got_typed, got_logits = [None] * len(rows), [None] * len(rows), [None] * len(rows)
    sizes, i, k = [1, 64, 13, 2], 0, 0
    while i < len(rows):
        chunk = rows[i:i + sizes[k % 4]]
        n = len(chunk)
        res = stub.ModelInfer(request(chunk, raw=True, model_version=version if k % 2 else ""))
        assert res.model_name == "kv" and res.model_version == version and res.id == "req-%d" % n, res
        assert len(res.raw_output_contents) == 2 and not res.outputs[0].contents.fp32_contents, res
        v = outputs_of(res)
        got_raw[i:i + n], got_logits[i:i + n] = v["predictions"], v["logits"]
        res = stub.ModelInfer(request(chunk, raw=False, ids_type="UINT64" if k % 2 else "INT64"))
        assert not res.raw_output_contents, res
        got_typed[i:i + n] = outputs_of(res)["predictions"]
        i += n
        k += 1
    w1 = close(got_raw, scores, "raw_input_contents")
    w2 = close(got_typed, scores, "typed contents")
    close([1 / (1 + math.exp(-l)) for l in got_logits], scores, "logits")
    res = stub.ModelInfer(request(rows[:5], outputs=["logits"]))
    assert [o.name for o in res.outputs] == ["logits"], res
    print("ModelInfer: %d rows, raw and typed contents, max |diff| %.2g / %.2g" % (len(rows), w1, w2))

    # Bags (ids_lengths, ids [T]) give the HTTP /v1 route's scores for the same bags.
    bag_rows = []
    for j in range(8):
        slots = [list(b) for b in rows[j]["slots"]]
        slots[1] = slots[1] + rows[j + 8]["slots"][1]
        if j % 2:
            slots[4] = []
        bag_rows.append({"dense": rows[j]["dense"], "slots": slots})
    body = json.dumps({"instances": bag_rows}).encode()
    with urllib.request.urlopen(urllib.request.Request(
            "http://127.0.0.1:%d/v1/models/kv:predict" % HTTP_PORT, data=body,
            headers={"Content-Type": "application/json"}), timeout=30) as r:
        v1 = json.loads(r.read())["predictions"]
    flat = [as_int64(i) for r in bag_rows for b in r["slots"] for i in b]
    req = pb.ModelInferRequest(model_name="kv")
    req.inputs.add(name="ids_lengths", datatype="INT32", shape=[8, S]).contents.int_contents.extend(
        [len(b) for r in bag_rows for b in r["slots"]])
    req.inputs.add(name="ids", datatype="INT64", shape=[len(flat)]).contents.int64_contents.extend(flat)
    req.inputs.add(name="dense", datatype="FP32", shape=[8, D]).contents.fp32_contents.extend(
        [x for r in bag_rows for x in r["dense"]])
    close(outputs_of(stub.ModelInfer(req))["predictions"], v1, "bags: ids_lengths vs /v1")
    print("bags: ids_lengths matches /v1")

    # Concurrent clients (batched together on the server): each gets its own rows' scores.
    errors = []

    def client(c):
        try:
            ch = grpc.insecure_channel("127.0.0.1:%d" % GRPC_PORT)
            st = pb_grpc.GRPCInferenceServiceStub(ch)
            for n in range(20):
                a = (c * 41 + n * 17) % (len(rows) - 16)
                size = 1 + (c + n) % 16
                got = outputs_of(st.ModelInfer(request(rows[a:a + size], raw=bool(n % 2))))
                close(got["predictions"], scores[a:a + size], "client %d" % c)
            ch.close()
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))

    threads = [threading.Thread(target=client, args=(c,)) for c in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:3]
    print("8 concurrent clients: every answer their own")

    # Bad requests: the status, a message naming the input, and the server keeps serving.
    def edit(req, which, **changes):
        for t in req.inputs:
            if t.name == which:
                for key, value in changes.items():
                    if key == "shape":
                        del t.shape[:]
                        t.shape.extend(value)
                    else:
                        setattr(t, key, value)
        return req

    def without(req, name):
        keep = [t for t in req.inputs if t.name != name]
        out = pb.ModelInferRequest(model_name=req.model_name)
        for t in keep:
            out.inputs.add().CopyFrom(t)
        return out

    def typed(**kw):
        return request(rows[:2], raw=False, **kw)

    def raw(**kw):
        return request(rows[:2], raw=True, **kw)

    few = typed()
    del few.inputs[0].contents.fp32_contents[7:]
    wrong_field = typed()
    wrong_field.inputs[1].contents.ClearField("int64_contents")
    wrong_field.inputs[1].contents.fp32_contents.extend([1.0] * 12)
    short_raw = raw()
    short_raw.raw_input_contents[0] = short_raw.raw_input_contents[0][:31]
    one_raw = raw()
    del one_raw.raw_input_contents[1]
    both = raw()
    both.inputs[0].contents.fp32_contents.extend([0.5] * 8)
    one_row_dense = edit(raw(), "dense", shape=[1, D])
    one_row_dense.raw_input_contents[0] = one_row_dense.raw_input_contents[0][:4 * D]
    nan = raw()
    nan.raw_input_contents[0] = struct.pack("<8f", *([float("nan")] + [0.0] * 7))
    too_many = request(rows[:1] * 4097)
    past_limit = request(rows * 45)  # 17280 rows, > 1 MiB
    assert past_limit.ByteSize() > (1 << 20)
    INVALID, NOT_FOUND = grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND
    cases = [
        ("wrong datatype", edit(typed(), "dense", datatype="FP64"), INVALID, "input 'dense': wrong datatype FP64"),
        ("wrong ids datatype", edit(raw(), "ids", datatype="FP32"), INVALID, "input 'ids': wrong datatype FP32"),
        ("shape mismatch", edit(raw(), "dense", shape=[1, 2 * D]), INVALID,
         "input 'dense': shape [1, %d] does not match the model's [N, %d]" % (2 * D, D)),
        ("rows differ", one_row_dense, INVALID, "input 'dense' has 1 rows, input 'ids' has 2"),
        ("negative shape", edit(raw(), "ids", shape=[-2, S]), INVALID, "input 'ids'.shape: expected non-negative"),
        ("too few values", few, INVALID, "input 'dense': 7 values in contents.fp32_contents, shape [2, 4] needs 8"),
        ("values in another field", wrong_field, INVALID,
         "input 'ids': datatype INT64 takes its values in contents.int64_contents, got fp32_contents"),
        ("raw size", short_raw, INVALID, "input 'dense': raw_input_contents[0] holds 31 bytes, shape [2, 4] of FP32 needs 32"),
        ("raw count", one_raw, INVALID, "raw_input_contents: 1 entries for 2 inputs"),
        ("raw and contents", both, INVALID, "input 'dense': both contents (fp32_contents) and raw_input_contents"),
        ("a NaN", nan, INVALID, "input 'dense'[0]: not a finite FP32 value"),
        ("missing input", without(typed(), "ids"), INVALID, "missing input 'ids' (INT64 [N, 6])"),
        ("missing dense", without(typed(), "dense"), INVALID, "missing input 'dense' (FP32 [N, 4])"),
        ("unknown input", edit(typed(), "ids", name="idz"), INVALID, "unknown input 'idz'"),
        ("unknown output", raw(outputs=["probs"]), INVALID, "unknown output 'probs'"),
        ("no inputs", pb.ModelInferRequest(model_name="kv"), INVALID, "non-empty"),
        ("too many instances", too_many, INVALID, "4097 instances, at most 4096"),
        ("past --max-body-mb", past_limit, grpc.StatusCode.RESOURCE_EXHAUSTED, "larger than max"),
        ("unknown model", pb.ModelInferRequest(model_name="other"), NOT_FOUND, "no model named 'other'"),
        ("unknown version", raw(model_version="v0"), NOT_FOUND, "model 'kv' has no version 'v0'"),
    ]
    for what, req, code, text in cases:
        got, why = code_of(stub.ModelInfer, req)
        assert got == code and text in why, (what, got, why)
        res = stub.ModelInfer(request(rows[:1]))
        assert abs(outputs_of(res)["predictions"][0] - scores[0]) <= 1e-6, (what, "then")
        print("  %-26s %s %s" % (what, code.name, why[:100]))

    # Hot reload under gRPC load: every answer wholly one version, none failed; then a pin of the
    # old version is NOT_FOUND.
    expected = {version: scores, version2: scores2}
    stop, seen, errors = threading.Event(), [], []

    def loader(c):
        ch = grpc.insecure_channel("127.0.0.1:%d" % GRPC_PORT)
        st = pb_grpc.GRPCInferenceServiceStub(ch)
        n = 0
        while not stop.is_set():
            a = (c * 37 + n * 11) % (len(rows) - 16)
            size = 1 + n % 16
            try:
                res = st.ModelInfer(request(rows[a:a + size], raw=bool(n % 2)))
                seen.append((res.model_version, a, outputs_of(res)["predictions"]))
            except grpc.RpcError as e:
                errors.append((e.code(), e.details()))
            n += 1
        ch.close()

    threads = [threading.Thread(target=loader, args=(c,)) for c in range(4)]
    for t in threads:
        t.start()
    time.sleep(0.7)
    reload = urllib.request.Request("http://127.0.0.1:%d/admin/reload?dir=%s" % (HTTP_PORT, model2),
                                    method="POST", headers={"Authorization": "Bearer grpc-test-token"})
    with urllib.request.urlopen(reload, timeout=30) as r:
        assert r.status == 200, r.read()
    time.sleep(0.7)
    stop.set()
    for t in threads:
        t.join()
    assert not errors, errors[:3]
    versions = {v for v, _, _ in seen}
    assert versions == {version, version2}, versions
    for v, a, preds in seen:
        for j, x in enumerate(preds):
            assert abs(x - expected[v][a + j]) <= 1e-6, ("mixed or wrong version", v, a + j, x)
    code, why = code_of(stub.ModelInfer, request(rows[:1], model_version=version))
    assert code == NOT_FOUND and "serves version '%s'" % version2 in why, (code, why)
    res = stub.ModelInfer(request(rows[:3], model_version=version2))
    close(outputs_of(res)["predictions"], scores2[:3], "pinned to the new version")
    print("hot reload under gRPC load: %d calls, versions %s, none failed or mixed" % (len(seen), sorted(versions)))
    channel.close()

    # A clean stop (SIGTERM) with the gRPC port open.
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=20) == 0, open(log.name).read()[-2000:]

    # A model with several labels is refused as on the HTTP v2 route (ports 5314-5315).
    two = os.path.join(WORK, "two-labels")
    run("train", "--name", "kv2", "--slots", "6", "--dense-features", "4", "--vocab", "20000",
        "--labels", "[click, purchase]", "--train-batches", "10", "--test-batches", "1",
        "--batch-size", "128", "--export", two)
    log2 = open(os.path.join(WORK, "serve2.log"), "w")
    p2 = subprocess.Popen([SATRAP, "serve", "--model", two, "--port", "5315", "--grpc-port", "5314",
                           "--threads", "1"], stdout=log2, stderr=subprocess.STDOUT)
    procs.append(p2)
    stub2 = pb_grpc.GRPCInferenceServiceStub(grpc.insecure_channel("127.0.0.1:5314"))
    deadline = time.time() + 30
    while True:
        assert p2.poll() is None, open(log2.name).read()
        try:
            if stub2.ServerReady(pb.ServerReadyRequest(), timeout=2).ready:
                break
        except grpc.RpcError:
            pass
        assert time.time() < deadline, "the second server's gRPC port did not come up"
        time.sleep(0.1)
    req = request(rows[:1])
    req.model_name = "kv2"
    code, why = code_of(stub2.ModelInfer, req)
    assert code == INVALID and "several labels" in why and "/v1/models/kv2:predict" in why, (code, why)
    print("  %-26s %s %s" % ("several labels", code.name, why[:100]))
    print("grpc: ok")


if __name__ == "__main__":
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    try:
        main()
    finally:
        cleanup()
