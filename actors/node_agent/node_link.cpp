#include "actors/node_agent/node_link.hpp"

#include "runtime/actor_meter.hpp"
#include "runtime/error.hpp"
#include "runtime/secrets.hpp"

#include <caf/typed_event_based_actor.hpp>

#include <map>
#include <set>
#include <spdlog/spdlog.h>

namespace satrap {

namespace {

struct link_state {
  node_link_config config;
  uint64_t key = 0;
  uint64_t seq = 0;                         // only the newest timer counts
  admin_actor admin;                        // set while joined
  caf::actor_clock::time_point give_up_at;  // of the current attempt window
  bool ended = false;
  std::map<std::string, caf::actor_addr> peers;  // other nodes connected to, by name
  std::set<std::string> connecting;              // connect requests in flight
  static inline const char* name = "node_link";
};

using self_ptr = node_link_actor::stateful_pointer<link_state>;

void try_connect(self_ptr self);

// One timer chain at a time: a new timer voids the one pending.
void schedule(self_ptr self, std::chrono::milliseconds delay) {
  auto& st = self->state;
  ++st.seq;
  self->delayed_send(self, delay, tick_atom::value, st.key + st.seq);
}

void end(self_ptr self, const std::string& why) {
  auto& st = self->state;
  if (st.ended)
    return;
  st.ended = true;
  spdlog::error("node_link_ended cluster={} name={} reason=\"{}\"", st.config.cluster.cluster,
                st.config.node, why);
  if (st.config.on_end)
    st.config.on_end(1);
  self->quit();
}

// After a failed attempt: again after retry_interval, or give up.
void retry(self_ptr self, const std::string& why) {
  auto& st = self->state;
  if (self->clock().now() >= st.give_up_at) {
    end(self, "cannot join the head within the wait: " + why);
    return;
  }
  spdlog::warn("node_register_retry cluster={} name={} error=\"{}\"", st.config.cluster.cluster,
               st.config.node, why);
  schedule(self, st.config.retry_interval);
}

// Direct connections to the other nodes that have none yet (see the header). Only to the nodes
// whose name sorts after this one's: two nodes that dialled each other at once got two
// connections, CAF closed one, the peer's proxy went down with it (both sides dialled again a
// heartbeat later, often at once again), and a message in flight on the closed connection was
// lost: a trainer then waited for its batch until trainer_request_timeout_ms (seen on the
// cluster in about one run of four, cluster/kafka_stream). One dialler per pair; the connection
// carries both directions.
void connect_peers(self_ptr self) {
  auto& st = self->state;
  if (!st.config.connect_peers)
    return;
  for (auto& n : st.config.cluster.nodes) {
    if (n.name <= st.config.node || st.peers.count(n.name) || st.connecting.count(n.name))
      continue;
    st.connecting.insert(n.name);
    self
      ->request(st.config.connector, st.config.connect_timeout, caf::connect_atom::value, n.host,
                n.port)
      .then(
        [self, name = n.name](const caf::node_id&, caf::strong_actor_ptr& ptr,
                              const std::set<std::string>&) {
          auto& st = self->state;
          st.connecting.erase(name);
          if (!ptr)
            return;
          st.peers[name] = ptr->address();
          self->monitor(ptr);
          spdlog::info("node_peer_connected name={} peer={}", st.config.node, name);
        },
        [self, name = n.name](caf::error&) { self->state.connecting.erase(name); });
  }
}

void heartbeat(self_ptr self) {
  auto& st = self->state;
  if (!st.admin)
    return;
  connect_peers(self);
  self->send(st.admin, heartbeat_atom::value, st.config.node, meters_snapshot());
  schedule(self, st.config.heartbeat_interval);
}

void do_register(self_ptr self, admin_actor admin) {
  auto& c = self->state.config;
  node_info info{c.cluster.cluster, c.version, c.node, c.agent, c.token, c.restarts};
  self->request(admin, c.register_timeout, register_atom::value, std::move(info))
    .then(
      [self, admin](std::string&) {
        auto& st = self->state;
        spdlog::info("node_joined cluster={} name={}", st.config.cluster.cluster, st.config.node);
        st.admin = admin;
        self->send(st.config.agent, head_atom::value, admin.node());
        self->monitor(admin);
        heartbeat(self);
      },
      [self](caf::error& e) {
        // A refusal by the head is final; a timeout, a dropped connection (a head restarting)
        // or the name still held by this node's previous process is tried again.
        if (e.category() == caf::atom("satrap")
            && e.code() != static_cast<uint8_t>(errc::peer_failure))
          end(self, "the head refused this node: " + error_text(e));
        else
          retry(self, error_text(e));
      });
}

void try_connect(self_ptr self) {
  auto& st = self->state;
  auto& h = st.config.cluster.head;
  self
    ->request(st.config.connector, st.config.connect_timeout, caf::connect_atom::value, h.host,
              h.port)
    .then(
      [self](const caf::node_id&, caf::strong_actor_ptr& ptr, const std::set<std::string>&) {
        if (!ptr) {
          retry(self, "the head's port has no actor");
          return;
        }
        do_register(self, caf::actor_cast<admin_actor>(std::move(ptr)));
      },
      [self](caf::error& e) {
        auto& hh = self->state.config.cluster.head;
        retry(self, "cannot reach the head at " + hh.host + ":" + std::to_string(hh.port) + ": "
                      + error_text(e));
      });
}

}  // namespace

node_link_actor spawn_node_link(caf::actor_system& sys, node_link_config config) {
  return sys.spawn([config = std::move(config)](self_ptr self) -> node_link_actor::behavior_type {
    auto& st = self->state;
    st.config = config;
    st.key = std::stoull(random_token(8), nullptr, 16);
    st.give_up_at = self->clock().now() + st.config.give_up_after;
    self->set_down_handler([self](caf::down_msg& dm) {
      auto& st = self->state;
      for (auto it = st.peers.begin(); it != st.peers.end(); ++it)
        if (it->second == dm.source) {
          st.peers.erase(it);  // connected again after the next heartbeat
          return;
        }
      if (!st.admin || dm.source != st.admin.address())
        return;
      spdlog::warn("head_lost cluster={} name={}", st.config.cluster.cluster, st.config.node);
      st.admin = nullptr;
      st.give_up_at = self->clock().now() + st.config.give_up_after;
      schedule(self, st.config.retry_interval);
    });
    try_connect(self);
    return {
      [self](tick_atom, uint64_t key) {
        auto& st = self->state;
        if (key != st.key + st.seq || st.ended)
          return;  // not its own timer
        if (st.admin)
          heartbeat(self);
        else
          try_connect(self);
      },
    };
  });
}

}  // namespace satrap
