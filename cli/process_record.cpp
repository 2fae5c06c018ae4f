#include "cli/process_record.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <signal.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace satrap {

namespace {

// Start time of `pid` (clock ticks since boot), "" when there is no such process.
std::string start_time(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  std::getline(in, stat);
  auto close = stat.rfind(')');  // the command name may hold spaces and parentheses
  if (close == std::string::npos)
    return "";
  std::istringstream rest(stat.substr(close + 2));
  std::string field;
  for (int i = 3; i <= 22 && rest >> field; ++i)
    if (i == 22)
      return field;
  return "";
}

std::string cmdline(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string joined(const std::vector<std::string>& argv) {
  std::string s;
  for (auto& a : argv)
    s += a + '\0';
  return s;
}

std::string hex(const std::string& s) {
  std::string out;
  for (unsigned char c : s)
    out += {"0123456789abcdef"[c >> 4], "0123456789abcdef"[c & 15]};
  return out;
}

}  // namespace

bool process_record_write(const std::string& path, pid_t pid,
                          const std::vector<std::string>& argv) {
  auto start = start_time(pid);
  std::ofstream out(path, std::ios::trunc);
  // pid, start time, hex of the NUL-separated argv
  out << pid << "\n" << start << "\n" << hex(joined(argv)) << "\n";
  return !start.empty();
}

pid_t process_record_live(const std::string& path) {
  std::ifstream in(path);
  long long pid = 0;
  std::string start, args;
  if (!(in >> pid >> start >> args) || pid <= 1)
    return 0;
  auto p = static_cast<pid_t>(pid);
  if (start_time(p) != start)
    return 0;
  // Until exec completes the child still shows up's command line; compare once it has.
  if (hex(cmdline(p)) != args)
    return 0;
  return p;
}

std::string satrap_executable() {
  std::error_code ec;
  auto real = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec || real.empty() || !std::filesystem::is_regular_file(real, ec))  // "... (deleted)"
    return "/proc/self/exe";
  return real.string();
}

pid_t satrap_start(const std::vector<std::string>& args, const std::string& log, bool new_session,
                   const std::string& env) {
  std::vector<std::string> env_strings;
  if (!env.empty()) {
    auto name = env.substr(0, env.find('=') + 1);
    for (char** e = environ; *e; ++e)
      if (std::string_view{*e}.rfind(name, 0) != 0)
        env_strings.emplace_back(*e);
    env_strings.push_back(env);
  }
  std::vector<char*> envp, argv;
  for (auto& e : env_strings)
    envp.push_back(e.data());
  envp.push_back(nullptr);
  for (auto& a : args)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  auto exe = satrap_executable();  // its real path: the process is named satrap, not exe
  auto pid = ::fork();
  if (pid != 0)
    return pid;
  if (new_session)
    ::setsid();
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);  // a satrap process blocks what it waits for itself
  int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  int devnull = ::open("/dev/null", O_RDONLY);
  ::dup2(devnull, 0);
  ::dup2(fd, 1);
  ::dup2(fd, 2);
  ::execve(exe.c_str(), argv.data(), env.empty() ? environ : envp.data());
  std::_Exit(127);
}

bool host_is_local(const std::string& host) {
  char name[HOST_NAME_MAX + 1] = {};
  gethostname(name, sizeof name);
  if (host == "127.0.0.1" || host == "localhost" || host == "::1" || host == name)
    return true;
  // An address of one of this network namespace's interfaces (a test host of ops/netns/netns.sh,
  // or a machine's own address in its manifest entry).
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0)
    return false;
  bool found = false;
  for (auto* a = list; a != nullptr && !found; a = a->ifa_next) {
    if (a->ifa_addr == nullptr)
      continue;
    char text[INET6_ADDRSTRLEN] = {};
    if (a->ifa_addr->sa_family == AF_INET)
      ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, text,
                  sizeof text);
    else if (a->ifa_addr->sa_family == AF_INET6)
      ::inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(a->ifa_addr)->sin6_addr, text,
                  sizeof text);
    found = text[0] != 0 && host == text;
  }
  ::freeifaddrs(list);
  return found;
}

}  // namespace satrap
