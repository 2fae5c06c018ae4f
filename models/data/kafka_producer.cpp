#include "models/data/kafka_producer.hpp"

#include "models/data/tfrecord_format.hpp"

#include <librdkafka/rdkafka.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <thread>

namespace satrap {

namespace {

struct delivery {
  std::atomic<int64_t> ok{0};
  std::atomic<int64_t> failed{0};
  std::string first_error;
};

void on_delivery(rd_kafka_t*, const rd_kafka_message_t* m, void* opaque) {
  auto* d = static_cast<delivery*>(opaque);
  if (m->err) {
    if (d->failed++ == 0)
      d->first_error = rd_kafka_err2str(m->err);
  } else {
    ++d->ok;
  }
}

}  // namespace

result<kafka_produce_summary> kafka_produce(const kafka_produce_options& o) {
  if (o.brokers.empty() || o.topic.empty())
    return make_input_error("produce: expected --brokers and --topic");
  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  delivery d;
  std::vector<std::pair<std::string, std::string>> kv = {
    {"bootstrap.servers", o.brokers}, {"acks", "all"}, {"linger.ms", "5"}, {"log_level", "3"}};
  for (auto& c : o.config)
    kv.push_back(c);
  for (auto& [k, v] : kv)
    if (rd_kafka_conf_set(conf, k.c_str(), v.c_str(), err, sizeof err) != RD_KAFKA_CONF_OK) {
      rd_kafka_conf_destroy(conf);
      return make_input_error("produce: " + k + "=" + v + ": " + err);
    }
  rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
  rd_kafka_conf_set_opaque(conf, &d);
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
  if (!rk)
    return make_model_error(std::string("produce: cannot make a producer: ") + err);
  struct closer {
    rd_kafka_t* rk;
    ~closer() { rd_kafka_destroy(rk); }
  } close_rk{rk};
  rd_kafka_topic_t* t = rd_kafka_topic_new(rk, o.topic.c_str(), nullptr);
  struct topic_closer {
    rd_kafka_topic_t* t;
    ~topic_closer() { rd_kafka_topic_destroy(t); }
  } close_t{t};
  const rd_kafka_metadata_t* md = nullptr;
  auto e = rd_kafka_metadata(rk, 0, t, &md, static_cast<int>(o.timeout_ms));
  if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
    return make_input_error("produce: --brokers: no broker of '" + o.brokers + "' answered within "
                            + std::to_string(o.timeout_ms) + " ms: " + rd_kafka_err2str(e));
  int32_t partitions = md->topic_cnt > 0 && md->topics[0].err == RD_KAFKA_RESP_ERR_NO_ERROR
                         ? md->topics[0].partition_cnt
                         : 0;
  rd_kafka_metadata_destroy(md);
  if (partitions <= 0)
    return make_input_error("produce: --topic: topic '" + o.topic + "' is not on the brokers");
  kafka_produce_summary out;
  out.partitions = partitions;
  const auto started = std::chrono::steady_clock::now();
  int64_t sent = 0;
  std::string refused;  // why the producer refused a message
  auto send = [&](const char* data, size_t n) -> bool {
    if ((o.limit >= 0 && sent >= o.limit) || !refused.empty())
      return false;
    if (o.rate > 0) {
      auto due = started + std::chrono::duration<double>(static_cast<double>(sent) / o.rate);
      std::this_thread::sleep_until(
        std::chrono::time_point_cast<std::chrono::steady_clock::duration>(due));
    }
    const auto part = static_cast<int32_t>(sent % partitions);
    while (rd_kafka_produce(t, part, RD_KAFKA_MSG_F_COPY, const_cast<char*>(data), n, nullptr, 0,
                            nullptr)
           != 0) {
      if (auto e = rd_kafka_last_error(); e != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
        refused = "message " + std::to_string(sent + 1) + ": " + rd_kafka_err2str(e);
        return false;
      }
      rd_kafka_poll(rk, 50);
    }
    rd_kafka_poll(rk, 0);
    ++sent;
    return true;
  };
  for (int pass = 0; pass < o.repeat; ++pass)
    for (auto& f : o.files) {
      if (o.tfrecord) {
        tfrecord_reader r(f);
        if (!r.is_open())
          return make_input_error("produce: " + f + ": cannot open");
        std::string_view rec;
        while (r.next(rec))
          if (!send(rec.data(), rec.size()))
            break;
        if (!r.error().empty())
          return make_input_error("produce: " + f + ": record "
                                  + std::to_string(r.record_number() + 1) + ": " + r.error());
      } else {
        std::ifstream in(f);
        if (!in)
          return make_input_error("produce: " + f + ": cannot open");
        std::string line;
        while (std::getline(in, line)) {
          if (!line.empty() && line.back() == '\r')
            line.pop_back();
          if (line.empty())
            continue;
          if (!send(line.data(), line.size()))
            break;
        }
      }
    }
  rd_kafka_flush(rk, static_cast<int>(o.timeout_ms));
  if (!refused.empty())
    return make_model_error("produce: the producer refused " + refused);
  out.messages = d.ok;
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (d.failed > 0 || d.ok < sent)
    return make_model_error("produce: " + std::to_string(sent - d.ok) + " of "
                            + std::to_string(sent) + " messages not acknowledged by the brokers"
                            + (d.first_error.empty() ? "" : ": " + d.first_error));
  return out;
}

}  // namespace satrap
