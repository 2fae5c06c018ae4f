// A test helper, not part of satrap: librdkafka's mock cluster (rdkafka_mock.h), which speaks the
// Kafka protocol over TCP on loopback, in a process of its own so that jobs can be killed and
// resumed against the same messages. Creates the topic, writes the bootstrap servers to a file
// and serves until SIGTERM/SIGINT or until its parent dies.
// usage: satrap_kafka_mock BOOTSTRAP_FILE TOPIC PARTITIONS [BROKERS]
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <sys/prctl.h>
#include <unistd.h>

namespace {
volatile std::sig_atomic_t stop = 0;
void on_signal(int) { stop = 1; }
}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s BOOTSTRAP_FILE TOPIC PARTITIONS [BROKERS]\n", argv[0]);
    return 2;
  }
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  std::signal(SIGTERM, on_signal);
  std::signal(SIGINT, on_signal);
  const int partitions = std::atoi(argv[3]);
  const int brokers = argc > 4 ? std::atoi(argv[4]) : 1;
  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  rd_kafka_conf_set(conf, "log_level", "3", err, sizeof err);
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
  if (!rk) {
    std::fprintf(stderr, "rd_kafka_new: %s\n", err);
    return 1;
  }
  rd_kafka_mock_cluster_t* mc = rd_kafka_mock_cluster_new(rk, brokers);
  if (!mc) {
    std::fprintf(stderr, "rd_kafka_mock_cluster_new failed\n");
    return 1;
  }
  if (auto e = rd_kafka_mock_topic_create(mc, argv[2], partitions, 1); e) {
    std::fprintf(stderr, "topic: %s\n", rd_kafka_err2str(e));
    return 1;
  }
  {
    std::string tmp = std::string(argv[1]) + ".tmp";
    std::ofstream out(tmp);
    out << rd_kafka_mock_cluster_bootstraps(mc) << "\n";
    out.close();
    std::rename(tmp.c_str(), argv[1]);
  }
  while (!stop)
    ::usleep(100000);
  rd_kafka_mock_cluster_destroy(mc);
  rd_kafka_destroy(rk);
  return 0;
}
