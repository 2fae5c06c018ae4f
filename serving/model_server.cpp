#include "serving/model_server.hpp"

#include "serving/model_server_impl.hpp"

#include <malloc.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>

namespace satrap {

namespace fs = std::filesystem;

// Loads `dir` beside the current version and swaps it in. "" or why not.
std::string model_server::impl::load(const std::string& dir) {
  std::lock_guard lk(reload_mu);
  auto started = options.environment->steady_now();
  auto m = exported_model::open(dir, options.shards);
  if (!m) {
    ++reload_failures;
    spdlog::error("model_load_failed dir={} error=\"{}\"", dir, m.error());
    return m.error();
  }
  auto v = std::make_shared<served_version>(m.value());
  auto old = now();
  if (old && old->model->meta().name != v->model->meta().name) {
    ++reload_failures;
    return "the model in " + dir + " is named '" + v->model->meta().name + "', this server serves '"
           + old->model->meta().name + "'";
  }
  {
    std::lock_guard lk2(current_mu);
    current = v;
  }
  if (old)
    ++reloads;
  auto ms =
    std::chrono::duration<double, std::milli>(options.environment->steady_now() - started).count();
  spdlog::info("model_loaded name={} version={} rows={} mapped_bytes={} ms={:.1f} dir={}",
               v->model->meta().name, v->model->meta().version, v->model->rows(),
               v->model->mapped_bytes(), ms, dir);
  return "";
}

// The newest complete model folder under watch_dir ("" when none).
std::string model_server::impl::newest_in_watch() const {
  std::string best;
  uint64_t best_ns = 0;
  std::error_code ec;
  for (auto& e : fs::directory_iterator(options.watch_dir, ec)) {
    if (!e.is_directory(ec))
      continue;
    auto meta = exported_model_read_meta(e.path().string());
    if (meta && (best.empty() || meta->created_ns > best_ns)) {
      best = e.path().string();
      best_ns = meta->created_ns;
    }
  }
  return best;
}

void model_server::impl::watch_loop() {
  std::string served = now() ? now()->model->dir() : "";
  std::unique_lock lk(watch_mu);
  while (!stopping) {
    watch_cv.wait_for(lk, options.watch_interval);
    if (stopping)
      break;
    auto dir = newest_in_watch();
    auto cur = now();
    if (dir.empty() || (cur && cur->model->dir() == dir) || dir == served)
      continue;
    served = dir;  // tried once: a broken export is not retried every interval
    auto cur_meta = cur ? cur->model->meta().created_ns : 0;
    auto meta = exported_model_read_meta(dir);
    if (meta && meta->created_ns > cur_meta)
      load(dir);
  }
}

#if !SATRAP_HAVE_GRPC
bool grpc_built() { return false; }
#endif

model_server::model_server() : impl_(std::make_unique<impl>()) {}
model_server::~model_server() { stop(); }

std::string model_server::start(const model_server_options& o) {
  auto& im = *impl_;
  im.options = o;
  // A request's large buffers (its body, its parsed ids: up to ~40 MB for an 8 MiB body) are
  // mapped and given back when freed. glibc's default threshold rises to 32 MiB after the first
  // such free, and then the heap kept what one request freed while the next one, of another
  // shape, took more: the peaks added up (tests/security/serve_memory_test.py).
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
  if (im.options.workers <= 0)
    im.options.workers = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (im.options.max_batch <= 0)
    return "max batch: expected at least 1";
  std::string first = o.model_dir;
  if (first.empty() && !o.watch_dir.empty()) {
    first = im.newest_in_watch();
    if (first.empty())
      return o.watch_dir + ": holds no complete model folder (export one there first)";
  }
  if (first.empty())
    return "give a model folder or a folder to watch";
  if (o.grpc_port != 0 && !grpc_built())
    return "--grpc-port: this satrap was built without gRPC (install libgrpc++-dev and "
           "protobuf-compiler-grpc, as ops/setup.sh does, and build again)";
  if (auto err = im.load(first); !err.empty())
    return err;
  for (int i = 0; i < im.options.workers; ++i)
    im.workers.emplace_back([&im] { im.worker_loop(); });
  http_limits limits;
  limits.threads = static_cast<size_t>(std::max(1, o.http_threads));
  limits.max_body_bytes = o.max_body_bytes;
  limits.max_inflight_body_bytes = std::max(o.max_inflight_body_bytes, o.max_body_bytes);
  limits.read_timeout = o.read_timeout;
  limits.keep_alive_max_requests = o.keep_alive_max_requests;
  limits.lean = o.lean_http;
  auto err = im.http.start(
    o.host, o.port, [&im](const http_request& r) { return im.handle(r); }, limits);
  if (!err.empty()) {
    stop();
    return err;
  }
#if SATRAP_HAVE_GRPC
  if (o.grpc_port != 0 && !(im.grpc = im.start_grpc(err))) {
    stop();
    return err;
  }
#endif
  if (!o.watch_dir.empty())
    im.watcher = std::thread([&im] { im.watch_loop(); });
  spdlog::info(
    "serve_started host={} port={} grpc_port={} workers={} max_batch={} max_queue_delay_us={}",
    o.host, o.port, im.grpc ? im.grpc->port() : 0, im.options.workers, o.max_batch,
    o.max_queue_delay.count());
  return "";
}

void model_server::stop() {
  if (!impl_)
    return;
  auto& im = *impl_;
  if (im.grpc)  // its calls in flight are answered first: the scoring workers still run
    im.grpc->stop();
  im.http.stop();
  {
    std::lock_guard lk(im.mu);
    std::lock_guard lk2(im.watch_mu);
    im.stopping = true;
  }
  im.cv.notify_all();
  im.watch_cv.notify_all();
  for (auto& w : im.workers)
    if (w.joinable())
      w.join();
  im.workers.clear();
  if (im.watcher.joinable())
    im.watcher.join();
}

std::string model_server::version() const {
  auto v = impl_->now();
  return v ? v->model->meta().version : "";
}

}  // namespace satrap
