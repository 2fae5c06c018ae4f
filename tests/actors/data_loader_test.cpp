// data_loader: read-ahead answers every fetch with the batch a fetch without it makes.
#include "actors/data_loader/data_loader.hpp"
#include "actors/type_registry.hpp"
#include "models/data/synthetic.hpp"
#include "runtime/error.hpp"
#include "runtime/payload_checks.hpp"
#include "satrap_schemas/step.capnp.h"

#include <caf/scoped_actor.hpp>
#include <doctest/doctest.h>

using namespace satrap;

namespace {

// An aggregator stand-in that keeps the id batches it is sent.
struct id_sink {
  std::shared_ptr<std::vector<capnp_payload>> got = std::make_shared<std::vector<capnp_payload>>();
  gradient_aggregator_actor spawn(caf::actor_system& sys) {
    return sys.spawn([got = got]() -> gradient_aggregator_actor::behavior_type {
      return {
        [got](ids_atom, const capnp_payload& p) { got->push_back(p); },
        [](pooled_atom, int64_t, int8_t) -> caf::result<capnp_payload> { return capnp_payload{}; },
        [](grads_atom, const capnp_payload&) -> caf::result<int64_t> { return int64_t{0}; },
      };
    });
  }
};

}  // namespace

TEST_CASE(
  "data loader: read-ahead answers each fetch, replays and test batches included, as a fetch without it") {
  satrap_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  synthetic_options o;
  o.seed = 11;
  auto source = std::make_shared<const synthetic_generator>(o);
  id_sink plain_ids, ahead_ids;
  data_loader_config c;
  c.data = source;
  c.batch_size = 64;
  c.loaders = 2;  // this loader serves the even batches
  c.read_ahead = 0;
  auto plain_sink = plain_ids.spawn(sys);
  auto ahead_sink = ahead_ids.spawn(sys);
  c.aggregators = {plain_sink};
  auto plain = spawn_data_loader(sys, c);
  c.read_ahead = 2;
  c.aggregators = {ahead_sink};
  auto ahead = spawn_data_loader(sys, c);
  // Training batches in order, a replay from an earlier batch (a restart), a skip, test batches.
  const std::vector<std::pair<int64_t, int8_t>> fetches = {
    {0, 0}, {2, 0}, {4, 0}, {2, 0}, {4, 0}, {6, 0}, {12, 0}, {14, 0}, {0, 1}, {2, 1}, {16, 0}};
  for (auto [n, split] : fetches) {
    capnp_payload a, b;
    self->request(plain, std::chrono::seconds(10), fetch_atom::value, n, split)
      .receive([&](capnp_payload& p) { a = std::move(p); },
               [&](caf::error& e) { FAIL(error_text(e)); });
    self->request(ahead, std::chrono::seconds(10), fetch_atom::value, n, split)
      .receive([&](capnp_payload& p) { b = std::move(p); },
               [&](caf::error& e) { FAIL(error_text(e)); });
    INFO("batch ", n, " split ", int{split});
    CHECK(a.bytes.size() > 0);
    CHECK(std::equal(a.bytes.begin(), a.bytes.end(), b.bytes.begin(), b.bytes.end()));
  }
  // The id batches reach the aggregator at each fetch, the same ones in the same order. Each was
  // in its sink's mailbox before the fetch was answered, so a request queued after them
  // returns once the sink has taken them all.
  for (auto& sink : {plain_sink, ahead_sink})
    self->request(sink, std::chrono::seconds(10), pooled_atom::value, int64_t{0}, int8_t{0})
      .receive([](capnp_payload&) {}, [&](caf::error& e) { FAIL(error_text(e)); });
  self->send_exit(plain, caf::exit_reason::user_shutdown);
  self->send_exit(ahead, caf::exit_reason::user_shutdown);
  self->wait_for(plain, ahead);
  REQUIRE(plain_ids.got->size() == fetches.size());
  REQUIRE(ahead_ids.got->size() == fetches.size());
  for (size_t i = 0; i < fetches.size(); ++i) {
    auto& a = (*plain_ids.got)[i].bytes;
    auto& b = (*ahead_ids.got)[i].bytes;
    CHECK(std::equal(a.begin(), a.end(), b.begin(), b.end()));
  }
  self->send_exit(plain_sink, caf::exit_reason::user_shutdown);
  self->send_exit(ahead_sink, caf::exit_reason::user_shutdown);
}
