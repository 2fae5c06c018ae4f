#include "actors/job_supervisor/job_checkpoint.hpp"

#include "runtime/error.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstring>
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

uint64_t checkpoint_checksum(const char* data, size_t size) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a, 8 bytes at a time folded in
  size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    uint64_t w;
    std::memcpy(&w, data + i, 8);
    h = (h ^ w) * 1099511628211ull;
  }
  for (; i < size; ++i)
    h = (h ^ static_cast<unsigned char>(data[i])) * 1099511628211ull;
  return h;
}

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
  auto path = (fs::path(dir) / meta.dense_file).string();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(state.bytes.data(), static_cast<std::streamsize>(state.bytes.size()));
  out.close();
  if (!out)
    return io_error(path + ": cannot write the dense state");
  meta.dense_bytes = state.bytes.size();
  meta.dense_checksum = checkpoint_checksum(state.bytes.data(), state.bytes.size());
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
  if (m.sequence != best)
    return make_error(errc::invalid_config, path + ": sequence " + std::to_string(m.sequence)
                                              + " does not match its file name");
  return std::optional<checkpoint_meta>{std::move(m)};
}

caf::expected<capnp_payload> checkpoint_read_dense(const std::string& dir,
                                                   const checkpoint_meta& meta) {
  auto path = (fs::path(dir) / meta.dense_file).string();
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return io_error(path + ": cannot open the dense state");
  capnp_payload p;
  p.bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  if (p.bytes.size() != meta.dense_bytes)
    return io_error(path + ": expected " + std::to_string(meta.dense_bytes) + " bytes, found "
                    + std::to_string(p.bytes.size()));
  if (checkpoint_checksum(p.bytes.data(), p.bytes.size()) != meta.dense_checksum)
    return io_error(path + ": checksum does not match the checkpoint manifest");
  return p;
}

}  // namespace satrap
