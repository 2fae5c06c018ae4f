#include "models/data/chunk_store.hpp"
#include "models/assert.hpp"

#include "satrap_schemas/dataset.capnp.h"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <numeric>

namespace satrap {

namespace {

template <class T>
capnp::Data::Reader blob(const std::vector<T>& v) {
  return {reinterpret_cast<const kj::byte*>(v.data()), v.size() * sizeof(T)};
}

template <class T>
const T* view(capnp::Data::Reader d, size_t count) {
  return d.size() == count * sizeof(T) ? reinterpret_cast<const T*>(d.begin()) : nullptr;
}

result<ok_t> write_message(const std::string& path, capnp::MessageBuilder& mb) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0)
    return make_model_error(path + ": cannot write: " + std::strerror(errno));
  try {
    capnp::writeMessageToFd(fd, mb);
  } catch (const kj::Exception& e) {
    ::close(fd);
    return make_model_error(path + ": cannot write: " + e.getDescription().cStr());
  }
  if (::close(fd) != 0)
    return make_model_error(path + ": cannot write: " + std::strerror(errno));
  return ok_t{};
}

capnp::ReaderOptions big_reader() {
  capnp::ReaderOptions o;
  o.traversalLimitInWords = uint64_t{1} << 40;
  return o;
}

}  // namespace

chunk_builder::chunk_builder(int slots, int dense_features, bool weighted, int tasks)
    : slots_(slots),
      dense_features_(dense_features),
      weighted_(weighted),
      tasks_(static_cast<size_t>(tasks)) {
  SATRAP_ASSERT(tasks >= 1);
}

void chunk_builder::add(const text_sample& s) {
  SATRAP_ASSERT(static_cast<int>(s.dense.size()) == dense_features_
                && (s.weights.empty() || s.weights.size() == s.features.size())
                && s.more_labels.size() + 1 == tasks_);
  order_.resize(s.features.size());
  std::iota(order_.begin(), order_.end(), 0);
  std::stable_sort(order_.begin(), order_.end(),
                   [&](int a, int b) { return s.features[a].first < s.features[b].first; });
  size_t k = 0;
  for (int slot = 0; slot < slots_; ++slot) {
    auto before = ids_.size();
    for (; k < order_.size() && s.features[order_[k]].first == slot; ++k) {
      ids_.push_back(s.features[order_[k]].second);
      if (weighted_)
        weights_.push_back(s.weights.empty() ? 1.0f : s.weights[static_cast<size_t>(order_[k])]);
    }
    if (ids_.size() == before) {
      ids_.push_back(missing_id(slot));
      if (weighted_)
        weights_.push_back(1.0f);
    }
    offsets_.push_back(static_cast<uint32_t>(ids_.size()));
  }
  SATRAP_ASSERT(k == order_.size());
  dense_.insert(dense_.end(), s.dense.begin(), s.dense.end());
  labels_.push_back(s.label);
  labels_.insert(labels_.end(), s.more_labels.begin(), s.more_labels.end());
}

result<ok_t> chunk_builder::write(const std::string& path) {
  capnp::MallocMessageBuilder mb;
  auto c = mb.initRoot<schema::DatasetChunk>();
  c.setSamples(samples());
  c.setSlots(static_cast<uint32_t>(slots_));
  c.setDenseFeatures(static_cast<uint32_t>(dense_features_));
  c.setOffsets(blob(offsets_));
  c.setIds(blob(ids_));
  c.setDense(blob(dense_));
  c.setLabels(blob(labels_));
  if (weighted_)
    c.setWeights(blob(weights_));
  auto written = write_message(path, mb);
  offsets_.assign(1, 0);
  weights_.clear();
  ids_.clear();
  dense_.clear();
  labels_.clear();
  return written;
}

result<ok_t> manifest_write(const std::string& dir, const dataset_manifest& m) {
  capnp::MallocMessageBuilder mb;
  auto out = mb.initRoot<schema::DatasetManifest>();
  out.setVersion(dataset_cache_version);
  out.setKey(m.key);
  out.setSlots(static_cast<uint32_t>(m.slots));
  out.setDenseFeatures(static_cast<uint32_t>(m.dense_features));
  out.setSamples(m.stats.samples);
  auto chunks = out.initChunks(static_cast<unsigned>(m.chunks.size()));
  for (size_t i = 0; i < m.chunks.size(); ++i) {
    chunks[i].setFile(m.chunks[i].file);
    chunks[i].setSamples(m.chunks[i].samples);
  }
  auto skipped = out.initSkipped(static_cast<unsigned>(m.stats.skipped.size()));
  unsigned i = 0;
  for (auto& [reason, count] : m.stats.skipped) {
    skipped[i].setReason(reason);
    skipped[i++].setCount(count);
  }
  out.setLines(m.stats.lines);
  out.setParseSeconds(m.stats.parse_seconds);
  out.setTextBytes(m.stats.text_bytes);
  out.setWeighted(m.weighted);
  out.setTasks(static_cast<uint32_t>(m.tasks));
  auto tmp = dir + "/manifest.bin.tmp";
  if (auto written = write_message(tmp, mb); !written)
    return written;
  if (std::rename(tmp.c_str(), (dir + "/manifest.bin").c_str()) != 0)
    return make_model_error(dir + "/manifest.bin: cannot write: " + std::strerror(errno));
  return ok_t{};
}

result<dataset_manifest> manifest_read(const std::string& dir) {
  auto unreadable = [&] {
    return make_model_error(dir + "/manifest.bin: missing or unreadable cache manifest");
  };
  int fd = ::open((dir + "/manifest.bin").c_str(), O_RDONLY);
  if (fd < 0)
    return unreadable();
  dataset_manifest m;
  try {
    capnp::StreamFdMessageReader reader(fd, big_reader());
    auto in = reader.getRoot<schema::DatasetManifest>();
    if (in.getVersion() != dataset_cache_version) {
      ::close(fd);
      return unreadable();
    }
    m.key = in.getKey();
    m.slots = static_cast<int>(in.getSlots());
    m.dense_features = static_cast<int>(in.getDenseFeatures());
    m.stats.samples = in.getSamples();
    for (auto c : in.getChunks())
      m.chunks.push_back({c.getFile(), c.getSamples()});
    for (auto s : in.getSkipped())
      m.stats.skipped[s.getReason()] = s.getCount();
    m.stats.lines = in.getLines();
    m.stats.parse_seconds = in.getParseSeconds();
    m.stats.text_bytes = in.getTextBytes();
    m.weighted = in.getWeighted();
    m.tasks = std::max<int>(1, static_cast<int>(std::min<uint32_t>(in.getTasks(), 1024)));
  } catch (const kj::Exception&) {
    ::close(fd);
    return unreadable();
  }
  ::close(fd);
  return m;
}

result<std::unique_ptr<chunk_store>> chunk_store::open(const std::string& dir) {
  std::unique_ptr<chunk_store> store(new chunk_store());
  // Held shared while mapped: a size cap or `satrap cache clean` leaves this data set alone.
  auto locked = cache_lock::acquire(dir, cache_lock::mode::shared, true, store->lock_);
  if (!locked)
    return locked.failure();
  if (locked.value() != cache_lock::outcome::held)  // deleted meanwhile
    return make_model_error(dir + "/manifest.bin: missing or unreadable cache manifest");
  auto manifest = manifest_read(dir);
  if (!manifest)
    return manifest.failure();
  store->manifest_ = std::move(manifest.value());
  for (auto& entry : store->manifest_.chunks) {
    mapped_chunk c;
    auto mapped = store->map_chunk(dir + "/" + entry.file, c);
    if (!mapped || c.samples != entry.samples) {
      if (c.base)
        ::munmap(c.base, c.bytes);
      if (!mapped)
        return mapped.failure();
      return make_model_error(dir + "/" + entry.file + ": sample count differs from the manifest");
    }
    store->chunks_.push_back(c);
    store->starts_.push_back(store->starts_.back() + c.samples);
  }
  return store;
}

result<ok_t> chunk_store::map_chunk(const std::string& path, mapped_chunk& c) const {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0)
    return make_model_error(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  ::fstat(fd, &st);
  c.bytes = static_cast<size_t>(st.st_size);
  c.base = c.bytes ? ::mmap(nullptr, c.bytes, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
  ::close(fd);
  if (c.base == MAP_FAILED || c.bytes % sizeof(capnp::word) != 0) {
    c.base = c.base == MAP_FAILED ? nullptr : c.base;
    return make_model_error(path + ": cannot map a chunk file");
  }
  auto bad = [&] { return make_model_error(path + ": corrupt chunk file"); };
  try {
    kj::ArrayPtr<const capnp::word> words(static_cast<const capnp::word*>(c.base),
                                          c.bytes / sizeof(capnp::word));
    capnp::FlatArrayMessageReader reader(words, big_reader());
    auto in = reader.getRoot<schema::DatasetChunk>();
    c.samples = in.getSamples();
    auto n = static_cast<size_t>(c.samples);
    if (static_cast<int>(in.getSlots()) != slots()
        || static_cast<int>(in.getDenseFeatures()) != dense_features())
      return bad();
    c.offsets = view<uint32_t>(in.getOffsets(), n * static_cast<size_t>(slots()) + 1);
    c.labels = view<float>(in.getLabels(), n * static_cast<size_t>(tasks()));
    c.dense = view<float>(in.getDense(), n * static_cast<size_t>(dense_features()));
    if (!c.offsets || !c.labels || !c.dense || c.offsets[0] != 0)
      return bad();
    for (size_t b = 0; b + 1 < n * static_cast<size_t>(slots()) + 1; ++b)
      if (c.offsets[b + 1] <= c.offsets[b])
        return bad();
    c.ids = view<uint64_t>(in.getIds(), c.offsets[n * static_cast<size_t>(slots())]);
    if (!c.ids)
      return bad();
    if (weighted()) {
      c.weights = view<float>(in.getWeights(), c.offsets[n * static_cast<size_t>(slots())]);
      if (!c.weights)
        return bad();
    }
  } catch (const kj::Exception&) {
    return bad();
  }
  return ok_t{};
}

chunk_store::~chunk_store() {
  for (auto& c : chunks_)
    ::munmap(c.base, c.bytes);
}

void chunk_store::append_sample(int64_t i, batch& b) const {
  SATRAP_ASSERT(i >= 0 && i < samples());
  auto k =
    static_cast<size_t>(std::upper_bound(starts_.begin(), starts_.end(), i) - starts_.begin() - 1);
  const auto& c = chunks_[k];
  auto row = static_cast<size_t>(i - starts_[k]);
  auto slots = static_cast<size_t>(this->slots());
  auto first = c.offsets[row * slots], last = c.offsets[(row + 1) * slots];
  auto base = static_cast<uint32_t>(b.ids.size());
  for (size_t s = 1; s <= slots; ++s)
    b.offsets.push_back(base + c.offsets[row * slots + s] - first);
  b.ids.insert(b.ids.end(), c.ids + first, c.ids + last);
  if (c.weights)
    b.weights.insert(b.weights.end(), c.weights + first, c.weights + last);
  auto d = static_cast<size_t>(dense_features());
  b.dense.insert(b.dense.end(), c.dense + row * d, c.dense + (row + 1) * d);
  auto t = static_cast<size_t>(tasks());
  b.labels.insert(b.labels.end(), c.labels + row * t, c.labels + (row + 1) * t);
}

}  // namespace satrap
