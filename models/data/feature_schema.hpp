// The named features of a data set (`data.features`): what each sample holds, by name, and where
// each feature's ids live.
//
//   id        one id per sample (a bag of one)
//   bag       any number of ids, order ignored, pooled by `pooling`
//   sequence  ids in order, oldest first; cut to the most recent `max_length` (required). Pooled
//             like a bag by `pooling`, or with `pooling: none` unpooled: one embedding per
//             position and the sequence's length (models/data/sequence_source.hpp), for a
//             TorchScript model, which gets it as [B, max_length, E]
//   dense     one number
// `table` names the embedding table a sparse feature's ids are hashed into (default: its own
// name); features naming one table share its rows: one row per (table, id), whose gradient is the
// sum of every use's. `weights: true` takes each id's value as its pooling weight. `max_length` of
// a bag is a hard limit (a longer bag is bad input); every bag and sequence is refused past
// feature_ids_max ids.
// The sparse features become the batch's slots in the order given (dense ones left out), the
// dense features its dense columns in the order given. Tables are numbered in order of first use;
// an id's hashed value is slot_id_hash(table number, value), so a job without data.features,
// whose slot k is table k, hashes exactly as before.
// Threading: plain values and pure functions.
#pragma once

#include "models/data/sequence_source.hpp"
#include "models/embedding/pooling.hpp"
#include "models/result.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace satrap {

enum class feature_kind { id, bag, sequence, dense };

constexpr int32_t feature_ids_max = 1 << 16;  // ids of one feature in one sample, at most
constexpr size_t feature_schema_max = 4096;   // features of a data set, at most

struct feature_spec {
  std::string name;
  feature_kind kind = feature_kind::id;
  std::string table;  // "": the feature's own name (sparse kinds only)
  pooling pool = pooling::sum;
  bool pool_given = false;  // false: the job's model.pooling
  int32_t max_length = 0;   // bag: hard limit (0: feature_ids_max); sequence: most recent kept
  bool weights = false;     // ids carry pooling weights (bag, sequence)
  bool unpooled = false;    // sequence with `pooling: none`: reaches the model unpooled
};

using feature_schema = std::vector<feature_spec>;

// What a checked schema lays out.
struct feature_layout {
  int slots = 0;                    // sparse features
  int dense = 0;                    // dense features
  std::vector<int> slot_of;         // per feature: its slot, or -1 (dense)
  std::vector<int> dense_of;        // per feature: its dense column, or -1 (sparse)
  std::vector<int> table_of;        // per feature: its table number, or -1 (dense)
  std::vector<std::string> tables;  // table names by number
  std::vector<pooling> slot_pool;   // per slot (model.pooling where the feature gives none)
  bool weighted = false;            // some feature carries weights
  unpooled_sequences sequences;     // the sequences with pooling: none (their data slots)
};

const char* feature_kind_name(feature_kind k);
const char* feature_pooling_name(pooling p);

// Checks the schema (names unique and plain, keys that fit the kind, max_length where needed) and
// lays it out; `default_pool` is model.pooling. Errors name the feature ("feature 'tags': ...").
result<feature_layout> feature_schema_layout(const feature_schema& schema, pooling default_pool);

// A feature's hashed id of an integer value, or of a string value (its bytes hashed first, in a
// domain of their own: the string "7" and the integer 7 are different ids).
uint64_t feature_id_hash(int table, uint64_t value);
uint64_t feature_string_id_hash(int table, std::string_view value);

// The schema as one line of flow YAML (data.features as printed; cache keys).
std::string feature_schema_text(const feature_schema& schema);

}  // namespace satrap
