// The admin's HTTP endpoint, for `satrap head` and `satrap train --status-port`: the dashboard
// at /, and /status, /metrics (the admin's one renderer), /healthz, /readyz; POST
// /jobs/<id>/cancel and /jobs/<id>/checkpoint with the admin token in X-Satrap-Token. A refusal's
// status comes from its type (admin_refusal), mapped here only: unauthorized 403, conflict 409.
// Threading: called from the HTTP server's workers; each call asks the admin with a scoped actor.
#pragma once

#include "actors/admin/admin.hpp"
#include "runtime/http_server.hpp"

#include <caf/actor_system.hpp>

namespace satrap {

struct admin_http_options {
  // No controls (an embedded job without an admin token): every POST is refused with 403.
  bool read_only = false;
};

// The HTTP status of a refused request.
int http_status_of(admin_refusal r);

http_response admin_http(caf::actor_system& sys, const admin_actor& admin,
                         const admin_http_options& options, const http_request& req);

}  // namespace satrap
