#include "actors/job_supervisor/job_checkpoint.hpp"

#include "models/embedding/snapshot_file.hpp"
#include "runtime/error.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
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

caf::error io_error(const std::string& what) { return make_error(errc::io_failure, what); }

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
