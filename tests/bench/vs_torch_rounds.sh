# Sourced by the satrap-against-PyTorch benches (train_vs_torch.sh, multihot_vs_torch.sh).
# vs_torch_rounds ROUNDS [satrap args...]: ROUNDS rounds of run_satrap (given the args), run_torch 1
# and run_torch 2 (each prints its samples/s), interleaved with the order rotating every round so
# the machine's noise hits all three; then the line
#   ratio=<median over rounds of satrap / max(torch 1 thread, torch 2 threads)> satrap_sps=...
#   torch_best_sps=... torch_1t_sps=... torch_2t_sps=... rounds=N
# The caller defines run_satrap and run_torch.
vs_torch_rounds() {
  local rounds=$1 i k s t1 t2
  shift
  local s_sps=() t1_sps=() t2_sps=()
  for i in $(seq 1 "$rounds"); do
    s="" t1="" t2=""
    for k in 0 1 2; do
      case $(( (i + k) % 3 )) in
        0) s=$(run_satrap "$@") ;;
        1) t1=$(run_torch 1) ;;
        2) t2=$(run_torch 2) ;;
      esac
    done
    echo "round $i: satrap ${s} samples/s, torch 1 thread ${t1} samples/s, torch 2 threads ${t2} samples/s"
    s_sps+=("$s") t1_sps+=("$t1") t2_sps+=("$t2")
  done
  python3 - "${s_sps[*]}" "${t1_sps[*]}" "${t2_sps[*]}" <<'PY'
import statistics, sys
s = [float(x) for x in sys.argv[1].split()]
t1 = [float(x) for x in sys.argv[2].split()]
t2 = [float(x) for x in sys.argv[3].split()]
best = [max(a, b) for a, b in zip(t1, t2)]
r = [a / b for a, b in zip(s, best)]
m = statistics.median
print(f"ratio={m(r):.2f} satrap_sps={m(s):.0f} torch_best_sps={m(best):.0f} "
      f"torch_1t_sps={m(t1):.0f} torch_2t_sps={m(t2):.0f} rounds={len(r)}")
PY
}
