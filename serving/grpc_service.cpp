// The model server's KServe v2 service over gRPC (see serving/grpc_service.hpp). Compiled only
// where CMake found gRPC (serving/CMakeLists.txt).
#include "serving/grpc_service.hpp"

#include "serving/model_server_impl.hpp"

#include "models/serving/infer_request.hpp"
#include "runtime/version.hpp"

#include "grpc_predict_v2.grpc.pb.h"

#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include <cstring>
#include <limits>

namespace satrap {

namespace {

namespace pb = ::inference;

infer_model_io io_of(const exported_model& m, const model_server_options& o) {
  infer_model_io io;
  io.name = m.meta().name;
  io.version = m.meta().version;
  io.slots = m.input_slots();
  io.dense_features = m.dense_features();
  io.max_instances = o.max_instances;
  return io;
}

// The gRPC status of an HTTP route's status: 400 and 413 (a request past a limit) are the
// client's arguments, 404 an unknown model or version.
grpc::Status status_of(int http_status, const std::string& message) {
  switch (http_status) {
    case 400:
    case 413: return {grpc::StatusCode::INVALID_ARGUMENT, message};
    case 404: return {grpc::StatusCode::NOT_FOUND, message};
    case 503: return {grpc::StatusCode::UNAVAILABLE, message};
    default: return {grpc::StatusCode::INTERNAL, message};
  }
}

// The text of a json_error body ({"error": "..."}).
std::string error_text(const http_response& r) {
  auto j = nlohmann::json::parse(r.body, nullptr, false);
  if (j.is_object() && j.contains("error") && j["error"].is_string())
    return j["error"].get<std::string>();
  return r.body;
}

std::string shape_text(const google::protobuf::RepeatedField<int64_t>& shape) {
  std::string s = "[";
  for (int i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// The shape's product, or nullopt when a dimension is negative or the product is past 2^40
// (parse_infer_request then names the problem).
std::optional<uint64_t> elements_of(const google::protobuf::RepeatedField<int64_t>& shape) {
  uint64_t p = 1;
  for (auto d : shape) {
    if (d < 0 || (d != 0 && p > (uint64_t{1} << 40) / static_cast<uint64_t>(d)))
      return std::nullopt;
    p *= static_cast<uint64_t>(d);
  }
  return p;
}

// Bytes per value of an input the model takes, by name and datatype (infer_request.hpp); 0 for
// any other, which parse_infer_request refuses naming the input and what it takes.
size_t value_bytes(const std::string& name, const std::string& datatype) {
  if ((name == "dense" && datatype == "FP32") || (name == "ids_lengths" && datatype == "INT32"))
    return 4;
  if ((name == "ids" && (datatype == "INT64" || datatype == "UINT64"))
      || (name == "ids_lengths" && datatype == "INT64"))
    return 8;
  return 0;
}

// Which typed-contents fields hold values, by name (for an error that says what was given).
std::string given_fields(const pb::InferTensorContents& c) {
  std::string s;
  auto add = [&](int n, const char* name) {
    if (n > 0)
      s += std::string(s.empty() ? "" : ", ") + name;
  };
  add(c.bool_contents_size(), "bool_contents");
  add(c.int_contents_size(), "int_contents");
  add(c.int64_contents_size(), "int64_contents");
  add(c.uint_contents_size(), "uint_contents");
  add(c.uint64_contents_size(), "uint64_contents");
  add(c.fp32_contents_size(), "fp32_contents");
  add(c.fp64_contents_size(), "fp64_contents");
  add(c.bytes_contents_size(), "bytes_contents");
  return s;
}

template <typename T>
void append_values(std::string& out, const google::protobuf::RepeatedField<T>& v) {
  out.append(reinterpret_cast<const char*>(v.data()), static_cast<size_t>(v.size()) * sizeof(T));
}

// A ModelInferRequest as the HTTP route's binary tensor extension: a JSON header naming each
// input with parameters.binary_data_size, then the inputs' little-endian values in order. "" or
// the reason the request is refused (INVALID_ARGUMENT).
std::string as_binary_body(const pb::ModelInferRequest& req, std::string& body,
                           size_t& header_length) {
  const bool raw = req.raw_input_contents_size() > 0;
  if (raw && req.raw_input_contents_size() != req.inputs_size())
    return "raw_input_contents: " + std::to_string(req.raw_input_contents_size()) + " entries for "
           + std::to_string(req.inputs_size()) + " inputs (one per input, in the inputs' order)";
  std::string head = "{\"inputs\":[";
  size_t blob_bytes = 0;
  for (int i = 0; i < req.inputs_size(); ++i) {
    const auto& t = req.inputs(i);
    auto what = "input '" + t.name().substr(0, 40) + "'";
    auto fields = t.has_contents() ? given_fields(t.contents()) : std::string();
    if (raw && !fields.empty())
      return what + ": both contents (" + fields + ") and raw_input_contents (give one)";
    auto bytes = value_bytes(t.name(), t.datatype());
    auto elements = elements_of(t.shape());
    if (raw) {
      auto size = req.raw_input_contents(i).size();
      if (bytes > 0 && elements && size != *elements * bytes)
        return what + ": raw_input_contents[" + std::to_string(i) + "] holds "
               + std::to_string(size) + " bytes, shape " + shape_text(t.shape()) + " of "
               + t.datatype() + " needs " + std::to_string(*elements * bytes);
      blob_bytes += size;
    } else if (bytes > 0) {
      const auto& c = t.contents();
      const char* want = t.datatype() == "FP32"    ? "fp32_contents"
                         : t.datatype() == "INT32" ? "int_contents"
                         : t.datatype() == "INT64" ? "int64_contents"
                                                   : "uint64_contents";
      int count = t.datatype() == "FP32"    ? c.fp32_contents_size()
                  : t.datatype() == "INT32" ? c.int_contents_size()
                  : t.datatype() == "INT64" ? c.int64_contents_size()
                                            : c.uint64_contents_size();
      if (!fields.empty() && fields != want)
        return what + ": datatype " + t.datatype() + " takes its values in contents." + want
               + ", got " + fields;
      if (elements && static_cast<uint64_t>(count) != *elements)
        return what + ": " + std::to_string(count) + " values in contents." + want + ", shape "
               + shape_text(t.shape()) + " needs " + std::to_string(*elements);
      blob_bytes += static_cast<size_t>(count) * bytes;
    }
    head += i ? ",{\"name\":" : "{\"name\":";
    append_escaped(head, t.name());
    head += ",\"datatype\":";
    append_escaped(head, t.datatype());
    head += ",\"shape\":[";
    for (int d = 0; d < t.shape_size(); ++d) {
      if (d)
        head += ',';
      head += std::to_string(t.shape(d));
    }
    head += "]";
    if (raw || bytes > 0) {
      auto size =
        raw ? req.raw_input_contents(i).size() : static_cast<size_t>(elements.value_or(0)) * bytes;
      head += ",\"parameters\":{\"binary_data_size\":" + std::to_string(size) + "}";
    } else {
      head += ",\"data\":[]";  // a datatype the model does not take: refused by name
    }
    head += "}";
  }
  head += "]";
  if (req.outputs_size() > 0) {
    head += ",\"outputs\":[";
    for (int o = 0; o < req.outputs_size(); ++o) {
      head += o ? ",{\"name\":" : "{\"name\":";
      append_escaped(head, req.outputs(o).name());
      head += "}";
    }
    head += "]";
  }
  head += "}";
  header_length = head.size();
  body = std::move(head);
  body.reserve(header_length + blob_bytes);
  for (int i = 0; i < req.inputs_size(); ++i) {
    if (raw) {
      body += req.raw_input_contents(i);
      continue;
    }
    const auto& t = req.inputs(i);
    const auto& c = t.contents();
    if (value_bytes(t.name(), t.datatype()) == 0)
      continue;
    if (t.datatype() == "FP32")
      append_values(body, c.fp32_contents());
    else if (t.datatype() == "INT32")
      append_values(body, c.int_contents());
    else if (t.datatype() == "INT64")
      append_values(body, c.int64_contents());
    else if (t.datatype() == "UINT64")
      append_values(body, c.uint64_contents());
  }
  return "";
}

// Server: model_server::impl (a template parameter, since that name is private to model_server).
template <class Server>
class inference_service final : public pb::GRPCInferenceService::Service {
 public:
  explicit inference_service(Server& im) : im_(im) {}

  grpc::Status ServerLive(grpc::ServerContext*, const pb::ServerLiveRequest*,
                          pb::ServerLiveResponse* res) override {
    res->set_live(true);
    return grpc::Status::OK;
  }

  grpc::Status ServerReady(grpc::ServerContext*, const pb::ServerReadyRequest*,
                           pb::ServerReadyResponse* res) override {
    res->set_ready(im_.now() != nullptr);
    return grpc::Status::OK;
  }

  grpc::Status ServerMetadata(grpc::ServerContext*, const pb::ServerMetadataRequest*,
                              pb::ServerMetadataResponse* res) override {
    res->set_name("satrap");
    res->set_version(satrap_version);
    return grpc::Status::OK;
  }

  grpc::Status ModelReady(grpc::ServerContext*, const pb::ModelReadyRequest* req,
                          pb::ModelReadyResponse* res) override {
    std::shared_ptr<served_version> v;
    if (auto s = pin(req->name(), req->version(), v); !s.ok())
      return s;
    res->set_ready(true);
    return grpc::Status::OK;
  }

  grpc::Status ModelMetadata(grpc::ServerContext*, const pb::ModelMetadataRequest* req,
                             pb::ModelMetadataResponse* res) override {
    std::shared_ptr<served_version> v;
    if (auto s = pin(req->name(), req->version(), v); !s.ok())
      return s;
    auto io = io_of(*v->model, im_.options);
    res->set_name(io.name);
    res->add_versions(io.version);
    res->set_platform("satrap");
    auto tensor = [](auto* t, const char* name, const char* datatype,
                     std::initializer_list<int64_t> shape) {
      t->set_name(name);
      t->set_datatype(datatype);
      for (auto d : shape)
        t->add_shape(d);
    };
    if (io.dense_features > 0)
      tensor(res->add_inputs(), "dense", "FP32", {-1, io.dense_features});
    tensor(res->add_inputs(), "ids", "INT64", {-1, io.slots});
    tensor(res->add_outputs(), "predictions", "FP32", {-1});
    tensor(res->add_outputs(), "logits", "FP32", {-1});
    return grpc::Status::OK;
  }

  grpc::Status ModelInfer(grpc::ServerContext*, const pb::ModelInferRequest* req,
                          pb::ModelInferResponse* res) override {
    std::shared_ptr<served_version> v;  // the version that answers, pinned until the call ends
    if (auto s = pin(req->model_name(), req->model_version(), v); !s.ok())
      return s;
    if (v->model->named() || v->model->tasks() > 1 || v->model->weighted())
      return refuse(400,
                    "this model takes named features or weights, or gives several labels, "
                    "which the v2 tensors do not carry yet: POST /v1/models/"
                      + v->model->meta().name + ":predict (README \"Serving\")");
    auto io = io_of(*v->model, im_.options);
    std::string body;
    size_t header_length = 0;
    if (auto why = as_binary_body(*req, body, header_length); !why.empty())
      return refuse(400, why);
    auto parsed = parse_infer_request(body, header_length, io);
    if (!parsed.error.empty())
      return refuse(parsed.status, parsed.error);
    std::vector<float> logits;
    if (auto refused = im_.score_request(v, std::move(parsed.input), logits))
      return status_of(refused->status, error_text(*refused));  // counted by score_request
    const size_t n = logits.size();
    res->set_model_name(io.name);
    res->set_model_version(io.version);
    res->set_id(req->id());
    const bool raw = req->raw_input_contents_size() > 0;
    std::vector<float> probs;
    for (auto& want : parsed.outputs) {
      const float* values = logits.data();
      if (want.what == infer_output::predictions) {
        if (probs.empty()) {
          probs.resize(n);
          for (size_t i = 0; i < n; ++i)  // as the HTTP route's infer_response
            probs[i] = static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(logits[i]))));
        }
        values = probs.data();
      }
      auto* out = res->add_outputs();
      out->set_name(want.what == infer_output::logits ? "logits" : "predictions");
      out->set_datatype("FP32");
      out->add_shape(static_cast<int64_t>(n));
      if (raw)
        res->add_raw_output_contents(reinterpret_cast<const char*>(values), n * sizeof(float));
      else
        out->mutable_contents()->mutable_fp32_contents()->Add(values, values + n);
    }
    im_.count(200, nullptr);
    return grpc::Status::OK;
  }

 private:
  grpc::Status refuse(int http_status, const std::string& why) {
    im_.count(http_status, "bad_request");
    return status_of(http_status, why);
  }

  // The version served, when it is the model (and version, when given) asked for.
  grpc::Status pin(const std::string& name, const std::string& version,
                   std::shared_ptr<served_version>& v) {
    v = im_.now();
    if (!v)
      return im_.count(503, "not_ready"),
             grpc::Status(grpc::StatusCode::UNAVAILABLE, "no model loaded yet");
    const auto& meta = v->model->meta();
    if (name != meta.name)
      return im_.count(404, "unknown_model"),
             grpc::Status(grpc::StatusCode::NOT_FOUND, "no model named '" + name.substr(0, 80)
                                                         + "' (this server serves '" + meta.name
                                                         + "')");
    if (!version.empty() && version != meta.version)
      return im_.count(404, "unknown_version"),
             grpc::Status(grpc::StatusCode::NOT_FOUND,
                          "model '" + name + "' has no version '" + version.substr(0, 80)
                            + "' here (this server serves version '" + meta.version + "')");
    return grpc::Status::OK;
  }

  Server& im_;
};

class grpc_server final : public grpc_endpoint {
 public:
  grpc_server(std::unique_ptr<grpc::Service> service, std::unique_ptr<grpc::Server> server,
              uint16_t port, std::chrono::milliseconds drain)
      : service_(std::move(service)), server_(std::move(server)), port_(port), drain_(drain) {}
  ~grpc_server() override { stop(); }
  void stop() override {
    if (!server_)
      return;
    server_->Shutdown(std::chrono::system_clock::now() + drain_);
    server_->Wait();
    server_.reset();
    spdlog::info("grpc_stopped port={}", port_);
  }
  uint16_t port() const override { return port_; }

 private:
  std::unique_ptr<grpc::Service> service_;
  std::unique_ptr<grpc::Server> server_;
  uint16_t port_;
  std::chrono::milliseconds drain_;
};

}  // namespace

bool grpc_built() { return true; }

std::unique_ptr<grpc_endpoint> model_server::impl::start_grpc(std::string& error) {
  auto service = std::make_unique<inference_service<impl>>(*this);
  const auto& host = options.host;
  auto address = (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":"
                 + std::to_string(options.grpc_port);
  grpc::ServerBuilder builder;
  int bound = 0;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &bound);
  builder.RegisterService(service.get());
  auto cap = std::min<size_t>(options.max_body_bytes, std::numeric_limits<int>::max());
  builder.SetMaxReceiveMessageSize(static_cast<int>(cap));
  grpc::ResourceQuota quota("satrap_serve_grpc");
  quota.SetMaxThreads(std::max(4, options.http_threads));  // calls served at once, as HTTP
  builder.SetResourceQuota(quota);
  // A call holds its thread while its batch is scored: keep the threads that polled for calls
  // (gRPC's default of at most 2 idle pollers makes and ends a thread per call under load).
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MIN_POLLERS, 2);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS,
                              std::max(4, options.http_threads));
  auto server = builder.BuildAndStart();
  if (!server || bound == 0) {
    error = "gRPC: cannot listen on " + address + " (--grpc-port: in use, or not an address here)";
    return nullptr;
  }
  spdlog::info("grpc_started address={} max_message_bytes={}", address, cap);
  return std::make_unique<grpc_server>(std::move(service), std::move(server),
                                       static_cast<uint16_t>(bound), options.read_timeout);
}

}  // namespace satrap
