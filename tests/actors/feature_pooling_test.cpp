// The aggregator with named features (data.features): two features on one table share one row
// whose gradient is the sum of both uses'; per-slot pooling (sum, mean, sqrtn) with per-id
// weights from the IdBatch, forward and backward; bad weights on the wire.
#include "actors/embedding_shard/embedding_shard.hpp"
#include "actors/gradient_aggregator/gradient_aggregator.hpp"
#include "actors/type_registry.hpp"
#include "models/data/feature_schema.hpp"
#include "runtime/error.hpp"
#include "satrap_schemas/step.capnp.h"

#include <caf/scoped_actor.hpp>
#include <doctest/doctest.h>

#include <cmath>

using namespace satrap;

namespace {

struct fixture {
  satrap_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
};

capnp_payload id_batch(int64_t batch, uint32_t slots, std::vector<uint32_t> offsets,
                       std::vector<uint64_t> ids, std::vector<float> weights) {
  capnp::MallocMessageBuilder mb;
  auto b = mb.initRoot<schema::IdBatch>();
  b.setBatch(batch);
  b.setSize(1);
  b.setSlots(slots);
  b.setOffsets(data_of(offsets));
  b.setIds(data_of(ids));
  if (!weights.empty())
    b.setWeights(data_of(weights));
  return payload_encode(mb);
}

capnp_payload pooled_grads(int64_t batch, uint32_t slots, uint32_t dim, std::vector<float> g) {
  capnp::MallocMessageBuilder mb;
  auto out = mb.initRoot<schema::PooledGradients>();
  out.setBatch(batch);
  out.setSize(1);
  out.setSlots(slots);
  out.setDim(dim);
  out.setValues(data_of(g));
  return payload_encode(mb);
}

}  // namespace

TEST_CASE_FIXTURE(fixture,
                  "features: two features on one table share one row whose gradient is "
                  "the sum of both uses', through per-slot weighted pooling") {
  const uint32_t dim = 2;
  embedding_shard_config sc;
  sc.embedding.dim = dim;
  sc.embedding.optimizer = sparse_optimizer_kind::sgd;
  sc.embedding.learning_rate = 1.0f;
  auto shard = spawn_embedding_shard(sys, sc);
  gradient_aggregator_config c;
  c.dim = dim;
  c.slot_pool = {pooling::sum, pooling::mean, pooling::sqrtn};
  c.shards.push_back(shard);
  c.partitions = partition_map::uniform(16, 1);
  auto agg = spawn_gradient_aggregator(sys, c);
  // Slots: item (table 0), history (table 0, the same item id twice, weights 2 and 1) and tags
  // (table 1, the same raw value 9: another table, another row).
  const uint64_t item = feature_id_hash(0, 9), tag = feature_id_hash(1, 9);
  std::vector<float> init(dim), init_tag(dim);
  embedding_init_row(sc.embedding, item, init.data());
  embedding_init_row(sc.embedding, tag, init_tag.data());
  self->send(agg, ids_atom::value,
             id_batch(1, 3, {0, 1, 3, 5}, {item, item, item, tag, tag}, {0.5f, 2, 1, 3, 4}));
  std::vector<float> pooled;
  self->request(agg, std::chrono::seconds(10), pooled_atom::value, int64_t{1}, int8_t{0})
    .receive(
      [&](capnp_payload& p) {
        payload_reader r(p);
        pooled = data_copy<float>(r.root<schema::PooledEmbeddings>().getValues());
      },
      [&](caf::error& e) { FAIL(error_text(e)); });
  REQUIRE(pooled.size() == 3 * dim);
  for (uint32_t d = 0; d < dim; ++d) {
    CHECK(pooled[d] == doctest::Approx(0.5f * init[d]));                   // sum, weight 0.5
    CHECK(pooled[dim + d] == doctest::Approx(init[d]));                    // (2 + 1) row / (2 + 1)
    CHECK(pooled[2 * dim + d] == doctest::Approx(7 * init_tag[d] / 5.0));  // (3 + 4) / sqrt(25)
  }
  // Gradients: item's row gets 0.5 g0 + (2 + 1)/3 g1, in one update of one row.
  std::vector<float> g = {1, 2, 10, 20, 100, 200};
  self->request(agg, std::chrono::seconds(10), grads_atom::value, pooled_grads(1, 3, dim, g))
    .receive([&](int64_t rows) { CHECK(rows == 2); }, [&](caf::error& e) { FAIL(error_text(e)); });
  self->request(shard, std::chrono::seconds(10), stats_atom::value)
    .receive([&](const shard_stats& s) { CHECK(s.rows == 2); },
             [&](caf::error& e) { FAIL(error_text(e)); });
  capnp::MallocMessageBuilder lb;
  auto req = lb.initRoot<schema::LookupRequest>();
  req.setBatch(2);
  req.setIds(data_of(std::vector<uint64_t>{item, tag}));
  req.setReadOnly(true);
  self->request(shard, std::chrono::seconds(10), lookup_atom::value, payload_encode(lb))
    .receive(
      [&](capnp_payload& p) {
        payload_reader r(p);
        auto rows = data_copy<float>(r.root<schema::EmbeddingRows>().getRows());
        REQUIRE(rows.size() == 2 * dim);
        for (uint32_t d = 0; d < dim; ++d) {
          CHECK(rows[d] == doctest::Approx(init[d] - (0.5f * g[d] + g[dim + d])));
          CHECK(rows[dim + d] == doctest::Approx(init_tag[d] - 7.0f / 5.0f * g[2 * dim + d]));
        }
      },
      [&](caf::error& e) { FAIL(error_text(e)); });
  self->send_exit(agg, caf::exit_reason::user_shutdown);
  self->send_exit(shard, caf::exit_reason::user_shutdown);
}

TEST_CASE_FIXTURE(fixture,
                  "features: an id batch of another slot count, or with weights that "
                  "do not fit, fails the pooled request with the reason") {
  gradient_aggregator_config c;
  c.dim = 2;
  c.slot_pool = {pooling::sum, pooling::mean};
  embedding_shard_config sc;
  sc.embedding.dim = 2;
  c.shards.push_back(spawn_embedding_shard(sys, sc));
  c.partitions = partition_map::uniform(16, 1);
  auto agg = spawn_gradient_aggregator(sys, c);
  self->send(agg, ids_atom::value, id_batch(1, 1, {0, 1}, {5}, {}));
  self->request(agg, std::chrono::seconds(10), pooled_atom::value, int64_t{1}, int8_t{0})
    .receive([&](capnp_payload&) { FAIL("pooled a batch of 1 slot for 2 features"); },
             [&](caf::error& e) {
               CHECK(error_text(e).find("1 slots, the job's features have 2") != std::string::npos);
             });
  // Weights of another count than the ids: the decoder refuses the batch (and the aggregator
  // answers every later pooled request with the reason).
  self->send(agg, ids_atom::value, id_batch(2, 2, {0, 1, 2}, {5, 6}, {1.0f}));
  self->request(agg, std::chrono::seconds(10), pooled_atom::value, int64_t{2}, int8_t{0})
    .receive([&](capnp_payload&) { FAIL("pooled a batch with 1 weight for 2 ids"); },
             [&](caf::error& e) { CHECK(error_text(e).find("weights") != std::string::npos); });
  self->send_exit(agg, caf::exit_reason::user_shutdown);
  self->send_exit(c.shards[0], caf::exit_reason::user_shutdown);
}
