#!/usr/bin/env python3
"""Buckets of a `perf record -g` profile: where the CPU went, for tests/bench/cluster_breakdown.sh.

usage: perf_buckets.py CLUSTER.perf EMBEDDED.perf CLUSTER_JSON EMBEDDED_JSON [CLUSTER_PIDS]
  CLUSTER_PIDS: comma-separated, to keep only those processes of a system-wide (-a) profile.

A sample with a TLS frame anywhere in its call chain counts as TLS, then one with a
serialisation frame as serialisation (so `memcpy` called by OpenSSL counts as TLS); any other goes
to the first bucket that one of its frames matches, from the leaf up. The
buckets' CPU comes from the samples' periods (cpu-clock: nanoseconds), per sample of the job
(the JSON lines' `samples`). Prints a table of both profiles, then
`cpu_per_sample cluster_us= embedded_us= cpu_ratio=`.
"""
import collections
import json
import os
import re
import subprocess
import sys

# (bucket, regex on "symbol dso"), tried in this order on each frame from the leaf up.
BUCKETS = [
    ("tls", r"libssl|libcrypto|\bSSL_|ssl3_|tls1_|aesni|gcm|chacha|sha256|EVP_"),
    ("serialisation", r"capnp|kj::|binary_serializer|binary_deserializer|caf::detail::stringification|"
                      r"inspect|satrap::.*(payload|encode|decode|to_wire|from_wire)|caf::message_data|"
                      r"caf::detail::.*(serialize|deserialize)|caf::.*save|caf::.*load"),
    ("middleman", r"caf::io::|caf::net::|basp|default_multiplexer|scribe|doorman|broker"),
    ("compute", r"openblas|sgemm|gemm|sgemv|blas|satrap::.*(dense|mlp|linear|dot|activation|relu|sigmoid|"
                r"adagrad|optimizer|forward|backward|loss|auc|average)"),
    ("embedding_store", r"satrap::.*(embedding|store|shard|row|slot|hash|gather|scatter)"),
    ("data", r"satrap::.*(synthetic|criteo|batch_source|data|teacher|generate|loader|rng|mt19937)|"
             r"std::mersenne|random"),
    ("copies", r"memcpy|memmove|__memcpy|__memmove|copy_user|rep_movs"),
    ("allocation", r"malloc|free|operator new|operator delete|_int_malloc|_int_free|tcache|cfree|"
                   r"mmap|munmap|brk|page_fault|clear_page|do_anonymous_page"),
    ("scheduler_and_waits", r"caf::scheduler|caf::policy|work_stealing|worker|resumable|futex|"
                            r"condition_variable|pthread_cond|schedule|sched_|pick_next|__switch_to|"
                            r"finish_task_switch|nanosleep|hrtimer|clock_nanosleep|epoll|poll"),
    ("kernel_net_syscalls_faults", r"\[kernel|\btcp_|\bip_|\bsock_|__sys_|do_syscall|entry_SYSCALL|skb|"
                               r"loopback|netif|net_rx|__x64_sys|syscall"),
    ("libm", r"libm\.so"),
    ("startup", r"_dl_|ld-linux"),
    ("actors_and_messages", r"caf::"),
    ("satrap_other", r"satrap::"),
]
TOP = int(os.environ.get("PERF_BUCKETS_TOP", "0"))  # > 0: also the top leaf frames
COMPILED = [(name, re.compile(rx)) for name, rx in BUCKETS]


def profile(path, pids=""):
    """bucket -> CPU seconds, total seconds (of these pids, comma-separated, when given)."""
    out = subprocess.run(["perf", "script", "-i", path, "-F", "period,ip,sym,dso"]
                         + (["--pid", pids] if pids else []),
                         capture_output=True, text=True, check=False).stdout
    buckets = collections.Counter()
    leaves = collections.Counter()
    total = 0.0
    for block in out.split("\n\n"):
        lines = [l.strip() for l in block.strip().splitlines() if l.strip()]
        if not lines:
            continue
        try:
            period = int(lines[0].split()[0])
        except ValueError:
            continue
        frames = lines[1:] if len(lines) > 1 else [lines[0]]
        sec = period / 1e9
        total += sec
        chosen = "other"
        # TLS and serialisation are what a frame works for, wherever it is in the chain.
        for name, rx in COMPILED[:2]:
            if any(rx.search(f) for f in frames):
                chosen = name
                break
        for f in frames if chosen == "other" else []:
            for name, rx in COMPILED:
                if rx.search(f):
                    chosen = name
                    break
            if chosen != "other":
                break
        buckets[chosen] += sec
        leaves[(chosen, frames[0].split(None, 1)[-1][:90])] += sec
    if TOP:
        print(f"-- {path}: top leaf frames per bucket")
        for (b, leaf), sec in leaves.most_common(TOP):
            print(f"   {100 * sec / max(total, 1e-9):5.1f}% {b:22} {leaf}")
    return buckets, total


def samples(path):
    return json.loads(open(path).read().strip().splitlines()[-1])["samples"]


def main():
    cb, ct = profile(sys.argv[1], sys.argv[5] if len(sys.argv) > 5 else "")
    eb, et = profile(sys.argv[2])
    cs, es = samples(sys.argv[3]), samples(sys.argv[4])
    names = [n for n, _ in BUCKETS] + ["other"]
    print(f"{'bucket':26} {'cluster %':>9} {'us/sample':>9} {'embedded %':>10} {'us/sample':>9}")
    for n in names:
        if cb[n] == 0 and eb[n] == 0:
            continue
        print(f"{n:26} {100 * cb[n] / max(ct, 1e-9):9.1f} {cb[n] / cs * 1e6:9.3f} "
              f"{100 * eb[n] / max(et, 1e-9):10.1f} {eb[n] / es * 1e6:9.3f}")
    print(f"{'total':26} {100.0:9.1f} {ct / cs * 1e6:9.3f} {100.0:10.1f} {et / es * 1e6:9.3f}")
    print(f"cpu_per_sample cluster_us={ct / cs * 1e6:.3f} embedded_us={et / es * 1e6:.3f} "
          f"cpu_ratio={(ct / cs) / (et / es):.3f}")


if __name__ == "__main__":
    main()
