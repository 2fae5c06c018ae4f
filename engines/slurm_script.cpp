#include "engines/slurm_script.hpp"

#include "engines/job_checkpoints.hpp"
#include "runtime/error.hpp"

#include <algorithm>
#include <cstdlib>
#include <sstream>

namespace satrap {

namespace {

// 'text' for bash, whatever it holds.
std::string shell_quote(const std::string& text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

// A heredoc delimiter that is no line of `text`.
std::string heredoc_end(const std::string& text, const std::string& base) {
  auto end = base;
  for (int i = 1;; ++i) {
    std::istringstream in(text);
    std::string line;
    bool clash = false;
    while (std::getline(in, line))
      clash = clash || line == end;
    if (!clash)
      return end;
    end = base + "_" + std::to_string(i);
  }
}

std::string heredoc(const std::string& file, const std::string& text, const std::string& base) {
  auto body = text.empty() || text.back() == '\n' ? text : text + "\n";
  auto end = heredoc_end(body, base);
  return "cat > " + file + " <<'" + end + "' || exit 1\n" + body + end + "\n";
}

// Slurm's --mem in MiB (at least 1).
std::string slurm_memory(uint64_t bytes) {
  return std::to_string(std::max<uint64_t>(1, bytes >> 20)) + "M";
}

// The manifest's node entries in order: group name and its nodes.
struct entry {
  std::string group;
  std::vector<const node_spec*> nodes;
};

std::vector<entry> entries_of(const manifest& m) {
  std::vector<entry> out;
  for (auto& n : m.nodes) {
    auto it =
      std::find_if(out.begin(), out.end(), [&](const entry& e) { return e.group == n.group; });
    if (it == out.end()) {
      out.push_back({n.group, {}});
      it = out.end() - 1;
    }
    it->nodes.push_back(&n);
  }
  return out;
}

const std::string* env_get(const slurm_env& env, const std::string& key) {
  auto it = env.find(key);
  return it == env.end() || it->second.empty() ? nullptr : &it->second;
}

// Component k's Slurm nodes, or an error naming the variable.
caf::expected<std::vector<std::string>> component_nodes(const slurm_env& env, size_t k) {
  auto key = "SLURM_JOB_NODELIST_HET_GROUP_" + std::to_string(k);
  auto list = env_get(env, key);
  if (!list)
    return make_error(errc::invalid_config,
                      "Slurm: " + key
                        + " is not set: run satrap under the batch script of `satrap slurm` (a "
                          "heterogeneous job: the head, then one component per node entry)");
  return slurm_hostlist_expand(*list);
}

// SATRAP_SLURM_ADDRESSES ("name=addr name=addr ...") as a map.
std::map<std::string, std::string> addresses_of(const slurm_env& env) {
  std::map<std::string, std::string> out;
  if (auto text = env_get(env, "SATRAP_SLURM_ADDRESSES")) {
    std::istringstream in(*text);
    std::string pair;
    while (in >> pair)
      if (auto eq = pair.find('='); eq != std::string::npos && eq > 0 && eq + 1 < pair.size())
        out[pair.substr(0, eq)] = pair.substr(eq + 1);
  }
  return out;
}

}  // namespace

caf::expected<std::vector<std::string>> slurm_hostlist_expand(const std::string& list) {
  auto bad = [&](const std::string& why) {
    return make_error(errc::invalid_config, "Slurm host list '" + list + "': " + why);
  };
  std::vector<std::string> out;
  size_t i = 0;
  while (i < list.size()) {
    // One name: a prefix, then optional [ranges] and more text, up to a comma outside brackets.
    std::vector<std::string> names{""};
    while (i < list.size() && list[i] != ',') {
      if (list[i] == ']')
        return bad("']' without '['");
      if (list[i] != '[') {
        for (auto& n : names)
          n += list[i];
        ++i;
        continue;
      }
      auto close = list.find(']', i);
      if (close == std::string::npos)
        return bad("'[' without ']'");
      std::vector<std::string> suffixes;
      std::istringstream ranges(list.substr(i + 1, close - i - 1));
      std::string range;
      while (std::getline(ranges, range, ',')) {
        auto dash = range.find('-');
        auto lo_text = range.substr(0, dash);
        auto hi_text = dash == std::string::npos ? lo_text : range.substr(dash + 1);
        auto digits = [](const std::string& s) {
          return !s.empty() && s.size() <= 9
                 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
        };
        if (!digits(lo_text) || !digits(hi_text))
          return bad("'" + range + "' is not a number or a range of numbers");
        long lo = std::atol(lo_text.c_str());
        long hi = std::atol(hi_text.c_str());
        if (hi < lo || hi - lo >= 100000)
          return bad("range '" + range + "' is empty or too large");
        for (long v = lo; v <= hi; ++v) {
          auto s = std::to_string(v);
          if (s.size() < lo_text.size())  // zero-padded to the width written: sn[01-10]
            s.insert(0, lo_text.size() - s.size(), '0');
          suffixes.push_back(s);
        }
      }
      if (suffixes.empty())
        return bad("empty brackets");
      std::vector<std::string> next;
      for (auto& n : names)
        for (auto& s : suffixes)
          next.push_back(n + s);
      names = std::move(next);
      i = close + 1;
    }
    for (auto& n : names) {
      if (n.empty())
        return bad("an empty name");
      out.push_back(n);
    }
    ++i;  // the comma
  }
  if (out.empty())
    return bad("no host");
  return out;
}

caf::error slurm_apply_allocation(manifest& m, const slurm_env& env) {
  auto entries = entries_of(m);
  auto addresses = addresses_of(env);
  auto address = [&](const std::string& slurm_node) {
    auto it = addresses.find(slurm_node);
    return it == addresses.end() ? slurm_node : it->second;
  };
  auto head = component_nodes(env, 0);
  if (!head)
    return head.error();
  m.head.host = address(head->front());
  for (size_t k = 0; k < entries.size(); ++k) {
    auto hosts = component_nodes(env, k + 1);
    if (!hosts)
      return hosts.error();
    if (hosts->size() != entries[k].nodes.size())
      return make_error(errc::invalid_config,
                        "Slurm: component " + std::to_string(k + 1) + " has "
                          + std::to_string(hosts->size()) + " nodes, the manifest's entry '"
                          + entries[k].group + "' " + std::to_string(entries[k].nodes.size())
                          + " (one Slurm node per satrap node)");
    for (size_t i = 0; i < hosts->size(); ++i) {
      auto& n = const_cast<node_spec&>(*entries[k].nodes[i]);
      n.host = address((*hosts)[i]);
    }
  }
  return {};
}

caf::expected<std::string> slurm_node_name(const manifest& m, const slurm_env& env) {
  auto self = env_get(env, "SLURMD_NODENAME");
  if (!self)
    return make_error(errc::invalid_config,
                      "Slurm: SLURMD_NODENAME is not set: without --name, satrap node must run "
                      "as a task of `satrap slurm`'s batch job");
  auto entries = entries_of(m);
  std::vector<std::pair<size_t, size_t>> matches;  // entry, index in its component
  for (size_t k = 0; k < entries.size(); ++k) {
    auto hosts = component_nodes(env, k + 1);
    if (!hosts)
      return hosts.error();
    if (auto at = std::find(hosts->begin(), hosts->end(), *self); at != hosts->end())
      matches.emplace_back(k, static_cast<size_t>(at - hosts->begin()));
  }
  if (matches.size() != 1)
    return make_error(errc::invalid_config,
                      "Slurm: this task's node '" + *self + "' is in "
                        + (matches.empty() ? "no" : "more than one")
                        + " node component of the job (the head is component 0, node entries "
                          "1..); give --name");
  auto [k, i] = matches.front();
  auto& e = entries[k];
  if (i >= e.nodes.size())
    return make_error(errc::invalid_config, "Slurm: component " + std::to_string(k + 1) + " has "
                                              + std::to_string(i + 1) + "+ nodes, the entry '"
                                              + e.group + "' " + std::to_string(e.nodes.size()));
  return e.nodes[i]->name;
}

caf::expected<std::string> slurm_render(const manifest& m, const slurm_options& o) {
  auto entries = entries_of(m);
  if (entries.empty())
    return make_error(errc::invalid_config, "the manifest has no nodes");
  for (auto& e : entries)
    for (auto* n : e.nodes)
      if (n->resources.cores < 1)
        return make_error(
          errc::invalid_config,
          "node '" + n->name + "': Slurm needs at least one core (resources.cores)");
  auto state = o.state_dir.empty() ? ".satrap/" + m.cluster : o.state_dir;
  auto certs =
    m.security.certs.empty() ? std::string("\"$state/certs\"") : shell_quote(m.security.certs);
  std::ostringstream s;
  s << "#!/bin/bash\n"
    << "# The satrap cluster '" << m.cluster << "'" << (o.source.empty() ? "" : " of " + o.source)
    << " as one Slurm job, rendered by `satrap slurm`.\n"
    << "# A heterogeneous job: component 0 the head, component k the manifest's k-th node entry,\n"
    << "# one Slurm node per satrap node. Submit with `sbatch`; the job's exit status is\n"
    << "# `satrap submit --follow`'s (0 when the satrap job SUCCEEDED). Logs, token, certificates\n"
    << "# and the head's job table are in the state dir, which every node must see (shared\n"
    << "# file system). SATRAP_BIN and SATRAP_STATE_DIR override the binary and the state dir.\n"
    << "#SBATCH --job-name=satrap-" << m.cluster << "\n"
    << "#SBATCH --signal=B:USR1@" << o.signal_s << "\n";
  if (!o.time.empty())
    s << "#SBATCH --time=" << o.time << "\n";
  if (!o.partition.empty())
    s << "#SBATCH --partition=" << o.partition << "\n";
  s << "#SBATCH --nodes=1 --ntasks-per-node=1 --cpus-per-task=" << o.head_cpus
    << " --mem=" << slurm_memory(o.head_memory_bytes) << "   # head\n";
  for (auto& e : entries) {
    auto& r = e.nodes.front()->resources;
    s << "#SBATCH hetjob\n"
      << "#SBATCH --nodes=" << e.nodes.size() << " --ntasks-per-node=1 --cpus-per-task=" << r.cores
      << " --mem=" << slurm_memory(r.memory_bytes);
    if (r.gpus > 0)
      s << " --gpus-per-node=" << r.gpus;
    s << "   # " << e.group << ": " << e.nodes.front()->name
      << (e.nodes.size() > 1 ? " .. " + e.nodes.back()->name : "") << "\n";
  }
  s << "set -u\n"
    << "satrap=${SATRAP_BIN:-" << shell_quote(o.satrap) << "}\n"
    << "state=${SATRAP_STATE_DIR:-" << shell_quote(state) << "}\n"
    << "if [ \"${SLURM_HET_SIZE:-0}\" != " << entries.size() + 1 << " ]; then\n"
    << "  echo \"satrap-slurm: expected a heterogeneous job of " << entries.size() + 1
    << " components (submit this script with sbatch)\" >&2; exit 2\n"
    << "fi\n"
    << "mkdir -p \"$state\" && chmod 700 \"$state\" || exit 1\n"
    << "job=\"$state/job-$SLURM_JOB_ID.yaml\"\n"
    << heredoc("\"$state/manifest.yaml\"", o.manifest_yaml, "SATRAP_MANIFEST_END")
    << heredoc("\"$job\"",
               job_with_checkpoint_dir(o.job_yaml.empty() ? "{}\n" : o.job_yaml,
                                       state + "/checkpoints", o.checkpoint_every_s,
                                       "checkpoint.dir in the state dir, set by satrap slurm (the "
                                       "job had none)"),
               "SATRAP_JOB_END")
    << "export SATRAP_SLURM=1 SATRAP_MANIFEST=\"$state/manifest.yaml\"\n"
    << "(umask 077; [ -s \"$state/admin.token\" ] || od -An -N16 -tx1 /dev/urandom | tr -d ' \\n' "
       "> \"$state/admin.token\") || exit 1\n";
  if (m.security.tls == tls_mode::required)
    s << "\"$satrap\" certs --manifest \"$SATRAP_MANIFEST\" --out " << certs << " || exit 1\n";
  s << R"(# The Slurm nodes' addresses (NodeAddr), so that their names need not resolve.
SATRAP_SLURM_ADDRESSES=
for g in $(seq 0 $((SLURM_HET_SIZE - 1))); do
  list=SLURM_JOB_NODELIST_HET_GROUP_$g
  for n in $(scontrol show hostnames "${!list}"); do
    a=$(scontrol show node -o "$n" | sed -n 's/.* NodeAddr=\([^ ]*\).*/\1/p')
    SATRAP_SLURM_ADDRESSES+="$n=${a:-$n} "
  done
done
export SATRAP_SLURM_ADDRESSES
stop="$state/.stop-$SLURM_JOB_ID"
rm -f "$stop"
# keep LOG SRUN-ARGS...: one satrap process as a job step, started again when it exits (its
# restarts in $SATRAP_NODE_RESTARTS) until the script stops; SIGTERM stops it and its step.
keep() {
  local log=$1 restarts=0 delay=1 step=
  shift
  trap '[ -n "$step" ] && kill -TERM $step 2>/dev/null; wait; exit 0' TERM
  while :; do
    SATRAP_NODE_RESTARTS=$restarts srun --kill-on-bad-exit=0 "$@" >> "$log" 2>&1 &
    step=$!
    wait $step
    step=
    [ -e "$stop" ] && return
    if [ $restarts -ge )"
    << o.max_restarts << R"( ]; then
      echo "satrap-slurm: $log: gave up after $restarts restarts" >&2
      return
    fi
    restarts=$((restarts + 1))
    echo "satrap-slurm: $log: step exited, restart $restarts in $delay s" >&2
    sleep $delay
    delay=$((delay < 8 ? delay * 2 : 8))
  done
}
steps=()
stop_all() {
  touch "$stop"
  kill -TERM "${steps[@]}" ${follow:-} 2>/dev/null
  wait
}
trap 'stop_all; exit 143' TERM INT
keep "$state/$SLURM_JOB_ID-head.log" --het-group=0 --nodes=1 --ntasks=1 --cpus-per-task=)"
    << o.head_cpus << R"( \
  "$satrap" head --state-dir "$state" --log-level info &
steps+=($!)
)";
  for (size_t k = 0; k < entries.size(); ++k) {
    auto& e = entries[k];
    s << "for n in $(scontrol show hostnames \"$SLURM_JOB_NODELIST_HET_GROUP_" << k + 1
      << "\"); do   # " << e.group << "\n"
      << "  keep \"$state/$SLURM_JOB_ID-$n.log\" --het-group=" << k + 1
      << " --nodes=1 --ntasks=1 --nodelist=\"$n\" --cpus-per-task="
      << e.nodes.front()->resources.cores << " \\\n"
      << "    \"$satrap\" node --state-dir \"$state\" --wait " << o.node_wait_s
      << " --log-level info &\n"
      << "  steps+=($!)\n"
      << "done\n";
  }
  s << R"(# The head answers once its step runs; then the job, followed to its end.
for i in $(seq )"
    << o.head_wait_s << R"(); do
  "$satrap" status --state-dir "$state" > /dev/null 2>&1 && break
  sleep 1
done
follow_out="$state/$SLURM_JOB_ID-submit.out"
"$satrap" submit --state-dir "$state" "$job" --follow --json > "$follow_out" &
follow=$!
# USR1 (--signal, before the time limit): a checkpoint of the job now.
checkpoint_now() {
  id=$(sed -n 's/^submitted job \([^ ]*\) .*/\1/p' "$follow_out")
  [ -n "$id" ] && "$satrap" checkpoint --state-dir "$state" "$id"
}
trap checkpoint_now USR1
while :; do
  wait $follow
  rc=$?
  kill -0 $follow 2>/dev/null || break
done
cat "$follow_out"
stop_all
exit $rc
)";
  return s.str();
}

}  // namespace satrap
