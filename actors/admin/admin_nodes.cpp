// The admin's node registry: registration (identity, token, cluster, version, manifest),
// heartbeats with the nodes' actor statistics, and losing a node (heartbeat timeout, connection).
#include "actors/admin/admin_state.hpp"
#include "runtime/error.hpp"
#include "runtime/peer_identity.hpp"
#include "runtime/secrets.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace satrap::admin_detail {

caf::result<std::string> on_register(self_ptr self, node_info& info) {
  auto& st = self->state;
  auto refuse = [&](const std::string& why) -> caf::result<std::string> {
    ++st.registrations_refused;
    ++st.refused["register"];
    spdlog::warn("node_refused name={} peer={} reason=\"{}\"", info.name, peer_text(self), why);
    return make_error(errc::invalid_config, why);
  };
  // Identity first: the agent must live in the process that sends this, and that process must
  // hold the node's token; a live node's name is not taken over by another process.
  // (An anonymous message has no sender; a remote sender always has its process's node id.)
  auto& sender = self->current_sender();
  if (!info.agent || !sender || info.agent.node() != sender->node())
    return refuse("node '" + info.name + "': the agent does not belong to the process that "
                  "registers it");
  // With TLS, the process must hold this node's certificate (runtime/peer_identity.hpp binds
  // each node id to the certificate it connected with); the token is the second factor.
  if (sender->node() != self->node() && !peer_holds(sender->node(), "node-" + info.name))
    return refuse("node '" + info.name + "': the peer's certificate is '"
                  + peer_certificate(sender->node()) + "', not node-" + info.name);
  auto tok = st.config.node_tokens.find(info.name);
  if (tok == st.config.node_tokens.end() || !token_equal(info.token, tok->second)) {
    return refuse("node '" + info.name + "': node token refused (each node needs its "
                  "node-<name>.token from the head's state dir)");
  }
  if (auto it = st.nodes.find(info.name);
      it != st.nodes.end() && it->second.alive && it->second.info.agent.node() != sender->node()) {
    // Not final for the node: the old process may be dead without the head having seen it yet.
    ++st.registrations_refused;
    ++st.refused["register"];
    spdlog::warn("node_refused name={} peer={} reason=already_registered_by_a_live_process",
                 info.name, peer_text(self));
    return make_error(errc::peer_failure,
                      "node '" + info.name + "' is registered by another live process");
  }
  if (info.cluster != st.config.cluster.cluster)
    return refuse("node '" + info.name + "' belongs to cluster '" + info.cluster
                  + "', this head runs cluster '" + st.config.cluster.cluster + "'");
  if (info.version != st.config.version)
    return refuse("node '" + info.name + "' runs satrap " + info.version + ", the head runs "
                  + st.config.version);
  auto known = std::any_of(st.config.cluster.nodes.begin(), st.config.cluster.nodes.end(),
                           [&](auto& n) { return n.name == info.name; });
  if (!known)
    return refuse("node '" + info.name + "' is not in the manifest of cluster '"
                  + st.config.cluster.cluster + "'");
  auto& entry = st.nodes[info.name];
  if (entry.info.agent && entry.info.agent.node() != info.agent.node())
    ++entry.rejoins;  // the same node name from a new process
  st.supervisor_gave_up.erase(info.name);
  entry.info = info;
  entry.info.token.clear();  // not kept: /status and logs never see it
  entry.alive = true;
  entry.last_heartbeat = self->clock().now();
  self->monitor(info.agent);
  spdlog::info("node_joined name={} restarts={} rejoins={}", info.name, info.restarts,
               entry.rejoins);
  try_start(self);
  return st.config.cluster.cluster;
}

void on_tick(self_ptr self) {
  auto& st = self->state;
  auto now = self->clock().now();
  for (auto& [name, n] : st.nodes)
    if (n.local) {  // this process: its actors' counters as a heartbeat would carry them
      auto actors = meters_snapshot();
      node_actors_update(n, actors, now);
    } else if (n.alive && now - n.last_heartbeat > ms(st.config.timing.heartbeat_timeout_ms)) {
      n.alive = false;
      spdlog::warn("node_lost name={} reason=heartbeat_timeout", name);
    }
  try_start(self);
  self->delayed_send(self, tick_interval(st), tick_atom::value, st.internal_key);
}

void on_down(self_ptr self, const caf::down_msg& dm) {
  for (auto& [name, n] : self->state.nodes)
    if (n.info.agent && n.info.agent.address() == dm.source && n.alive) {
      n.alive = false;
      spdlog::warn("node_lost name={} reason=connection", name);
    }
}

void on_heartbeat(self_ptr self, const std::string& name, std::vector<actor_stat>& actors) {
  auto it = self->state.nodes.find(name);
  if (it == self->state.nodes.end()) {
    refuse(self, "heartbeat", "node '" + name + "' has not registered");
    return;
  }
  // Only the process that registered the name keeps it alive.
  if (!it->second.info.agent || sender_node(self) != it->second.info.agent.node()) {
    refuse(self, "heartbeat", "heartbeat for node '" + name + "' from another process");
    return;
  }
  if (!it->second.local && !peer_holds(sender_node(self), "node-" + name)) {
    refuse(self, "heartbeat", "heartbeat for node '" + name + "' without its certificate");
    return;
  }
  node_actors_update(it->second, actors, self->clock().now());
  ++it->second.heartbeats;
  if (!it->second.alive)
    spdlog::info("node_alive name={}", name);
  it->second.alive = true;
}

}  // namespace satrap::admin_detail

namespace satrap {

void node_actors_update(node_entry& n, std::vector<actor_stat>& actors,
                        std::chrono::steady_clock::time_point now) {
  auto secs = std::chrono::duration<double>(now - n.last_heartbeat).count();
  std::vector<node_entry::actor_row> rows;
  for (auto& a : actors) {
    node_entry::actor_row row{a, 0.0};
    for (auto& old : n.actors)
      if (old.stat.role == a.role && old.stat.index == a.index && old.stat.job == a.job
          && a.messages >= old.stat.messages && secs > 0)
        row.messages_per_sec = static_cast<double>(a.messages - old.stat.messages) / secs;
    rows.push_back(std::move(row));
  }
  n.actors = std::move(rows);
  n.last_heartbeat = now;
}

}  // namespace satrap

namespace satrap::admin_detail {

std::string nodes_waiting(const admin_state& st) {
  std::string waiting;
  for (auto& n : st.config.cluster.nodes)
    if (auto it = st.nodes.find(n.name); it == st.nodes.end() || !it->second.alive)
      waiting += (waiting.empty() ? "" : ", ") + n.name;
  return waiting;
}

}  // namespace satrap::admin_detail
