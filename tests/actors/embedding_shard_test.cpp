// embedding_shard and gradient_aggregator protocols, message by message.
#include "actors/embedding_shard/embedding_shard.hpp"
#include "actors/gradient_aggregator/gradient_aggregator.hpp"
#include "actors/type_registry.hpp"
#include "runtime/error.hpp"
#include "satrap_schemas/step.capnp.h"

#include <caf/scoped_actor.hpp>
#include <doctest/doctest.h>

using namespace satrap;

namespace {

capnp_payload lookup_request(std::vector<uint64_t> ids, bool read_only = false) {
  capnp::MallocMessageBuilder mb;
  auto req = mb.initRoot<schema::LookupRequest>();
  req.setBatch(1);
  req.setIds(data_of(ids));
  req.setReadOnly(read_only);
  return payload_encode(mb);
}

capnp_payload gradients(std::vector<uint64_t> ids, std::vector<float> grads, uint32_t dim) {
  capnp::MallocMessageBuilder mb;
  auto req = mb.initRoot<schema::EmbeddingGradients>();
  req.setBatch(1);
  req.setDim(dim);
  req.setIds(data_of(ids));
  req.setGrads(data_of(grads));
  return payload_encode(mb);
}

// IdBatch `batch`: one sample, one slot, id 5.
capnp_payload one_id_batch(int64_t batch) {
  capnp::MallocMessageBuilder mb;
  auto ids = mb.initRoot<schema::IdBatch>();
  std::vector<uint32_t> offsets = {0, 1};
  std::vector<uint64_t> id = {5};
  ids.setBatch(batch);
  ids.setSize(1);
  ids.setSlots(1);
  ids.setOffsets(data_of(offsets));
  ids.setIds(data_of(id));
  return payload_encode(mb);
}

std::vector<float> rows_of(const capnp_payload& p) {
  payload_reader reader(p);
  return data_copy<float>(reader.root<schema::EmbeddingRows>().getRows());
}

struct fixture {
  satrap_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
};

}  // namespace

TEST_CASE_FIXTURE(fixture,
                  "shard: lookup gives initial rows, update applies SGD, peek inserts nothing") {
  embedding_shard_config c;
  c.embedding.dim = 2;
  c.embedding.optimizer = sparse_optimizer_kind::sgd;
  c.embedding.learning_rate = 0.5f;
  auto shard = spawn_embedding_shard(sys, c);
  std::vector<float> before, after;
  self->request(shard, std::chrono::seconds(10), lookup_atom::value, lookup_request({11, 12}))
    .receive([&](capnp_payload& p) { before = rows_of(p); },
             [&](caf::error& e) { FAIL(error_text(e)); });
  std::vector<float> init(2);
  embedding_init_row(c.embedding, 12, init.data());
  REQUIRE(before.size() == 4);
  CHECK(before[2] == init[0]);
  CHECK(before[3] == init[1]);
  self
    ->request(shard, std::chrono::seconds(10), update_atom::value,
              gradients({12}, {1.0f, -2.0f}, 2))
    .receive([&](int64_t rows) { CHECK(rows == 1); }, [&](caf::error& e) { FAIL(error_text(e)); });
  self->request(shard, std::chrono::seconds(10), lookup_atom::value, lookup_request({12, 99}, true))
    .receive([&](capnp_payload& p) { after = rows_of(p); },
             [&](caf::error& e) { FAIL(error_text(e)); });
  CHECK(after[0] == doctest::Approx(init[0] - 0.5f));
  CHECK(after[1] == doctest::Approx(init[1] + 1.0f));
  self->request(shard, std::chrono::seconds(10), stats_atom::value)
    .receive(
      [&](const shard_stats& s) {
        CHECK(s.rows == 2);  // 11 and 12; the read-only 99 was not inserted
        CHECK(s.lookups == 4);
        CHECK(s.updates == 1);
      },
      [&](caf::error& e) { FAIL(error_text(e)); });
  self->send_exit(shard, caf::exit_reason::user_shutdown);
}

TEST_CASE_FIXTURE(fixture,
                  "aggregator: gradients of a batch it never saw are refused, not dropped") {
  gradient_aggregator_config c;
  c.dim = 2;
  c.shards.push_back(spawn_embedding_shard(sys, embedding_shard_config{}));
  c.partitions = partition_map::uniform(16, 1);
  auto agg = spawn_gradient_aggregator(sys, c);
  capnp::MallocMessageBuilder mb;
  auto g = mb.initRoot<schema::PooledGradients>();
  g.setBatch(77);
  g.setSize(1);
  g.setSlots(1);
  g.setDim(2);
  g.setValues(data_of(std::vector<float>{1.0f, 2.0f}));
  self->request(agg, std::chrono::seconds(10), grads_atom::value, payload_encode(mb))
    .receive(
      [&](int64_t) { FAIL("accepted gradients of an unknown batch"); },
      [&](caf::error& e) { CHECK(error_text(e).find("unknown batch 77") != std::string::npos); });
  self->send_exit(agg, caf::exit_reason::user_shutdown);
  self->send_exit(c.shards[0], caf::exit_reason::user_shutdown);
}

TEST_CASE_FIXTURE(fixture, "aggregator: a dead shard fails the pooled request with the reason") {
  gradient_aggregator_config c;
  c.dim = 2;
  auto shard = spawn_embedding_shard(sys, embedding_shard_config{});
  c.shards.push_back(shard);
  c.partitions = partition_map::uniform(16, 1);
  c.timeout = caf::duration{std::chrono::seconds(5)};
  auto agg = spawn_gradient_aggregator(sys, c);
  self->send_exit(shard, caf::exit_reason::kill);
  self->wait_for(shard);
  self->send(agg, ids_atom::value, one_id_batch(3));
  self->request(agg, std::chrono::seconds(10), pooled_atom::value, int64_t{3}, int8_t{0})
    .receive([&](capnp_payload&) { FAIL("pooled embeddings from a dead shard"); },
             [&](caf::error& e) {
               CHECK(error_text(e).find("embedding lookup on shard 0 failed") != std::string::npos);
             });
  self->send_exit(agg, caf::exit_reason::user_shutdown);
}

TEST_CASE_FIXTURE(
  fixture, "aggregator: a shard that never answers fails the pooled request at the timeout") {
  // A shard that takes lookups and never replies (it keeps the promises, so none is dropped).
  auto held = std::make_shared<std::vector<caf::typed_response_promise<capnp_payload>>>();
  auto silent =
    sys.spawn([held](embedding_shard_actor::pointer self) -> embedding_shard_actor::behavior_type {
      return {
        [self, held](lookup_atom, const capnp_payload&) -> caf::result<capnp_payload> {
          held->push_back(self->make_response_promise<capnp_payload>());
          return held->back();
        },
        [](update_atom, const capnp_payload&) -> caf::result<int64_t> { return int64_t{0}; },
        [](stats_atom) -> caf::result<shard_stats> { return shard_stats{}; },
        [](snapshot_atom, const std::string&, uint64_t, bool) -> caf::result<shard_snapshot_info> {
          return shard_snapshot_info{};
        },
        [](restore_atom, const std::string&, uint64_t) -> caf::result<int64_t> {
          return int64_t{0};
        },
      };
    });
  gradient_aggregator_config c;
  c.dim = 2;
  c.shards.push_back(silent);
  c.partitions = partition_map::uniform(16, 1);
  c.timeout = caf::duration{std::chrono::milliseconds(200)};
  auto agg = spawn_gradient_aggregator(sys, c);
  auto start = std::chrono::steady_clock::now();
  self->send(agg, ids_atom::value, one_id_batch(4));
  self->request(agg, std::chrono::seconds(20), pooled_atom::value, int64_t{4}, int8_t{0})
    .receive([&](capnp_payload&) { FAIL("pooled embeddings from a shard that never answered"); },
             [&](caf::error& e) {
               CHECK(error_text(e).find("embedding lookup on shard 0 failed") != std::string::npos);
               CHECK(error_text(e).find("request_timeout") != std::string::npos);
             });
  auto waited = std::chrono::steady_clock::now() - start;
  CHECK(waited >= std::chrono::milliseconds(200));
  CHECK(waited < std::chrono::seconds(10));
  CHECK(held->size() == 1);
  self->send_exit(agg, caf::exit_reason::user_shutdown);
  self->send_exit(silent, caf::exit_reason::user_shutdown);
}

TEST_CASE_FIXTURE(fixture, "shard: a malformed lookup or update is answered with an error") {
  embedding_shard_config c;
  c.embedding.dim = 2;
  auto shard = spawn_embedding_shard(sys, c);
  capnp::MallocMessageBuilder mb;
  mb.initRoot<schema::LookupRequest>().initIds(12);  // 1.5 ids
  self->request(shard, std::chrono::seconds(10), lookup_atom::value, payload_encode(mb))
    .receive([&](capnp_payload&) { FAIL("a lookup of 12 id bytes was answered with rows"); },
             [&](caf::error& e) {
               CHECK(e.code() == static_cast<uint8_t>(errc::invalid_payload));
               CHECK(error_text(e).find("ids has 12 bytes") != std::string::npos);
             });
  self
    ->request(shard, std::chrono::seconds(10), update_atom::value,
              gradients({12, 13}, {1.0f, -2.0f, 3.0f}, 2))  // 3 floats for 2 ids of dim 2
    .receive([&](int64_t) { FAIL("a short gradient was applied"); },
             [&](caf::error& e) {
               CHECK(error_text(e).find("grads has 3 values, expected 4") != std::string::npos);
             });
  self
    ->request(shard, std::chrono::seconds(10), update_atom::value,
              gradients({12}, {1.0f, -2.0f, 3.0f}, 3))  // dim 3 into a table of dim 2
    .receive([&](int64_t) { FAIL("a gradient of another dim was applied"); },
             [&](caf::error& e) {
               CHECK(error_text(e).find("dim is 3, expected 2") != std::string::npos);
             });
  // Still serving: the bad requests changed nothing.
  self->request(shard, std::chrono::seconds(10), stats_atom::value)
    .receive([&](const shard_stats& s) { CHECK(s.updates == 0); },
             [&](caf::error& e) { FAIL(error_text(e)); });
  self->send_exit(shard, caf::exit_reason::user_shutdown);
}

TEST_CASE_FIXTURE(fixture,
                  "aggregator: malformed ids fail the pooled request, bad gradients are refused") {
  gradient_aggregator_config c;
  c.dim = 2;
  embedding_shard_config sc;
  sc.embedding.dim = 2;
  c.shards.push_back(spawn_embedding_shard(sys, sc));
  c.partitions = partition_map::uniform(16, 1);
  auto agg = spawn_gradient_aggregator(sys, c);
  // A good batch 1: 1 sample, 2 slots.
  capnp::MallocMessageBuilder ib;
  auto ids = ib.initRoot<schema::IdBatch>();
  ids.setBatch(1);
  ids.setSize(1);
  ids.setSlots(2);
  ids.setOffsets(data_of(std::vector<uint32_t>{0, 1, 2}));
  ids.setIds(data_of(std::vector<uint64_t>{5, 6}));
  self->send(agg, ids_atom::value, payload_encode(ib));
  self->request(agg, std::chrono::seconds(10), pooled_atom::value, int64_t{1}, int8_t{0})
    .receive([&](capnp_payload&) {}, [&](caf::error& e) { FAIL(error_text(e)); });
  // Gradients of the wrong shape (3 slots) are refused; the batch waits for good ones.
  capnp::MallocMessageBuilder gb;
  auto g = gb.initRoot<schema::PooledGradients>();
  g.setBatch(1);
  g.setSize(1);
  g.setSlots(3);
  g.setDim(2);
  g.setValues(data_of(std::vector<float>(6, 0.5f)));
  self->request(agg, std::chrono::seconds(10), grads_atom::value, payload_encode(gb))
    .receive([&](int64_t) { FAIL("gradients of 3 slots accepted for a batch of 2"); },
             [&](caf::error& e) {
               CHECK(error_text(e).find("slots is 3, expected 2") != std::string::npos);
             });
  g.setSlots(2);
  g.setValues(data_of(std::vector<float>(4, 0.5f)));
  self->request(agg, std::chrono::seconds(10), grads_atom::value, payload_encode(gb))
    .receive([&](int64_t rows) { CHECK(rows == 2); }, [&](caf::error& e) { FAIL(error_text(e)); });
  // An id batch whose offsets go down poisons the aggregator: pooled requests get the reason.
  ids.setBatch(2);
  ids.setOffsets(data_of(std::vector<uint32_t>{0, 2, 1}));
  self->send(agg, ids_atom::value, payload_encode(ib));
  self->request(agg, std::chrono::seconds(10), pooled_atom::value, int64_t{2}, int8_t{0})
    .receive([&](capnp_payload&) { FAIL("pooled embeddings of a malformed batch"); },
             [&](caf::error& e) {
               CHECK(error_text(e).find("offsets go down at bag 1") != std::string::npos);
             });
  self->send_exit(agg, caf::exit_reason::user_shutdown);
  self->send_exit(c.shards[0], caf::exit_reason::user_shutdown);
}
