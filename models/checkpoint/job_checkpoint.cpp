#include "models/checkpoint/job_checkpoint.hpp"

#include "models/embedding/embedding_snapshot.hpp"
#include "models/embedding/snapshot_file.hpp"
#include "models/io_cause.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <map>
#include <regex>
#include <set>

namespace satrap {

namespace {

std::string seq_text(uint64_t seq) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%08llu", static_cast<unsigned long long>(seq));
  return buf;
}

std::string meta_name(uint64_t seq) { return "checkpoint-" + seq_text(seq) + ".json"; }

std::string join(const std::string& dir, const std::string& name) { return dir + "/" + name; }

}  // namespace

std::string checkpoint_embedding_root(const std::string& dir) { return join(dir, "embeddings"); }

result<ok_t> checkpoint_write_dense(const std::string& dir, checkpoint_meta& meta,
                                    std::span<const char> state, env& e) {
  if (auto made = e.create_dirs(dir); !made)
    return make_model_error(
      dir + ": cannot create the checkpoint directory: " + io_cause(made.error()));
  meta.dense_file = "dense-" + seq_text(meta.sequence) + ".bin";
  // The snapshot files' framing: checksummed trailer, fsync, atomic rename. A flat Cap'n Proto
  // message is a whole number of 8-byte words, as the framing needs.
  snapshot_file_writer out(join(dir, meta.dense_file), e);
  out.append(state.data(), state.size());
  auto written = out.finish();
  if (!written)
    return written.failure();
  meta.dense_bytes = written->bytes;
  meta.dense_checksum = written->checksum;
  return ok_t{};
}

result<ok_t> checkpoint_write_meta(const std::string& dir, const checkpoint_meta& m, env& e) {
  nlohmann::json j = {{"sequence", m.sequence},
                      {"step", m.step},
                      {"embedding_sequence", m.embedding_sequence},
                      {"full", m.full},
                      {"dense_file", m.dense_file},
                      {"dense_bytes", m.dense_bytes},
                      {"dense_checksum", m.dense_checksum},
                      {"trainers", m.trainers},
                      {"shards", m.shards},
                      {"job", m.job},
                      {"samples", m.samples},
                      {"embedding_rows", m.embedding_rows},
                      {"step_losses", m.step_losses}};
  if (!m.stream_positions.empty())  // a stream's next offsets at the cut (kafka_source.hpp)
    j["stream_positions"] = nlohmann::json::parse(m.stream_positions);
  auto path = join(dir, meta_name(m.sequence));
  // A temporary file renamed over the name (not synced, as before the env: the dense and
  // embedding files it names are).
  if (auto r = e.write_file_atomic(path, j.dump() + "\n", /*sync=*/false); !r)
    return make_model_error(path
                            + ": cannot write the checkpoint manifest: " + io_cause(r.error()));
  return ok_t{};
}

result<std::optional<checkpoint_meta>> checkpoint_latest(const std::string& dir, env& e) {
  if (!e.is_dir(dir))
    return std::optional<checkpoint_meta>{};
  static const std::regex name_re("checkpoint-([0-9]{8})\\.json");
  uint64_t best = 0;
  if (auto names = e.list_dir(dir))
    for (auto& name : names.value()) {
      std::smatch m;
      if (std::regex_match(name, m, name_re))
        best = std::max<uint64_t>(best, std::stoull(m[1].str()));
    }
  if (best == 0)
    return std::optional<checkpoint_meta>{};
  auto path = join(dir, meta_name(best));
  auto text = e.read_file(path);
  if (!text)  // as a manifest that does not parse: invalid_config
    return make_input_error(path + ": not a valid checkpoint manifest: " + text.error());
  checkpoint_meta m;
  try {
    auto j = nlohmann::json::parse(text.value());
    m.sequence = j.at("sequence").get<uint64_t>();
    m.step = j.at("step").get<int64_t>();
    m.embedding_sequence = j.at("embedding_sequence").get<uint64_t>();
    m.full = j.at("full").get<bool>();
    m.dense_file = j.at("dense_file").get<std::string>();
    m.dense_bytes = j.at("dense_bytes").get<uint64_t>();
    m.dense_checksum = j.at("dense_checksum").get<uint64_t>();
    m.trainers = j.at("trainers").get<int32_t>();
    m.shards = j.at("shards").get<int32_t>();
    m.job = j.at("job").get<std::string>();
    m.samples = j.at("samples").get<int64_t>();
    m.embedding_rows = j.value("embedding_rows", int64_t{0});
    m.step_losses = j.at("step_losses").get<std::vector<double>>();
    if (j.contains("stream_positions"))
      m.stream_positions = j.at("stream_positions").dump();
  } catch (const std::exception& x) {
    return make_input_error(path + ": not a valid checkpoint manifest: " + x.what());
  }
  if (m.dense_file.empty() || m.dense_file.find('/') != std::string::npos || m.dense_file == "."
      || m.dense_file == "..")
    return make_input_error(path + ": dense_file '" + m.dense_file
                            + "' is not a file name inside the checkpoint folder");
  if (m.sequence != best)
    return make_input_error(path + ": sequence " + std::to_string(m.sequence)
                            + " does not match its file name");
  return std::optional<checkpoint_meta>{std::move(m)};
}

namespace {

// Paths of the entries named by `re` (its group 1: 8 digits) in `dir`, by that number.
std::map<uint64_t, std::vector<std::string>> numbered(env& e, const std::string& dir,
                                                      const std::regex& re) {
  std::map<uint64_t, std::vector<std::string>> out;
  auto names = e.list_dir(dir);
  if (!names)
    return out;
  for (auto& name : names.value()) {
    std::smatch m;
    if (std::regex_match(name, m, re))
      out[std::stoull(m[1].str())].push_back(join(dir, name));
  }
  return out;
}

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size()
         && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

result<checkpoint_prune_stats> checkpoint_prune(const std::string& dir, int32_t keep, env& e) {
  checkpoint_prune_stats stats;
  static const std::regex meta_re("checkpoint-([0-9]{8})\\.json(\\.tmp)?");
  static const std::regex dense_re("dense-([0-9]{8})\\.bin(\\.tmp)?");
  static const std::regex snap_re("snap-([0-9]{8})");
  if (keep <= 0)
    return stats;
  auto metas = numbered(e, dir, meta_re);
  std::vector<uint64_t> complete;
  for (auto& [seq, paths] : metas)
    for (auto& p : paths)
      if (ends_with(p, ".json"))
        complete.push_back(seq);
  if (complete.size() <= static_cast<size_t>(keep))
    return stats;
  const uint64_t newest = complete.back();
  std::set<uint64_t> kept(complete.end() - keep, complete.end());
  // The kept checkpoints' snapshots and their parents back to a full one.
  auto root = checkpoint_embedding_root(dir);
  std::set<uint64_t> needed;
  for (auto seq : kept)
    for (uint64_t s = seq; s != 0 && !needed.count(s);) {
      needed.insert(s);
      auto parent = snapshot_parent(root, s, e);
      if (!parent)
        return make_model_error("checkpoint retention: " + parent.error() + " (nothing deleted)");
      s = parent.value();
    }
  auto remove = [&](const std::string& p) {
    auto bytes = e.remove_all(p);
    if (bytes)
      stats.bytes_freed += bytes.value();
    return bytes.ok();
  };
  for (auto& [seq, paths] : metas)  // manifests first: these checkpoints are no longer complete
    if (seq < newest && !kept.count(seq))
      for (auto& p : paths)
        if (remove(p) && ends_with(p, ".json"))
          ++stats.checkpoints_removed;
  for (auto& [seq, paths] : numbered(e, dir, dense_re))
    if (seq < newest && !kept.count(seq))
      for (auto& p : paths)
        remove(p);
  for (auto& [seq, paths] : numbered(e, root, snap_re))
    if (seq < newest && !needed.count(seq))
      for (auto& p : paths)
        if (remove(p))
          ++stats.snapshots_removed;
  return stats;
}

result<std::vector<char>> checkpoint_read_dense(const std::string& dir, const checkpoint_meta& meta,
                                                env& e) {
  auto file =
    mapped_file::open(join(dir, meta.dense_file), meta.dense_bytes, meta.dense_checksum, e);
  if (!file)
    return file.failure();
  const auto* data = reinterpret_cast<const char*>(file->payload());
  return std::vector<char>(data, data + file->payload_bytes());
}

}  // namespace satrap
