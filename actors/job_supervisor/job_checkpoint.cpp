#include "actors/job_supervisor/job_checkpoint.hpp"

#include "models/embedding/embedding_snapshot.hpp"
#include "models/embedding/snapshot_file.hpp"
#include "runtime/error.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

namespace satrap {

namespace fs = std::filesystem;

namespace {

std::string seq_text(uint64_t seq) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%08llu", static_cast<unsigned long long>(seq));
  return buf;
}

std::string meta_name(uint64_t seq) { return "checkpoint-" + seq_text(seq) + ".json"; }

// Disk full, a read-only folder and such are no_resource: the job fails at once, no restart.
caf::error io_error(const std::string& what) { return make_error(io_errc_of(what), what); }

}  // namespace

std::string checkpoint_embedding_root(const std::string& dir) {
  return (fs::path(dir) / "embeddings").string();
}

caf::error checkpoint_write_dense(const std::string& dir, checkpoint_meta& meta,
                                  const capnp_payload& state) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    return io_error(dir + ": cannot create the checkpoint directory: " + ec.message());
  meta.dense_file = "dense-" + seq_text(meta.sequence) + ".bin";
  // The snapshot files' framing: checksummed trailer, fsync, atomic rename. A flat Cap'n Proto
  // message is a whole number of 8-byte words, as the framing needs.
  snapshot_file_writer out((fs::path(dir) / meta.dense_file).string());
  out.append(state.bytes.data(), state.bytes.size());
  auto written = out.finish();
  if (!written)
    return io_error(written.error());
  meta.dense_bytes = written->bytes;
  meta.dense_checksum = written->checksum;
  return caf::none;
}

caf::error checkpoint_write_meta(const std::string& dir, const checkpoint_meta& m) {
  nlohmann::json j = {{"sequence", m.sequence},         {"step", m.step},
                      {"embedding_sequence", m.embedding_sequence},
                      {"full", m.full},                 {"dense_file", m.dense_file},
                      {"dense_bytes", m.dense_bytes},   {"dense_checksum", m.dense_checksum},
                      {"trainers", m.trainers},         {"shards", m.shards},
                      {"job", m.job},                   {"samples", m.samples},
                      {"embedding_rows", m.embedding_rows},
                      {"step_losses", m.step_losses}};
  auto path = fs::path(dir) / meta_name(m.sequence);
  auto tmp = path;
  tmp += ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << j.dump() << "\n";
    out.close();
    if (!out)
      return io_error(tmp.string() + ": cannot write the checkpoint manifest");
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec)
    return io_error(path.string() + ": cannot commit the checkpoint manifest: " + ec.message());
  return caf::none;
}

caf::expected<std::optional<checkpoint_meta>> checkpoint_latest(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return std::optional<checkpoint_meta>{};
  static const std::regex name_re("checkpoint-([0-9]{8})\\.json");
  uint64_t best = 0;
  for (auto& e : fs::directory_iterator(dir, ec)) {
    std::smatch m;
    auto name = e.path().filename().string();
    if (std::regex_match(name, m, name_re))
      best = std::max<uint64_t>(best, std::stoull(m[1].str()));
  }
  if (best == 0)
    return std::optional<checkpoint_meta>{};
  auto path = (fs::path(dir) / meta_name(best)).string();
  std::ifstream in(path);
  checkpoint_meta m;
  try {
    auto j = nlohmann::json::parse(in);
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
  } catch (const std::exception& e) {
    return make_error(errc::invalid_config, path + ": not a valid checkpoint manifest: " + e.what());
  }
  if (m.dense_file.empty() || m.dense_file.find('/') != std::string::npos || m.dense_file == "."
      || m.dense_file == "..")
    return make_error(errc::invalid_config, path + ": dense_file '" + m.dense_file
                                              + "' is not a file name inside the checkpoint folder");
  if (m.sequence != best)
    return make_error(errc::invalid_config, path + ": sequence " + std::to_string(m.sequence)
                                              + " does not match its file name");
  return std::optional<checkpoint_meta>{std::move(m)};
}

namespace {

// Sequences of the files named <prefix><8 digits><suffix> in `dir`.
std::map<uint64_t, std::vector<fs::path>> numbered(const fs::path& dir, const std::regex& re) {
  std::map<uint64_t, std::vector<fs::path>> out;
  std::error_code ec;
  for (auto& e : fs::directory_iterator(dir, ec)) {
    std::smatch m;
    auto name = e.path().filename().string();
    if (std::regex_match(name, m, re))
      out[std::stoull(m[1].str())].push_back(e.path());
  }
  return out;
}

uint64_t tree_bytes(const fs::path& p) {
  std::error_code ec;
  if (fs::is_regular_file(p, ec))
    return fs::file_size(p, ec);
  uint64_t n = 0;
  for (auto& e : fs::recursive_directory_iterator(p, ec))
    if (e.is_regular_file(ec))
      n += e.file_size(ec);
  return n;
}

}  // namespace

caf::expected<checkpoint_prune_stats> checkpoint_prune(const std::string& dir, int32_t keep) {
  checkpoint_prune_stats stats;
  static const std::regex meta_re("checkpoint-([0-9]{8})\\.json(\\.tmp)?");
  static const std::regex dense_re("dense-([0-9]{8})\\.bin(\\.tmp)?");
  static const std::regex snap_re("snap-([0-9]{8})");
  if (keep <= 0)
    return stats;
  auto metas = numbered(dir, meta_re);
  std::vector<uint64_t> complete;
  for (auto& [seq, paths] : metas)
    for (auto& p : paths)
      if (p.extension() == ".json")
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
      auto parent = snapshot_parent(root, s);
      if (!parent)
        return make_error(errc::io_failure, "checkpoint retention: " + parent.error()
                                              + " (nothing deleted)");
      s = parent.value();
    }
  auto remove = [&](const fs::path& p) {
    auto bytes = tree_bytes(p);
    std::error_code ec;
    fs::remove_all(p, ec);
    if (!ec)
      stats.bytes_freed += bytes;
    return !ec;
  };
  for (auto& [seq, paths] : metas)  // manifests first: these checkpoints are no longer complete
    if (seq < newest && !kept.count(seq))
      for (auto& p : paths)
        if (remove(p) && p.extension() == ".json")
          ++stats.checkpoints_removed;
  for (auto& [seq, paths] : numbered(dir, dense_re))
    if (seq < newest && !kept.count(seq))
      for (auto& p : paths)
        remove(p);
  for (auto& [seq, paths] : numbered(root, snap_re))
    if (seq < newest && !needed.count(seq))
      for (auto& p : paths)
        if (remove(p))
          ++stats.snapshots_removed;
  return stats;
}

caf::expected<capnp_payload> checkpoint_read_dense(const std::string& dir,
                                                   const checkpoint_meta& meta) {
  auto file = mapped_file::open((fs::path(dir) / meta.dense_file).string(), meta.dense_bytes,
                                meta.dense_checksum);
  if (!file)
    return io_error(file.error());
  auto* data = reinterpret_cast<const char*>(file->payload());
  capnp_payload p;
  p.bytes.assign(data, data + file->payload_bytes());
  return p;
}

}  // namespace satrap
