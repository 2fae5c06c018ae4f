#include "runtime/liveness.hpp"

#include <caf/all.hpp>
#include <doctest/doctest.h>

using namespace satrap;

TEST_CASE("actor_down_reason: empty while the actor runs, its exit reason after it ended") {
  caf::actor_system_config cfg;
  cfg.set("logger.verbosity", caf::atom("quiet"));
  caf::actor_system sys{cfg};
  auto a = sys.spawn([]() -> caf::behavior { return {[](int x) { return x; }}; });
  CHECK(actor_down_reason(sys, a).empty());
  caf::anon_send_exit(a, caf::exit_reason::kill);
  caf::scoped_actor self{sys};
  self->wait_for(a);
  CHECK(actor_down_reason(sys, a).find("kill") != std::string::npos);
  CHECK(actor_down_reason(sys, caf::actor{}) == "no actor");
}
