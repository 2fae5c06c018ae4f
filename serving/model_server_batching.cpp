// The predict path of the model server: a request is parsed and checked on its HTTP worker
// against the version it pins, queued, gathered by a scoring thread with others of the same
// version (up to max_batch instances or max_queue_delay) and scored as one batch.
#include "serving/model_server_impl.hpp"

#include "models/assert.hpp"

namespace satrap {

namespace {

// Ids one call of the scorer takes at most. The scorer's id map is sized by its input's ids (a
// request of 4 M ids, 8 MiB of JSON, took ~130 MB at once), so a larger input is scored in
// slices of whole instances (one instance with more ids is a slice alone: at most 6 x 65,536
// with the default limits). Pooling and the dense network work per instance: the logits are the
// same.
constexpr size_t max_ids_per_score = size_t{1} << 18;

// logits: size x tasks. Weights (when the input has them) are sliced with their ids.
void score_sliced(model_scorer& scorer, const score_input& in, size_t tasks, float* logits) {
  const int size = in.size;
  std::span<const uint32_t> offsets = in.offsets;
  std::span<const uint64_t> ids = in.ids;
  std::span<const float> weights = in.weights, dense = in.dense;
  if (ids.size() <= max_ids_per_score || size <= 1) {
    scorer.score(size, offsets, ids, weights, dense, logits);
    return;
  }
  const size_t n = static_cast<size_t>(size);
  const size_t bags = (offsets.size() - 1) / n, dense_each = dense.size() / n;
  std::vector<uint32_t> slice;
  for (size_t i0 = 0; i0 < n;) {
    size_t i1 = i0 + 1;
    while (i1 < n && offsets[(i1 + 1) * bags] - offsets[i0 * bags] <= max_ids_per_score)
      ++i1;
    uint32_t base = offsets[i0 * bags];
    slice.assign(offsets.begin() + static_cast<ptrdiff_t>(i0 * bags),
                 offsets.begin() + static_cast<ptrdiff_t>(i1 * bags + 1));
    for (auto& o : slice)
      o -= base;
    const size_t count = offsets[i1 * bags] - base;
    scorer.score(static_cast<int>(i1 - i0), slice, ids.subspan(base, count),
                 weights.empty() ? weights : weights.subspan(base, count),
                 dense.subspan(i0 * dense_each, (i1 - i0) * dense_each), logits + i0 * tasks);
    i0 = i1;
  }
}

}  // namespace

void model_server::impl::worker_loop() {
  score_input all;  // a batch of several requests, gathered (kept: its capacity is reused)
  std::vector<float> logits;
  std::unique_lock lk(mu);
  for (;;) {
    cv.wait(lk, [&] { return stopping || (!queue.empty() && !collecting); });
    if (stopping && queue.empty())
      return;
    collecting = true;
    std::vector<std::shared_ptr<pending_request>> batch;
    int n = 0;
    auto version = queue.front()->version;
    auto deadline = queue.front()->enqueued + options.max_queue_delay;
    for (;;) {
      while (!queue.empty() && queue.front()->version == version
             && (n == 0 || n + queue.front()->input.size <= options.max_batch)) {
        n += queue.front()->input.size;
        batch.push_back(std::move(queue.front()));
        queue.pop_front();
      }
      if (n >= options.max_batch || stopping || !queue.empty())
        break;  // full, or the next request is of another version or would not fit
      if (cv.wait_until(lk, deadline) == std::cv_status::timeout && queue.empty())
        break;
    }
    collecting = false;
    cv.notify_all();
    lk.unlock();
    score(version, batch, n, all, logits);
    lk.lock();
  }
}

void model_server::impl::score(const std::shared_ptr<served_version>& v,
                               std::vector<std::shared_ptr<pending_request>>& batch, int n,
                               score_input& all, std::vector<float>& logits) {
  batches.observe(n, batch_bounds);
  instances += n;
  auto scorer = v->take_scorer();
  const auto tasks = static_cast<size_t>(v->model->tasks());
  if (batch.size() == 1) {
    auto& r = *batch[0];
    r.logits.resize(static_cast<size_t>(r.input.size) * tasks);
    score_sliced(*scorer, r.input, tasks, r.logits.data());
  } else {
    all.size = n;
    all.offsets.assign(1, 0);
    all.ids.clear();
    all.weights.clear();
    all.dense.clear();
    for (auto& r : batch) {
      auto base = static_cast<uint32_t>(all.ids.size());
      for (size_t b = 1; b < r->input.offsets.size(); ++b)
        all.offsets.push_back(base + r->input.offsets[b]);
      all.ids.insert(all.ids.end(), r->input.ids.begin(), r->input.ids.end());
      // A weighted model's requests all carry weights (the parser fills them), others none.
      all.weights.insert(all.weights.end(), r->input.weights.begin(), r->input.weights.end());
      all.dense.insert(all.dense.end(), r->input.dense.begin(), r->input.dense.end());
    }
    SATRAP_ASSERT(all.weights.empty() || all.weights.size() == all.ids.size());
    logits.resize(static_cast<size_t>(n) * tasks);
    score_sliced(*scorer, all, tasks, logits.data());
    size_t at = 0;
    for (auto& r : batch) {
      auto k = static_cast<size_t>(r->input.size) * tasks;
      r->logits.assign(logits.begin() + at, logits.begin() + at + k);
      at += k;
    }
  }
  v->give_scorer(std::move(scorer));
  for (auto& r : batch)
    r->done.set_value();
}

std::optional<http_response> model_server::impl::score_request(
  const std::shared_ptr<served_version>& v, score_input in, std::vector<float>& logits) {
  add_crosses(v->model->meta().crosses, in.size, v->model->input_slots(), in.offsets, in.ids);
  if (!v->model->holds_all())
    for (auto id : in.ids)
      if (!v->model->holds(id))
        return count(400, "partition_not_held"),
               json_error(400, "id " + std::to_string(id) + ": its partition is not held by this "
                                 "server (route it to the server of that partition)");
  auto p = std::make_shared<pending_request>();
  p->version = v;
  p->input = std::move(in);
  p->enqueued = options.environment->steady_now();
  auto done = p->done.get_future();
  {
    std::lock_guard lk(mu);
    if (stopping)
      return count(503, "stopping"), json_error(503, "the server is stopping");
    queue.push_back(p);
  }
  cv.notify_all();
  done.wait();
  logits = std::move(p->logits);
  return std::nullopt;
}

http_response model_server::impl::predict(const http_request& req, const std::string& name) {
  auto v = now();  // the version that answers this request, pinned until it ends
  if (!v)
    return count(503, "not_ready"), json_error(503, "no model loaded yet");
  const auto& meta = v->model->meta();
  if (name != meta.name)
    return count(404, "unknown_model"),
           json_error(404, "no model named '" + name + "' (this server serves '" + meta.name
                             + "': POST /v1/models/" + meta.name + ":predict)");
  predict_request_limits limits;
  limits.slots = v->model->input_slots();  // the server adds the feature crosses
  limits.dense_features = v->model->dense_features();
  limits.max_instances = options.max_instances;
  limits.weights = meta.value_weights;
  auto parsed = v->model->named() ? parse_named_predict_request(req.body, *v->model, limits)
                                  : parse_predict_request(req.body, limits);
  if (!parsed.error.empty())
    return count(400, "bad_request"), json_error(400, parsed.error);
  std::vector<float> logits;
  if (auto refused = score_request(v, std::move(parsed.input), logits))
    return *refused;
  auto body =
    predict_response_json(meta.name, meta.version, logits.data(), logits.size(), meta.labels);
  count(200, nullptr);
  return {200, "application/json", std::move(body)};
}

}  // namespace satrap
