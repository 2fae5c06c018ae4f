// The model server's KServe v2 / Open Inference Protocol routes over HTTP (request and response
// formats in models/serving/infer_request.hpp):
//   GET  /v2                                       server metadata (name, version, extensions)
//   GET  /v2/health/live                           200 while the process runs
//   GET  /v2/health/ready                          200 once a model is loaded, else 503
//   GET  /v2/models/<name>[/versions/<v>]          model metadata: its inputs and outputs
//   GET  /v2/models/<name>[/versions/<v>]/ready    200 when that model (version) is served
//   POST /v2/models/<name>[/versions/<v>]/infer    scores; JSON tensors, or the binary tensor data
//                                                  extension (Inference-Header-Content-Length)
// Errors are {"error": "..."}: 400 for a bad request (naming the input and shapes), 404 for an
// unknown model, version or path, 405 for a wrong method, 413 past a size limit, 503 before a
// model is loaded. An infer request is batched with the /v1 ones of its version.
#include "serving/model_server_impl.hpp"

#include "models/serving/infer_request.hpp"

#include "runtime/version.hpp"

#include <string_view>

namespace satrap {

namespace {

infer_model_io io_of(const exported_model& m, const model_server_options& o) {
  infer_model_io io;
  io.name = m.meta().name;
  io.version = m.meta().version;
  io.slots = m.input_slots();
  io.dense_features = m.dense_features();
  io.max_instances = o.max_instances;
  return io;
}

}  // namespace

http_response model_server::impl::v2_infer(const http_request& req,
                                           const std::shared_ptr<served_version>& v) {
  if (v->model->named() || v->model->tasks() > 1 || v->model->weighted())
    return count(400, "bad_request"),
           json_error(400,
                      "this model takes named features or weights, or gives several "
                      "labels, which the v2 tensors do not carry yet: POST /v1/models/"
                        + v->model->meta().name + ":predict (README \"Serving\")");
  auto io = io_of(*v->model, options);
  size_t header_length = std::string::npos;
  auto given = req.header("Inference-Header-Content-Length");
  if (!given.empty()) {
    std::string why;
    int status = 400;
    header_length =
      parse_header_length(given, req.body.size(), options.max_body_bytes, why, status);
    if (header_length == std::string::npos)
      return count(status, "bad_request"), json_error(status, why);
  }
  auto parsed = parse_infer_request(req.body, header_length, io);
  if (!parsed.error.empty())
    return count(parsed.status, "bad_request"), json_error(parsed.status, parsed.error);
  std::vector<float> logits;
  if (auto refused = score_request(v, std::move(parsed.input), logits))
    return *refused;
  size_t response_header = std::string::npos;
  auto body =
    infer_response(io, parsed.id, logits.data(), logits.size(), parsed.outputs, response_header);
  count(200, nullptr);
  if (response_header == std::string::npos)
    return {200, "application/json", std::move(body)};
  http_response res{200, "application/octet-stream", std::move(body)};
  res.headers.emplace_back("Inference-Header-Content-Length", std::to_string(response_header));
  return res;
}

http_response model_server::impl::v2_route(const http_request& req) {
  const auto& path = req.path;
  auto method_is = [&](const char* m) { return req.method == m; };
  if (path == "/v2") {
    if (!method_is("GET"))
      return count(405, "method"), json_error(405, "use GET /v2");
    return {200, "application/json",
            std::string("{\"name\":\"satrap\",\"version\":\"") + satrap_version
              + "\",\"extensions\":[\"binary_tensor_data\"]}"};
  }
  if (path == "/v2/health/live")
    return {200, "application/json", "{\"live\":true}"};
  if (path == "/v2/health/ready")
    return now() ? http_response{200, "application/json", "{\"ready\":true}"}
                 : http_response{503, "application/json", "{\"ready\":false}"};
  const std::string prefix = "/v2/models/";
  if (path.rfind(prefix, 0) != 0)
    return count(404, "unknown_path"),
           json_error(404, "unknown path " + path
                             + " (GET /v2/health/live, /v2/health/ready, /v2/models/<name>, "
                               "/v2/models/<name>/ready; POST /v2/models/<name>/infer)");
  // <name>[/versions/<v>][/ready | /infer]
  std::string_view rest(path);
  rest.remove_prefix(prefix.size());
  std::string verb;
  for (std::string_view tail : {"/ready", "/infer"})
    if (rest.size() > tail.size() && rest.substr(rest.size() - tail.size()) == tail) {
      verb = tail.substr(1);
      rest.remove_suffix(tail.size());
      break;
    }
  std::string name(rest), version;
  if (auto at = rest.find("/versions/"); at != std::string_view::npos) {
    name = rest.substr(0, at);
    version = rest.substr(at + std::string_view("/versions/").size());
  }
  if (name.empty() || name.find('/') != std::string::npos || version.find('/') != std::string::npos)
    return count(404, "unknown_path"),
           json_error(404, "unknown path " + path + " (/v2/models/<name>[/versions/<version>]"
                                                    "[/ready|/infer])");
  if (verb == "infer" ? !method_is("POST") : !method_is("GET"))
    return count(405, "method"),
           json_error(405, verb == "infer" ? "use POST for /infer" : "use GET for " + path);
  auto v = now();  // the version that answers this request, pinned until it ends
  if (!v)
    return count(503, "not_ready"), json_error(503, "no model loaded yet");
  const auto& meta = v->model->meta();
  if (name != meta.name)
    return count(404, "unknown_model"),
           json_error(404, "no model named '" + name + "' (this server serves '" + meta.name
                             + "': POST /v2/models/" + meta.name + "/infer)");
  if (!version.empty() && version != meta.version)
    return count(404, "unknown_version"),
           json_error(404, "model '" + name + "' has no version '" + version
                             + "' here (this server serves version '" + meta.version + "')");
  if (verb == "ready")
    return {200, "application/json", "{\"name\":\"" + meta.name + "\",\"ready\":true}"};
  if (verb.empty())
    return {200, "application/json", infer_model_metadata(io_of(*v->model, options))};
  return v2_infer(req, v);
}

}  // namespace satrap
