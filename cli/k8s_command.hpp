// `satrap k8s --manifest M [--image IMG] [--namespace NS] [--flavor kubernetes|podman]`: prints
// the Kubernetes objects that run the cluster of a node manifest (engines/k8s_objects.hpp), for
// `satrap k8s ... | kubectl apply -f -` or `podman kube play`. The Secrets carry the admin token
// and what `satrap certs` makes (made here when missing, in the same folder `satrap up` uses).
#pragma once

#include "cli/command.hpp"

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace satrap {

class k8s_command final : public command {
 public:
  void add_to(CLI::App& app) override;
  int run() override;

 private:
  std::string manifest_file_;
  std::string image_ = "localhost/satrap:latest";
  std::string namespace_;
  std::string flavor_ = "kubernetes";
  std::string token_file_;
  std::string secrets_ = "include";
  std::string certs_dir_;
  std::string job_file_;
  std::string output_;
  std::vector<std::string> status_from_;
  std::string head_storage_class_;
  std::string head_state_size_ = "1Gi";
  std::string storage_size_;
  std::string storage_class_;
  std::string storage_claim_;
};

}  // namespace satrap
