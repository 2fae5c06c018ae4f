#include "models/data/kafka_source.hpp"

#include "models/data/jsonl_format.hpp"
#include "models/data/sample_builder.hpp"
#include "models/data/tfrecord_format.hpp"

#include <librdkafka/rdkafka.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <unistd.h>

namespace satrap {

namespace {

rd_kafka_t* rk_of(void* p) { return static_cast<rd_kafka_t*>(p); }

// A consumer handle with the job's settings; "" or the error.
std::string make_handle(const kafka_options& o, bool with_group, rd_kafka_t*& out) {
  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  auto set = [&](const std::string& k, const std::string& v) -> std::string {
    if (rd_kafka_conf_set(conf, k.c_str(), v.c_str(), err, sizeof err) != RD_KAFKA_CONF_OK)
      return k + "=" + v + ": " + err;
    return "";
  };
  std::vector<std::pair<std::string, std::string>> kv = {
    {"bootstrap.servers", o.brokers},
    {"enable.auto.commit", "false"},
    {"enable.auto.offset.store", "false"},
    {"enable.partition.eof", "false"},
    {"auto.offset.reset", "error"},
    {"allow.auto.create.topics",
     "false"},  // a misspelt topic is an error, not a new topic        {"log_level", "3"},
  };
  if (with_group)
    kv.emplace_back("group.id", o.group);
  for (auto& c : o.config)
    kv.push_back(c);
  for (auto& [k, v] : kv)
    if (auto e = set(k, v); !e.empty()) {
      rd_kafka_conf_destroy(conf);
      return "data.kafka.config: " + e;
    }
  out = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
  if (!out)
    return std::string("data.kafka: cannot make a consumer: ") + err;  // (conf is freed)
  return "";
}

std::string part_name(const kafka_partition& p) {
  return "topic '" + p.topic + "' partition " + std::to_string(p.partition);
}

}  // namespace

// One partition's reader: a simple-consumer queue of the shared handle, its parser and where it is.
struct kafka_source::reader {
  std::mutex mu;
  bool started = false;
  int64_t next = 0;             // the next offset this reader hands out
  std::string pending;          // a message read past the last range's end (kept for the next)
  int64_t pending_offset = -1;  // its offset; -1: none
  text_sample sample;
  std::unique_ptr<jsonl_parser> jsonl;
  std::unique_ptr<tfrecord_example_parser> tfrecord;
  sample_builder builder;
};

kafka_source::~kafka_source() {
  if (monitor_.joinable()) {
    {
      std::lock_guard<std::mutex> g(monitor_mu_);
      monitor_stop_ = true;
    }
    monitor_cv_.notify_all();
    monitor_.join();
  }
  for (size_t i = 0; i < readers_.size(); ++i)
    if (readers_[i]->started)
      rd_kafka_consume_stop(static_cast<rd_kafka_topic_t*>(topics_[i]), parts_[i].partition);
  std::vector<rd_kafka_topic_t*> distinct;
  for (auto* t : topics_)
    if (std::find(distinct.begin(), distinct.end(), t) == distinct.end())
      distinct.push_back(static_cast<rd_kafka_topic_t*>(t));
  for (auto* t : distinct)
    rd_kafka_topic_destroy(t);
  if (rk_)
    rd_kafka_destroy(rk_of(rk_));
  if (trace_)
    std::fclose(trace_);
  if (committer_)
    rd_kafka_destroy(rk_of(committer_));
}

std::string kafka_positions_json(const std::vector<kafka_position>& positions) {
  auto j = nlohmann::json::array();
  for (auto& p : positions)
    j.push_back({{"topic", p.topic}, {"partition", p.partition}, {"next", p.next}});
  return j.dump();
}

namespace {

std::string partitions_json(const std::vector<kafka_partition>& parts) {
  auto j = nlohmann::json::array();
  for (auto& p : parts)
    j.push_back(
      {{"topic", p.topic}, {"partition", p.partition}, {"start", p.start}, {"end", p.end}});
  return nlohmann::json{{"partitions", j}}.dump(1);
}

}  // namespace

result<ok_t> kafka_source::resolve(const kafka_options& o) {
  // Kept from an earlier open of this job: every process and every resumption agree.
  if (!o.positions_file.empty() && std::filesystem::exists(o.positions_file)) {
    std::ifstream in(o.positions_file);
    try {
      auto j = nlohmann::json::parse(in);
      for (auto& p : j.at("partitions"))
        parts_.push_back({p.at("topic").get<std::string>(), p.at("partition").get<int32_t>(),
                          p.at("start").get<int64_t>(), p.at("end").get<int64_t>()});
    } catch (const std::exception& e) {
      return make_input_error(o.positions_file + ": not the kafka positions this job wrote ("
                              + e.what() + ")");
    }
    for (auto& p : parts_)
      if (std::find(o.topics.begin(), o.topics.end(), p.topic) == o.topics.end())
        return make_input_error("data.kafka.topics: expected the topics of " + o.positions_file
                                + " (it has '" + p.topic
                                + "'): a resumed job reads the topics it started with");
    spdlog::info("kafka_positions_reused partitions={} file={}", parts_.size(), o.positions_file);
    return ok_t{};
  }
  const int timeout = static_cast<int>(o.timeout_ms);
  for (auto& name : o.topics) {
    rd_kafka_topic_t* t = rd_kafka_topic_new(rk_of(rk_), name.c_str(), nullptr);
    const rd_kafka_metadata_t* md = nullptr;
    auto err = rd_kafka_metadata(rk_of(rk_), 0, t, &md, timeout);
    rd_kafka_topic_destroy(t);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
      return make_input_error("data.kafka.brokers: no broker of '" + o.brokers
                              + "' answered within timing.kafka_timeout_ms ("
                              + std::to_string(o.timeout_ms) + " ms): " + rd_kafka_err2str(err));
    std::vector<int32_t> ids;
    std::string missing;
    for (int i = 0; i < md->topic_cnt; ++i) {
      auto& mt = md->topics[i];
      if (mt.err != RD_KAFKA_RESP_ERR_NO_ERROR)
        missing = rd_kafka_err2str(mt.err);
      for (int k = 0; k < mt.partition_cnt; ++k)
        ids.push_back(mt.partitions[k].id);
    }
    rd_kafka_metadata_destroy(md);
    if (!missing.empty() || ids.empty())
      return make_input_error("data.kafka.topics: topic '" + name + "' is not on the brokers ("
                              + (missing.empty() ? "no partitions" : missing) + ")");
    std::sort(ids.begin(), ids.end());
    for (auto id : ids)
      parts_.push_back({name, id, 0, -1});
  }
  std::sort(parts_.begin(), parts_.end(), [](auto& a, auto& b) {
    return std::tie(a.topic, a.partition) < std::tie(b.topic, b.partition);
  });
  for (auto& p : parts_) {
    int64_t lo = 0, hi = 0;
    auto err =
      rd_kafka_query_watermark_offsets(rk_of(rk_), p.topic.c_str(), p.partition, &lo, &hi, timeout);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
      return make_input_error("data.kafka.brokers: " + part_name(p) + ": no offsets within "
                              + "timing.kafka_timeout_ms: " + rd_kafka_err2str(err));
    p.start = o.start == kafka_start::latest ? hi : lo;
    if (o.start == kafka_start::timestamp) {
      auto* list = rd_kafka_topic_partition_list_new(1);
      rd_kafka_topic_partition_list_add(list, p.topic.c_str(), p.partition)->offset = o.start_ms;
      auto e = rd_kafka_offsets_for_times(rk_of(rk_), list, timeout);
      auto off = list->elems[0].offset;
      rd_kafka_topic_partition_list_destroy(list);
      if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
        return make_input_error("data.kafka.start: " + part_name(p) + ": no offset for time "
                                + std::to_string(o.start_ms) + ": " + rd_kafka_err2str(e));
      p.start = off < 0 ? hi : off;  // no message at or after that time yet: from the end
    }
    p.end = o.end == kafka_end::end_offsets ? hi : -1;
  }
  if (!o.positions_file.empty()) {
    // Written to a temporary file and linked into place: a concurrent first open of another
    // process of the job either wins or reads the winner's.
    auto tmp = o.positions_file + ".tmp." + std::to_string(::getpid());
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(o.positions_file).parent_path(), ec);
    {
      std::ofstream out(tmp);
      out << partitions_json(parts_) << "\n";
      if (!out.flush())
        return make_model_error(tmp + ": cannot write the kafka positions");
    }
    if (::link(tmp.c_str(), o.positions_file.c_str()) != 0) {
      std::filesystem::remove(tmp);
      parts_.clear();
      return resolve(o);  // another process was first: read its positions
    }
    std::filesystem::remove(tmp);
  }
  for (auto& p : parts_)
    spdlog::info("kafka_partition topic={} partition={} start={} end={}", p.topic, p.partition,
                 p.start, p.end);
  return ok_t{};
}

result<std::unique_ptr<kafka_source>> kafka_source::open(const kafka_options& options,
                                                         const text_format_options& format) {
  if (auto checked = text_format_check(format); !checked)
    return make_input_error("data.kafka.format: " + checked.error());
  std::unique_ptr<kafka_source> s(new kafka_source());
  s->options_ = options;
  s->format_ = format;
  s->slots_ = text_format_slots(format);
  s->dense_ = text_format_dense_features(format);
  s->tasks_ = text_format_tasks(format);
  if (text_format_named(format.format)) {
    auto layout = feature_schema_layout(format.features, pooling::sum);
    s->weighted_ = layout && layout->weighted;
  }
  rd_kafka_t* rk = nullptr;
  if (auto e = make_handle(options, false, rk); !e.empty())
    return make_input_error(e);
  s->rk_ = rk;
  if (auto r = s->resolve(options); !r)
    return r.failure();
  if (s->parts_.empty())
    return make_input_error("data.kafka.topics: expected at least one topic");
  if (!options.trace_file.empty()) {
    s->trace_ = std::fopen(options.trace_file.c_str(), "a");
    if (!s->trace_)
      return make_input_error("data.kafka.trace_file: cannot open '" + options.trace_file + "'");
  }
  std::map<std::string, rd_kafka_topic_t*> handles;
  for (auto& p : s->parts_) {
    auto& h = handles[p.topic];
    if (!h)
      h = rd_kafka_topic_new(rk, p.topic.c_str(), nullptr);
    s->topics_.push_back(h);
    auto r = std::make_unique<reader>();
    r->builder.slots = s->slots_;
    r->builder.weighted = s->weighted_;
    if (format.format == text_format::jsonl)
      r->jsonl = std::make_unique<jsonl_parser>(format);
    else if (format.format == text_format::tfrecord)
      r->tfrecord = std::make_unique<tfrecord_example_parser>(format);
    s->readers_.push_back(std::move(r));
  }
  s->high_ = std::make_unique<std::atomic<int64_t>[]>(s->parts_.size());
  for (size_t i = 0; i < s->parts_.size(); ++i)
    s->high_[i] = -1;
  if (options.lag_interval_ms > 0)
    s->monitor_ = std::thread([src = s.get()] {
      std::unique_lock<std::mutex> lock(src->monitor_mu_);
      while (!src->monitor_stop_) {
        lock.unlock();
        for (size_t i = 0; i < src->parts_.size(); ++i) {
          int64_t lo = 0, hi = 0;
          auto& p = src->parts_[i];
          if (rd_kafka_query_watermark_offsets(
                rk_of(src->rk_), p.topic.c_str(), p.partition, &lo, &hi,
                static_cast<int>(std::min<int64_t>(src->options_.timeout_ms, 5000)))
              == RD_KAFKA_RESP_ERR_NO_ERROR)
            src->high_[i] = hi;
        }
        lock.lock();
        src->monitor_cv_.wait_for(lock, std::chrono::milliseconds(src->options_.lag_interval_ms),
                                  [src] { return src->monitor_stop_; });
      }
    });
  s->finite_ = options.end == kafka_end::end_offsets;
  if (s->finite_) {
    // Rounds over the partitions that still have messages, in partition order.
    const int64_t b = options.batch_size;
    std::vector<int64_t> count;
    for (auto& p : s->parts_)
      count.push_back((std::max<int64_t>(0, p.end - p.start) + b - 1) / b);
    for (int64_t k = 0;; ++k) {
      bool any = false;
      for (size_t i = 0; i < count.size(); ++i)
        if (k < count[i]) {
          s->table_.emplace_back(static_cast<int32_t>(i), k);
          any = true;
        }
      if (!any)
        break;
    }
  }
  spdlog::info("kafka_opened brokers={} partitions={} batches={} format={}", options.brokers,
               s->parts_.size(), s->batches(),
               format.format == text_format::jsonl      ? "jsonl"
               : format.format == text_format::tfrecord ? "tfrecord"
                                                        : "criteo");
  return s;
}

std::pair<int32_t, int64_t> kafka_source::locate(int64_t n) const {
  if (finite_) {
    SATRAP_ASSERT(n >= 0 && n < static_cast<int64_t>(table_.size()),
                  "kafka batch {} past the stream's end ({} batches)", n, table_.size());
    return table_[static_cast<size_t>(n)];
  }
  const auto p = static_cast<int64_t>(parts_.size());
  return {static_cast<int32_t>(n % p), n / p};
}

int64_t kafka_source::samples(data_split split) const {
  if (split != data_split::train)
    return 0;
  if (!finite_)
    return -1;
  int64_t n = 0;
  for (auto& p : parts_)
    n += std::max<int64_t>(0, p.end - p.start);
  return n;
}

batch kafka_source::make_batch(data_split split, int64_t index, int batch_size) const {
  SATRAP_ASSERT(split == data_split::train, "a kafka stream has only a training split");
  SATRAP_ASSERT(batch_size == options_.batch_size, "kafka batch size {} != the layout's {}",
                batch_size, options_.batch_size);
  if ((limit_ >= 0 && index >= limit_)
      || (finite_ && index >= static_cast<int64_t>(table_.size()))) {
    batch empty;  // past the plan: never fetched for training
    empty.index = index;
    empty.slots = slots_;
    empty.dense_features = dense_;
    empty.tasks = tasks_;
    empty.offsets.assign(1, 0);
    return empty;
  }
  auto [pi, k] = locate(index);
  const auto& part = parts_[static_cast<size_t>(pi)];
  auto* topic = static_cast<rd_kafka_topic_t*>(topics_[static_cast<size_t>(pi)]);
  const int64_t first = part.start + k * batch_size;
  const int64_t last = part.end >= 0 ? std::min(first + batch_size, part.end) : first + batch_size;
  batch b;
  b.index = index;
  b.slots = slots_;
  b.dense_features = dense_;
  b.tasks = tasks_;
  b.offsets.assign(1, 0);
  auto& r = *readers_[static_cast<size_t>(pi)];
  std::lock_guard<std::mutex> lock(r.mu);
  if (!r.started || r.next != first) {
    if (r.started)
      rd_kafka_consume_stop(topic, part.partition);
    if (rd_kafka_consume_start(topic, part.partition, first) != 0)
      throw std::runtime_error("data.kafka: " + part_name(part) + ": cannot read from offset "
                               + std::to_string(first) + ": "
                               + rd_kafka_err2str(rd_kafka_last_error()));
    r.started = true;
    r.next = first;
    r.pending_offset = -1;
  }
  auto take = [&](std::string_view payload, int64_t offset) {
    std::optional<parse_error> e;
    while (!payload.empty() && (payload.back() == '\n' || payload.back() == '\r')
           && format_.format != text_format::tfrecord)
      payload.remove_suffix(1);
    if (r.jsonl)
      e = r.jsonl->parse(payload, r.sample);
    else if (r.tfrecord)
      e = r.tfrecord->parse(payload, r.sample);
    else
      e = parse_text_line(payload, format_, r.sample);
    if (!e) {
      r.builder.add(r.sample, b);
      return;
    }
    auto where = "data.kafka: " + part_name(part) + " offset " + std::to_string(offset)
                 + ": column " + std::to_string(e->column) + ": " + e->reason + ": expected "
                 + e->expected;
    if (!options_.skip_bad)
      throw std::runtime_error(where + " (data.on_error: skip skips such messages)");
    spdlog::warn(
      "kafka_message_skipped topic={} partition={} offset={} reason={} column={} "
      "expected=\"{}\"",
      part.topic, part.partition, offset, e->reason, e->column, e->expected);
    std::lock_guard<std::mutex> g(skipped_mu_);
    ++skipped_[e->reason];
  };
  if (r.pending_offset >= first && r.pending_offset < last) {
    take(r.pending, r.pending_offset);
    r.next = r.pending_offset + 1;
    r.pending_offset = -1;
  } else if (r.pending_offset >= last) {
    r.next = last;  // the whole range is a gap
  }
  auto waited = std::chrono::steady_clock::now();
  const int poll_ms = static_cast<int>(std::min<int64_t>(options_.timeout_ms, 1000));
  while (r.next < last) {
    // Held until handled, also when a parse error throws: rd_kafka_destroy waits for every
    // message handed out to come back.
    std::unique_ptr<rd_kafka_message_t, void (*)(rd_kafka_message_t*)> held(
      rd_kafka_consume(topic, part.partition, poll_ms), rd_kafka_message_destroy);
    rd_kafka_message_t* m = held.get();
    if (!m) {
      auto waited_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - waited)
          .count();
      if (waited_ms < static_cast<double>(options_.timeout_ms))
        continue;
      if (finite_)
        throw std::runtime_error("data.kafka: " + part_name(part) + ": no message at offset "
                                 + std::to_string(r.next) + " within timing.kafka_timeout_ms ("
                                 + std::to_string(options_.timeout_ms) + " ms)");
      spdlog::info("kafka_waiting topic={} partition={} offset={} seconds={:.0f}", part.topic,
                   part.partition, r.next, waited_ms / 1000.0);
      waited = std::chrono::steady_clock::now();
      continue;
    }
    waited = std::chrono::steady_clock::now();
    if (m->err) {
      if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF)
        continue;
      auto what = std::string(rd_kafka_message_errstr(m));
      throw std::runtime_error("data.kafka: " + part_name(part) + " offset "
                               + std::to_string(r.next) + ": " + what);
    }
    const int64_t off = m->offset;
    std::string_view payload(static_cast<const char*>(m->payload), m->len);
    if (off >= last) {  // past a gap at the range's end: the next range's first message
      r.pending.assign(payload);
      r.pending_offset = off;
      r.next = last;
    } else if (off >= r.next) {
      take(payload, off);
      r.next = off + 1;
    }
  }
  spdlog::debug("kafka_batch batch={} topic={} partition={} first={} last={} samples={}", index,
                part.topic, part.partition, first, last, b.size);
  if (trace_) {
    std::lock_guard<std::mutex> g(trace_mu_);
    std::fprintf(trace_,
                 "{\"batch\":%lld,\"topic\":%s,\"partition\":%d,\"first\":%lld,\"last\":%lld,"
                 "\"samples\":%d}\n",
                 static_cast<long long>(index), nlohmann::json(part.topic).dump().c_str(),
                 part.partition, static_cast<long long>(first), static_cast<long long>(last),
                 b.size);
    std::fflush(trace_);
  }
  return b;
}

std::vector<kafka_position> kafka_source::next_offsets(int64_t batches) const {
  std::vector<int64_t> count(parts_.size(), 0);
  const auto p = static_cast<int64_t>(parts_.size());
  if (finite_) {
    auto n = std::min<int64_t>(batches, static_cast<int64_t>(table_.size()));
    for (int64_t i = 0; i < n; ++i)
      ++count[static_cast<size_t>(table_[static_cast<size_t>(i)].first)];
  } else {
    for (int64_t i = 0; i < p; ++i)
      count[static_cast<size_t>(i)] = batches / p + (i < batches % p ? 1 : 0);
  }
  std::vector<kafka_position> out;
  for (size_t i = 0; i < parts_.size(); ++i) {
    auto next = parts_[i].start + count[i] * options_.batch_size;
    if (parts_[i].end >= 0)
      next = std::min(next, parts_[i].end);
    out.push_back({parts_[i].topic, parts_[i].partition, next});
  }
  return out;
}

std::string kafka_source::positions_after(int64_t batches) const {
  return kafka_positions_json(next_offsets(batches));
}

void kafka_source::positions_durable(int64_t batches) const {
  if (options_.group.empty())
    return;
  std::lock_guard<std::mutex> lock(commit_mu_);
  if (!committer_) {
    rd_kafka_t* rk = nullptr;
    if (auto e = make_handle(options_, true, rk); !e.empty()) {
      spdlog::warn("kafka_commit_failed group={} error=\"{}\"", options_.group, e);
      return;
    }
    committer_ = rk;
  }
  auto positions = next_offsets(batches);
  auto* list = rd_kafka_topic_partition_list_new(static_cast<int>(positions.size()));
  for (auto& p : positions)
    rd_kafka_topic_partition_list_add(list, p.topic.c_str(), p.partition)->offset = p.next;
  auto err = rd_kafka_commit(rk_of(committer_), list, /*async=*/1);
  rd_kafka_topic_partition_list_destroy(list);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
    spdlog::warn("kafka_commit_failed group={} batches={} error=\"{}\"", options_.group, batches,
                 rd_kafka_err2str(err));
  else
    spdlog::info("kafka_committed group={} batches={} offsets={}", options_.group, batches,
                 kafka_positions_json(positions));
}

std::map<std::string, int64_t> kafka_source::skipped() const {
  std::lock_guard<std::mutex> g(skipped_mu_);
  return skipped_;
}

int64_t kafka_source::lag(int64_t batches) const {
  auto positions = next_offsets(batches);
  int64_t total = 0;
  for (size_t i = 0; i < positions.size(); ++i) {
    int64_t hi = parts_[i].end >= 0 ? parts_[i].end : high_[i].load();
    if (hi < 0)
      return -1;
    total += std::max<int64_t>(0, hi - positions[i].next);
  }
  return total;
}

}  // namespace satrap
