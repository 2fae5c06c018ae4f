#include "models/data/feature_schema.hpp"

#include "models/data/batch.hpp"
#include "models/embedding/id_map.hpp"

#include <map>
#include <set>

namespace satrap {

const char* feature_kind_name(feature_kind k) {
  switch (k) {
    case feature_kind::id: return "id";
    case feature_kind::bag: return "bag";
    case feature_kind::sequence: return "sequence";
    case feature_kind::dense: return "dense";
  }
  return "?";
}

const char* feature_pooling_name(pooling p) {
  switch (p) {
    case pooling::sum: return "sum";
    case pooling::mean: return "mean";
    case pooling::sqrtn: return "sqrtn";
  }
  return "?";
}

namespace {

// Names and table names: letters, digits, '_', '-', '.', at most 128 bytes.
bool plain_name(const std::string& s) {
  if (s.empty() || s.size() > 128)
    return false;
  for (unsigned char c : s)
    if (!(std::isalnum(c) || c == '_' || c == '-' || c == '.'))
      return false;
  return true;
}

}  // namespace

result<feature_layout> feature_schema_layout(const feature_schema& schema, pooling default_pool) {
  feature_layout out;
  if (schema.size() > feature_schema_max)
    return make_input_error("data.features: expected at most " + std::to_string(feature_schema_max)
                            + " features, got " + std::to_string(schema.size()));
  std::set<std::string> names;
  std::map<std::string, int> tables;
  for (size_t i = 0; i < schema.size(); ++i) {
    auto& f = schema[i];
    auto bad = [&](const std::string& what) {
      auto who = f.name.empty() ? "data.features[" + std::to_string(i) + "]"
                                : "data.features: feature '" + f.name + "'";
      return make_input_error(who + ": " + what);
    };
    if (!plain_name(f.name))
      return bad("expected a name of 1-128 letters, digits, '_', '-' or '.'");
    if (!names.insert(f.name).second)
      return bad("the name is used by another feature (names are unique)");
    const bool sparse = f.kind != feature_kind::dense;
    if (!sparse) {
      if (!f.table.empty() || f.pool_given || f.max_length != 0 || f.weights)
        return bad("a dense feature takes no table, pooling, max_length or weights");
      out.slot_of.push_back(-1);
      out.table_of.push_back(-1);
      out.dense_of.push_back(out.dense++);
      continue;
    }
    auto table = f.table.empty() ? f.name : f.table;
    if (!plain_name(table))
      return bad("table: expected a name of 1-128 letters, digits, '_', '-' or '.'");
    if (f.kind == feature_kind::id && (f.max_length != 0 || f.weights || f.pool_given))
      return bad("an id feature (one id per sample) takes no max_length, weights or pooling");
    if (f.unpooled && f.kind != feature_kind::sequence)
      return bad("pooling: none is for a sequence (a bag's ids have no order to keep)");
    if (f.kind == feature_kind::sequence && f.max_length <= 0)
      return bad("a sequence needs max_length (the most recent ids kept), in [1, "
                 + std::to_string(feature_ids_max) + "]");
    if (f.max_length < 0 || f.max_length > feature_ids_max)
      return bad("max_length: expected [1, " + std::to_string(feature_ids_max) + "], got "
                 + std::to_string(f.max_length));
    auto [it, added] = tables.emplace(table, static_cast<int>(out.tables.size()));
    if (added)
      out.tables.push_back(table);
    out.table_of.push_back(it->second);
    out.dense_of.push_back(-1);
    out.slot_of.push_back(out.slots++);
    out.slot_pool.push_back(f.pool_given ? f.pool : default_pool);
    out.weighted = out.weighted || f.weights;
    if (f.unpooled) {
      out.sequences.slots.push_back(out.slots - 1);
      out.sequences.lengths.push_back(f.max_length);
      out.sequences.names.push_back(f.name);
    }
  }
  if (!schema.empty() && out.slots == 0)
    return make_input_error("data.features: expected at least one id, bag or sequence feature");
  return out;
}

uint64_t feature_id_hash(int table, uint64_t value) { return slot_id_hash(table, value); }

uint64_t feature_string_id_hash(int table, std::string_view value) {
  uint64_t h = 0x73747269'6e670000ULL;  // "string": a domain of its own
  for (unsigned char c : value)
    h = mix64(h ^ c) + 0x9e3779b97f4a7c15ULL;
  h = mix64(h ^ value.size());
  return slot_id_hash(table, h);
}

// Flow YAML (names quoted: a feature may be called "null" or "true").
std::string feature_schema_text(const feature_schema& schema) {
  std::string s = "[";
  for (size_t i = 0; i < schema.size(); ++i) {
    auto& f = schema[i];
    s.append(i ? ", " : "").append("{name: \"").append(f.name).append("\"");
    s.append(", kind: ").append(feature_kind_name(f.kind));
    if (!f.table.empty())
      s.append(", table: \"").append(f.table).append("\"");
    if (f.unpooled)
      s.append(", pooling: none");
    else if (f.pool_given)
      s.append(", pooling: ").append(feature_pooling_name(f.pool));
    if (f.max_length != 0)
      s.append(", max_length: ").append(std::to_string(f.max_length));
    if (f.weights)
      s.append(", weights: true");
    s.append("}");
  }
  return s + "]";
}

}  // namespace satrap
