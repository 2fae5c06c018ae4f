// node_link: a node's membership in its cluster, as a timer-driven actor: connect to the head,
// register the node agent (with the node's token), heartbeat, and on losing the head start over.
//
// Protocol (all timers through the actor clock, so a test clock drives them):
//   connect: asks the middleman (the TLS one when the cluster uses TLS) to connect to the head;
//   register: register(node_info) with register_timeout; on success tells the agent which process
//     is the head (head_atom: the agent obeys spawn requests from that process only) and monitors
//     the admin; a refusal by the head (another cluster, version, name or token) is final;
//   heartbeat: every heartbeat_interval, the node's actor counters (meters_snapshot());
//   head lost (down_msg): back to connect, with a fresh give_up_after window.
// With TLS it also connects to the other nodes of the manifest whose names sort after its own
// (one dialler per pair: see connect_peers), again after a heartbeat while one is missing: CAF
// 0.17's automatic node-to-node connections are plain TCP, which TLS ports refuse, and without a
// direct connection a node's messages to another node are relayed by the head.
// A failed connect or register is tried again every retry_interval until give_up_after has
// passed since the first try; then, or on a refusal, on_end(1) is called and the link stops.
// Its timer messages carry a key drawn at spawn: the link's address reaches the head with every
// heartbeat, and a forged tick is dropped.
// Threading: an actor; on_end runs in the actor's thread.
#pragma once

#include "actors/admin/admin.hpp"

#include <caf/actor_system.hpp>
#include <caf/io/middleman_actor.hpp>

#include <chrono>
#include <functional>

namespace satrap {

struct node_link_config {
  manifest cluster;
  std::string node;        // this node's name in the manifest
  std::string version;     // satrap version, checked by the head
  std::string token;       // this node's token (never logged)
  int64_t restarts = 0;    // times this node's process was started again (reported at registration)
  node_agent_actor agent;  // registered with the head
  caf::io::middleman_actor connector;  // plain or TLS middleman actor
  // Knobs (README "Cluster"): how often, how long.
  std::chrono::milliseconds heartbeat_interval{1000};  // the head's timeout is 5 s
  std::chrono::milliseconds retry_interval{1000};      // between connect/register attempts
  std::chrono::milliseconds register_timeout{10000};   // one register request
  std::chrono::milliseconds connect_timeout{10000};    // one connect attempt
  std::chrono::milliseconds give_up_after{60000};      // --wait: trying to reach the head
  bool connect_peers = false;       // connect directly to the other nodes (with TLS)
  std::function<void(int)> on_end;  // called once when the link gives up (status 1)
};

using node_link_actor = caf::typed_actor<caf::reacts_to<tick_atom, uint64_t>>;

node_link_actor spawn_node_link(caf::actor_system& sys, node_link_config config);

}  // namespace satrap
