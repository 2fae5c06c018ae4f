#!/usr/bin/env bash
# One prepared run of the CUDA path on a GPU machine, in one call well inside 8 minutes: the
# packages, a build of satrap_gpu_test, gpu_dlrm_bench and satrap in build-gpu (SATRAP_CUDA=ON,
# sm_90 for H100/H200), then every GPU test, gpu_dlrm_bench at batch 8192 and 65536 in fp32 and
# bf16, and `satrap train --device cuda` against `--device cpu` on the default job at staleness 0
# (samples/s and test AUC of each; goal |delta AUC| <= 0.002), then a short `--device cuda` run at
# staleness 2 (the overlapped batch copies). One "gpu_check: figure ..." line per
# figure. Logs go to build-gpu/gpu-check/ and, when $OUT is set, to $OUT too. Exit status: 0 when
# the GPU test passed (not skipped) and every figure was measured within its goal, else non-zero.
#
# usage: ops/gpu_check.sh                 on the GPU machine
#        ops/gpu_check.sh --fetch-debs    on a networked Debian 12 machine, before: downloads the
#                                         .deb files of ops/setup.sh's libraries into .debs/ (git
#                                         ignores it locally) for a GPU machine that can reach no
#                                         package registry; carry .debs there
# Environment: SATRAP_GPU_ARCH (default 90), JOBS (default nproc), SATRAP_GPU_BUILD_DIR (default
# build-gpu);
# for testing the bundle where the packages are installed: SATRAP_GPU_FORCE_DEBS=1 and
# SATRAP_DEPS_SYSROOT (default /opt/satrap-deps).
#
# Packages: when ops/setup.sh's packages are all installed, nothing is installed. Else, when
# .debs/ holds a bundle, it is unpacked into /opt/satrap-deps (never over /) and CMake, the
# compiler and the loader are pointed there. Else ops/setup.sh runs (apt-get; it also builds the
# whole project, into build-gpu).
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${SATRAP_GPU_BUILD_DIR:-$root/build-gpu}
arch=${SATRAP_GPU_ARCH:-90}
jobs=${JOBS:-$(nproc 2>/dev/null || echo 16)}
logs="$build/gpu-check"
cuda_args=(-DCMAKE_BUILD_TYPE=Release -DSATRAP_CUDA=ON "-DCMAKE_CUDA_ARCHITECTURES=$arch")

# The library packages of ops/setup.sh (its `packages=(...)` list, tools left out).
setup_packages() {
  sed -n '/^packages=(/,/)/p' "$root/ops/setup.sh" | sed 's/#.*//; s/packages=(//; s/)//' |
    tr -s ' \n' '\n' | grep -v '^$'
}
tools='^(build-essential|cmake|ccache|pkg-config|git|curl|procps|python3)$'

if [ "${1:-}" = "--fetch-debs" ]; then
  set -e
  cd "$root"
  grep -qxF '/.debs/' .git/info/exclude 2>/dev/null || echo '/.debs/' >>.git/info/exclude
  mkdir -p .debs
  libs=$(setup_packages | grep -Ev "$tools")
  # The -dev packages, the libraries they need, and capnp's compiler; not the base system.
  base='^(libopenblas.*-(openmp|serial)-dev|libopenblas0-(openmp|serial)|libc-dev-bin|libkrb5.*|libgssapi.*|libk5crypto.*|libcom-err.*|libkeyutils.*|libc6|libc6-dev|libgcc-s1|libstdc\+\+6|libstdc\+\+-.*-dev|zlib1g|libssl3|libssl-dev|libgfortran5|libquadmath0|libgomp1|debconf|dpkg|perl.*|libcrypt.*|linux-libc-dev|libnsl.*|libtirpc.*|rpcsvc-proto|gcc.*|g\+\+.*|cpp.*|catch2|<.*>)$'
  # shellcheck disable=SC2086  # (word lists)
  deps=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
           --no-replaces --no-enhances $libs 2>/dev/null | sed -n 's/^ *|\?Depends: //p; /^[a-z0-9]/p' |
         sort -u | grep -Ev "$base")
  # shellcheck disable=SC2086
  (cd .debs && apt-get download $deps)
  echo "gpu_check: $(find .debs -name '*.deb' | wc -l) packages, $(du -sh .debs | cut -f1) in .debs/"
  exit 0
fi

mkdir -p "$logs"
summary="$logs/summary.txt"
: >"$summary"
note() { echo "gpu_check: $*" | tee -a "$summary"; }
finish() {
  local rc=$1
  note "exit $rc"
  if [ -n "${OUT:-}" ]; then cp "$logs"/*.txt "$OUT"/ 2>/dev/null; fi
  exit "$rc"
}

note "host $(hostname) cores $(nproc) arch sm_$arch jobs $jobs at $(date -u +%FT%TZ)"
{ nvidia-smi 2>&1 || echo "nvidia-smi failed"; } >"$logs/nvidia_smi.txt"
head -15 "$logs/nvidia_smi.txt"
export PATH="$PATH:/usr/local/cuda/bin"
command -v nvcc >/dev/null && note "nvcc: $(nvcc --version | tail -1)"
# NCCL: beside CUDA, or else the first nccl.h found in Python's packages (the nvidia-nccl wheel)
# or /usr, /opt; CMake looks under $NCCL_ROOT.
cuda_include=$(dirname "$(dirname "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")")/include
if [ -z "${NCCL_ROOT:-}" ] && [ ! -e "$cuda_include/nccl.h" ]; then
  # shellcheck disable=SC2046
  nccl_h=$(find $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null) \
             /usr/include /usr/local /opt -name nccl.h 2>/dev/null | head -1)
  if [ -n "$nccl_h" ]; then
    NCCL_ROOT=$(dirname "$(dirname "$nccl_h")")
    export NCCL_ROOT
    export LD_LIBRARY_PATH="$NCCL_ROOT/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
fi
note "NCCL: ${NCCL_ROOT:-beside CUDA ($cuda_include)}"
# One machine: NCCL's bootstrap on loopback, and its warnings in the test's log.
export NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-lo} NCCL_DEBUG=${NCCL_DEBUG:-WARN}

# ---- packages ----
missing=()
for p in $(setup_packages); do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
missing_libs=$(printf '%s\n' "${missing[@]}" | grep -Ev "$tools" | tr '\n' ' ')
if [ -z "${missing_libs// /}" ] && [ -z "${SATRAP_GPU_FORCE_DEBS:-}" ]; then
  note "packages: all of ops/setup.sh's libraries are installed"
elif ls "$root"/.debs/*.deb >/dev/null 2>&1; then
  sysroot=${SATRAP_DEPS_SYSROOT:-/opt/satrap-deps}
  note "packages: missing $missing_libs; unpacking $(find "$root/.debs" -name '*.deb' | wc -l) .debs into $sysroot"
  mkdir -p "$sysroot"
  for f in "$root"/.debs/*.deb; do dpkg-deb -x "$f" "$sysroot" || note "could not unpack $f"; done
  multiarch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
  # OpenBLAS's libblas.so / libopenblas.so are alternatives (links made by postinst): make them.
  for d in "$sysroot/usr/lib/$multiarch"/openblas-*; do
    [ -d "$d" ] || continue
    for so in libblas.so libblas.so.3 libopenblas.so libopenblas.so.0 liblapack.so liblapack.so.3; do
      [ -e "$d/$so" ] && [ ! -e "$sysroot/usr/lib/$multiarch/$so" ] && ln -s "$d/$so" "$sysroot/usr/lib/$multiarch/$so"
    done
    blas_include="$sysroot/usr/include/$multiarch/$(basename "$d")"
    [ -d "$blas_include" ] && export CPATH="$blas_include${CPATH:+:$CPATH}"
  done
  export CMAKE_PREFIX_PATH="$sysroot/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
  export PATH="$sysroot/usr/bin:$PATH"
  export LD_LIBRARY_PATH="$sysroot/usr/lib/$multiarch:$sysroot/lib/$multiarch${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export LIBRARY_PATH="$sysroot/usr/lib/$multiarch${LIBRARY_PATH:+:$LIBRARY_PATH}"
  export CPATH="$sysroot/usr/include${CPATH:+:$CPATH}"
  cuda_args+=("-DCMAKE_INCLUDE_PATH=$sysroot/usr/include" "-DCMAKE_LIBRARY_PATH=$sysroot/usr/lib/$multiarch")
elif [ -x "$root/ops/setup.sh" ]; then
  note "packages: missing $missing_libs; running ops/setup.sh (apt-get, then a full build in build-gpu)"
  timeout 900 "$root/ops/setup.sh" --build-dir "$build" -- "${cuda_args[@]}" >"$logs/setup.txt" 2>&1 ||
    { tail -20 "$logs/setup.txt"; note "ops/setup.sh failed (no registry? see ops/gpu_check.sh --fetch-debs)"; finish 3; }
else
  note "packages: missing $missing_libs and no way to install them"
  finish 3
fi

# ---- configure and build ----
generator=()
if [ ! -f "$build/CMakeCache.txt" ] && command -v ninja >/dev/null; then generator=(-G Ninja); fi
t0=$(date +%s)
if ! cmake -S "$root" -B "$build" "${generator[@]}" "${cuda_args[@]}" >"$logs/configure.txt" 2>&1; then
  tail -30 "$logs/configure.txt"
  note "configure failed (see configure.txt)"
  finish 4
fi
grep "satrap: CUDA path" "$logs/configure.txt" | tee -a "$summary"
if ! cmake --build "$build" --target satrap_gpu_test gpu_dlrm_bench satrap -j "$jobs" >"$logs/build.txt" 2>&1; then
  grep -E "error|Error" "$logs/build.txt" | head -30
  note "build failed (see build.txt)"
  finish 5
fi
note "configure + build of satrap_gpu_test, gpu_dlrm_bench and satrap: $(( $(date +%s) - t0 )) s"
grep -i "warning" "$logs/build.txt" | head -10 | tee -a "$summary"
failures=0

# ---- every GPU test (each model against its CPU twin, mixed precision, the staged copies against
# the synchronous ones bit for bit, NCCL), via CTest too ----
timeout 300 "$build/bin/satrap_gpu_test" --duration=true >"$logs/gpu_test.txt" 2>&1
test_rc=$?
grep -vE "^\s*$" "$logs/gpu_test.txt" | grep -E "satrap_gpu_test on|ERROR|FAILED|CHECK|worst|relative L2|mean loss|test cases|assertions|Status|SKIPPED" | head -60
note "figure gpu_test: satrap_gpu_test exit $test_rc (0 passed, 77 skipped: no device)"
grep -E "mean loss" "$logs/gpu_test.txt" | sed 's/^/gpu_check: figure mixed_precision: /' | tee -a "$summary"
# The overlapped copies' bit-for-bit comparison, by name (a failure shows as a doctest ERROR above).
grep -E "staged|values differ" "$logs/gpu_test.txt" | head -10 | tee -a "$summary"
[ "$test_rc" -eq 0 ] || failures=$((failures + 1))
ctest --test-dir "$build" -L gpu --output-on-failure >"$logs/ctest_gpu.txt" 2>&1
note "figure ctest_gpu: $(grep -E 'tests passed|tests failed' "$logs/ctest_gpu.txt" | head -1)"

# ---- the dense step alone: the Criteo Kaggle DLRM shape, batch 8192 and 65536, fp32 and bf16 ----
# (GPU only: cpu_seconds 0; goal 1.5M samples/s at 65536 in bf16 on one H200)
bench_rc=0
for batch in 8192 65536; do
  for precision in fp32 bf16; do
    steps=$(( batch >= 65536 ? 60 : 300 ))
    timeout 120 "$build/bin/gpu_dlrm_bench" "$steps" 0 "$batch" "$precision" \
      >"$logs/gpu_bench_${batch}_${precision}.txt" 2>&1
    rc=$?
    [ "$rc" -eq 0 ] || bench_rc=$rc
    line=$(grep "^gpu_dlrm_bench " "$logs/gpu_bench_${batch}_${precision}.txt" | tail -1)
    sps=$(echo "$line" | sed -n 's/.*gpu_samples_per_sec=\([0-9]*\).*/\1/p')
    note "figure gpu_dlrm_bench batch=$batch precision=$precision samples_per_sec=${sps:-none} exit=$rc"
    [ -n "$line" ] && echo "$line" >>"$summary"
  done
done
[ "$bench_rc" -eq 0 ] || failures=$((failures + 1))
# The same shape on the CPU for the ratio (a few seconds, batch 8192).
timeout 120 "$build/bin/gpu_dlrm_bench" 50 5 8192 fp32 >"$logs/gpu_bench_cpu.txt" 2>&1
note "figure cpu_dense batch=8192 samples_per_sec=$(sed -n 's/.*cpu_samples_per_sec=\([0-9]*\).*/\1/p' "$logs/gpu_bench_cpu.txt")"

# ---- the whole pipeline: the default job at staleness 0, dense trainers on the GPU vs the CPU ----
json_field() {  # json_field FILE KEY: KEY of the last JSON line of FILE
  python3 -c 'import json,sys; print(json.loads([l for l in open(sys.argv[1]) if l.startswith("{")][-1])[sys.argv[2]])' "$1" "$2" 2>/dev/null ||
    sed -n "s/.*\"$2\":\([0-9.eE+-]*\).*/\1/p" "$1" | tail -1
}
for device in cuda cpu; do
  timeout 200 "$build/bin/satrap" train --device "$device" --staleness 0 --json >"$logs/train_$device.txt" 2>&1
  rc=$?
  auc=$(json_field "$logs/train_$device.txt" test_auc)
  sps=$(json_field "$logs/train_$device.txt" samples_per_sec)
  note "figure train device=$device staleness=0 samples_per_sec=${sps:-none} test_auc=${auc:-none} exit=$rc"
  eval "auc_$device=\${auc:-}"
done
# The overlapped copies end to end: at staleness 2 a GPU trainer stages batch N+1 while N computes
# (at staleness 0 above there is never a next batch to stage). A short run; its AUC is logged only.
timeout 100 "$build/bin/satrap" train --device cuda --staleness 2 --train-batches 2000 --json \
  >"$logs/train_cuda_staged.txt" 2>&1
rc=$?
note "figure train_staged device=cuda staleness=2 batches=2000 samples_per_sec=$(json_field "$logs/train_cuda_staged.txt" samples_per_sec) test_auc=$(json_field "$logs/train_cuda_staged.txt" test_auc) exit=$rc"
[ "$rc" -eq 0 ] || failures=$((failures + 1))
if [ -n "${auc_cuda:-}" ] && [ -n "${auc_cpu:-}" ]; then
  delta=$(python3 -c "print(abs($auc_cuda - $auc_cpu))" 2>/dev/null || echo unknown)
  verdict=$(python3 -c "print('ok' if abs($auc_cuda - $auc_cpu) <= 0.002 else 'MISSED')" 2>/dev/null || echo unknown)
  note "figure train_auc_delta |cuda-cpu|=$delta (goal <= 0.002): $verdict"
  [ "$verdict" = ok ] || failures=$((failures + 1))
else
  note "figure train_auc_delta: a run gave no test AUC (see train_cuda.txt, train_cpu.txt)"
  failures=$((failures + 1))
fi

if [ "$test_rc" -eq 77 ]; then note "the GPU test was SKIPPED: no usable CUDA device"; finish 6; fi
if [ "$test_rc" -ne 0 ]; then finish 1; fi
if [ "$failures" -ne 0 ]; then finish 2; fi
finish 0
