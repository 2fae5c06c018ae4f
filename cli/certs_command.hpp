// `satrap certs --manifest M --out DIR`: the cluster's credentials, made with the openssl command.
//
//   ca.pem ca.key                   the cluster CA (one per cluster: O=satrap, OU=<cluster>)
//   head.pem head.key               the head's certificate
//   node-<name>.pem .key .token     one per node of the manifest, and the node's token
//   client.pem client.key           for `satrap submit/jobs/status/...` (users, CI)
// Keys and tokens are mode 0600, the folder 0700. Every certificate is signed by the cluster CA
// with both serverAuth and clientAuth (each process listens and connects) and names its cluster
// (OU) and role (CN). Missing files are added with the existing CA (a node added to the
// manifest); --force makes everything anew (rotation: see README "Security").
// Threading: runs on the calling thread; runs `openssl` as child processes.
#pragma once

#include "spec/manifest.hpp"

#include "cli/command.hpp"

#include <CLI/CLI.hpp>

#include <string>

namespace satrap {

// Makes what is missing in `out` (everything with `force`); "" or what went wrong.
std::string make_cluster_certs(const manifest& m, const std::string& out, bool force);

class certs_command final : public command {
 public:
  void add_to(CLI::App& app) override;
  int run() override;

 private:
  std::string manifest_file_;
  std::string out_;
  bool force_ = false;
};

}  // namespace satrap
