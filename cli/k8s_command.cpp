#include "cli/k8s_command.hpp"

#include "cli/certs_command.hpp"
#include "cli/cluster_common.hpp"
#include "runtime/error.hpp"
#include "engines/k8s_objects.hpp"
#include "spec/manifest.hpp"

#include <fstream>
#include <iostream>
#include <random>
#include <sstream>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace satrap {

void k8s_command::add_to(CLI::App& app) {
  sub_ = app.add_subcommand(
    "k8s",
    "Print the Kubernetes objects that run a node manifest's cluster: ConfigMap (manifest), "
    "Secrets (admin token; TLS certificates and node tokens), the head's StatefulSet (its state on "
    "a claim) and Service, a StatefulSet and headless Service per node entry, a Job that submits "
    "a job file, a NetworkPolicy, a PodDisruptionBudget and optional checkpoint storage. Apply "
    "with `satrap k8s ... | "
    "kubectl apply -f -`; --flavor podman renders what `podman kube play` runs.");
  sub_->add_option("--manifest", manifest_file_, "node manifest (YAML)")
    ->required()
    ->check(CLI::ExistingFile);
  sub_->add_option("--image", image_, "the satrap image (ops/container/Containerfile)")
    ->capture_default_str();
  sub_->add_option("--namespace", namespace_, "Kubernetes namespace (default: the cluster name)");
  sub_
    ->add_option("--flavor", flavor_,
                 "kubernetes, or podman (Pods with host networking for "
                 "`podman kube play`)")
    ->capture_default_str()
    ->check(CLI::IsMember({"kubernetes", "podman"}));
  sub_
    ->add_option("--token-file", token_file_,
                 "admin token for the Secret (default: a new "
                 "random one)")
    ->check(CLI::ExistingFile);
  sub_
    ->add_option("--secrets", secrets_,
                 "include (the two Secrets in the output), external "
                 "(left out: objects to keep in git; apply the Secrets "
                 "with --secrets only first) or only")
    ->capture_default_str()
    ->check(CLI::IsMember({"include", "external", "only"}));
  sub_->add_option("--certs", certs_dir_,
                   "folder of the cluster's certificates and node tokens "
                   "(`satrap certs`; made there when missing; default: the "
                   "manifest's security.certs, else "
                   ".satrap/<cluster>/certs)");
  sub_
    ->add_option("--job", job_file_,
                 "job file for the satrap-submit Job (without it the Job "
                 "is suspended and holds the default job)")
    ->check(CLI::ExistingFile);
  sub_->add_option("--status-from", status_from_,
                   "CIDR from which the head's status port may be reached, besides the "
                   "cluster's pods (NetworkPolicy; repeat for more)");
  sub_->add_option("--head-storage-class", head_storage_class_,
                   "storage class of the head's state claim (default: the cluster's default)");
  sub_->add_option("--head-state-size", head_state_size_, "size of the head's state claim")
    ->capture_default_str();
  sub_->add_option("--storage-size", storage_size_,
                   "checkpoint storage: a ReadWriteMany claim of this size, mounted at "
                   "/checkpoints in the head and node pods; the submitted job checkpoints there "
                   "unless it names its own checkpoint.dir");
  sub_->add_option("--storage-class", storage_class_,
                   "the storage class of that claim (one that offers ReadWriteMany, e.g. GKE's "
                   "standard-rwx)");
  sub_->add_option("--storage-claim", storage_claim_,
                   "checkpoint storage: an existing ReadWriteMany claim instead");
  sub_->add_option("-o,--output", output_, "write to FILE instead of stdout");
}

int k8s_command::run() {
  manifest m;
  if (auto err = manifest_load_file(manifest_file_, m)) {
    std::cerr << "satrap k8s: " << error_text(err) << "\n";
    return 2;
  }
  k8s_options o;
  o.image = image_;
  o.ns = namespace_;
  o.flavor = flavor_ == "podman" ? k8s_flavor::podman : k8s_flavor::kubernetes;
  o.source = manifest_file_;
  o.status_from = status_from_;
  o.head_storage_class = head_storage_class_;
  o.head_state_size = head_state_size_;
  o.storage_size = storage_size_;
  o.storage_class = storage_class_;
  o.storage_claim = storage_claim_;
  o.secrets = secrets_ == "only"       ? k8s_secrets::only
              : secrets_ == "external" ? k8s_secrets::external
                                       : k8s_secrets::include;
  if (o.secrets != k8s_secrets::external) {
    auto dir = certs_dir_.empty() ? cluster_certs_dir(m, cluster_state_dir("", m)) : certs_dir_;
    if (auto e = make_cluster_certs(m, dir, false); !e.empty()) {
      std::cerr << "satrap k8s: " << e << "\n";
      return 1;
    }
    for (auto& f : k8s_cert_file_names(m)) {
      std::ifstream in(dir + "/" + f);
      std::ostringstream text;
      text << in.rdbuf();
      if (!in || text.str().empty()) {
        std::cerr << "satrap k8s: cannot read " << dir << "/" << f << "\n";
        return 1;
      }
      o.cert_files[f] = text.str();
    }
  }
  if (!token_file_.empty()) {
    std::ifstream in(token_file_);
    std::getline(in, o.token);
    if (o.token.empty()) {
      std::cerr << "satrap k8s: --token-file " << token_file_ << ": the first line is empty\n";
      return 2;
    }
  } else {
    std::random_device rd;
    for (int i = 0; i < 32; ++i)
      o.token += "0123456789abcdef"[rd() % 16];
  }
  if (!job_file_.empty()) {
    std::ifstream in(job_file_);
    std::ostringstream text;
    text << in.rdbuf();
    o.job_yaml = text.str();
  }
  auto yaml = k8s_render(m, o);
  if (!yaml) {
    std::cerr << "satrap k8s: " << manifest_file_ << ": " << error_text(yaml.error()) << "\n";
    return 2;
  }
  if (output_.empty()) {
    std::cout << *yaml;
    return 0;
  }
  // The output holds private keys and tokens (its Secrets): mode 0600 from its creation on, and
  // an existing file is made 0600 before it is written.
  int fd = ::open(output_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  bool ok = fd >= 0 && ::fchmod(fd, 0600) == 0;
  for (size_t done = 0; ok && done < yaml->size();) {
    auto n = ::write(fd, yaml->data() + done, yaml->size() - done);
    ok = n > 0;
    done += ok ? static_cast<size_t>(n) : 0;
  }
  if (fd >= 0 && ::close(fd) != 0)
    ok = false;
  if (!ok) {
    std::cerr << "satrap k8s: cannot write " << output_ << ": " << std::strerror(errno) << "\n";
    return 1;
  }
  return 0;
}

}  // namespace satrap
