#include "cli/process_record.hpp"

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

}  // namespace satrap
