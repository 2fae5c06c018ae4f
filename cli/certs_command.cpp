#include "cli/certs_command.hpp"

#include "cli/cluster_common.hpp"
#include "runtime/error.hpp"
#include "runtime/secrets.hpp"

#include <sys/stat.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <vector>

namespace fs = std::filesystem;

namespace satrap {

namespace {

// Runs openssl with `args`; "" or its complaint.
std::string openssl(const std::vector<std::string>& args, const std::string& dir) {
  auto log = dir + "/.openssl.log";
  auto pid = ::fork();
  if (pid < 0)
    return "fork failed";
  if (pid == 0) {
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    std::vector<char*> argv{const_cast<char*>("openssl")};
    for (auto& a : args)
      argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::umask(077);
    ::execvp("openssl", argv.data());
    std::_Exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  std::ifstream in(log);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  fs::remove(log);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
    return "the openssl command is missing (apt-get install openssl)";
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return "openssl " + args[0] + " failed: " + text;
  return "";
}

std::string make_role(const manifest& m, const std::string& dir, const std::string& role) {
  auto key = dir + "/" + role + ".key", csr = dir + "/" + role + ".csr",
       pem = dir + "/" + role + ".pem", ext = dir + "/" + role + ".ext";
  if (auto e =
        openssl({"req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                 "-keyout", key, "-out", csr, "-subj", "/O=satrap/OU=" + m.cluster + "/CN=" + role},
                dir);
      !e.empty())
    return e;
  std::ofstream(ext) << "basicConstraints=critical,CA:FALSE\n"
                        "keyUsage=critical,digitalSignature,keyAgreement\n"
                        "extendedKeyUsage=serverAuth,clientAuth\n";
  auto e = openssl({"x509", "-req", "-in", csr, "-CA", dir + "/ca.pem", "-CAkey", dir + "/ca.key",
                    "-CAcreateserial", "-days", "825", "-sha256", "-extfile", ext, "-out", pem},
                   dir);
  std::error_code ec;
  fs::remove(csr, ec);
  fs::remove(ext, ec);
  fs::remove(dir + "/ca.srl", ec);
  ::chmod(key.c_str(), 0600);
  return e;
}

}  // namespace

std::string make_cluster_certs(const manifest& m, const std::string& out, bool force) {
  std::error_code ec;
  if (force)
    for (auto& e : fs::directory_iterator(out, ec))
      if (auto x = e.path().extension(); x == ".pem" || x == ".key" || x == ".token")
        fs::remove(e.path(), ec);
  fs::create_directories(out, ec);
  if (ec)
    return "cannot create " + out + ": " + ec.message();
  ::chmod(out.c_str(), 0700);
  auto have = [&](const std::string& f) { return fs::exists(out + "/" + f); };
  if (!have("ca.pem")) {
    if (auto e = openssl(
          {"req",           "-x509",
           "-newkey",       "ec",
           "-pkeyopt",      "ec_paramgen_curve:P-256",
           "-nodes",        "-keyout",
           out + "/ca.key", "-out",
           out + "/ca.pem", "-days",
           "3650",          "-sha256",
           "-subj",         "/O=satrap/OU=" + m.cluster + "/CN=satrap cluster " + m.cluster + " CA",
           "-addext",       "basicConstraints=critical,CA:TRUE",
           "-addext",       "keyUsage=critical,keyCertSign,cRLSign"},
          out);
        !e.empty())
      return e;
    ::chmod((out + "/ca.key").c_str(), 0600);
  }
  std::vector<std::string> roles{"head", "client"};
  for (auto& n : m.nodes) {
    if (auto why = cluster_name_problem(n.name); !why.empty())
      return "node name '" + n.name + "': " + why;
    roles.push_back("node-" + n.name);
  }
  for (auto& role : roles)
    if (!have(role + ".pem") || !have(role + ".key")) {
      if (!have("ca.key"))
        return out + "/" + role + ".pem is missing and there is no ca.key to sign it: run "
               "`satrap certs` where the CA key is, or with --force for a new CA";
      if (auto e = make_role(m, out, role); !e.empty())
        return e;
    }
  for (auto& n : m.nodes)
    if (!have("node-" + n.name + ".token")
        && !secret_file_write(out + "/node-" + n.name + ".token", random_token()))
      return "cannot write " + out + "/node-" + n.name + ".token";
  return "";
}

void certs_command::add_to(CLI::App& app) {
  sub_ = app.add_subcommand("certs",
                            "Make the cluster's CA, one certificate per role (head, "
                            "each node, client) and the node tokens (mutual TLS; README "
                            "\"Security\"). Adds what is missing; --force makes all anew.");
  sub_->add_option("--manifest", manifest_file_, "node manifest")->required();
  sub_->add_option("--out", out_,
                   "folder for the files (default: the manifest's security.certs, "
                   "else .satrap/<cluster>/certs)");
  sub_->add_flag("--force", force_, "a new CA and new certificates and tokens (rotation)");
}

int certs_command::run() {
  auto m = cluster_manifest(manifest_file_);
  if (!m) {
    std::cerr << "satrap certs: " << error_text(m.error()) << "\n";
    return 2;
  }
  auto out = out_.empty() ? cluster_certs_dir(*m, cluster_state_dir("", *m)) : out_;
  if (auto e = make_cluster_certs(*m, out, force_); !e.empty()) {
    std::cerr << "satrap certs: " << e << "\n";
    return 1;
  }
  std::cout << "certificates of cluster '" << m->cluster << "' in " << out << " (CA, head, client, "
            << m->nodes.size() << " node(s); keys and tokens mode 0600)\n";
  return 0;
}

}  // namespace satrap
