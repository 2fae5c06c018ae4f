// Opens libsatrap_torch.so on first use (why a plugin: torchscript.hpp).
#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "models/dense/torchscript.hpp"

namespace satrap {

namespace {

namespace fs = std::filesystem;

constexpr const char* plugin_file = "libsatrap_torch.so";

std::vector<std::string> candidates() {
  std::vector<std::string> out;
  if (const char* env = std::getenv("SATRAP_TORCH_PLUGIN"); env != nullptr && *env != '\0') {
    out.emplace_back(env);
    return out;  // an explicit path is the only one tried
  }
  std::error_code ec;
  auto exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    out.push_back((exe.parent_path() / plugin_file).string());
    out.push_back((exe.parent_path().parent_path() / "lib" / plugin_file).string());
    out.push_back((exe.parent_path().parent_path() / "lib" / "satrap" / plugin_file).string());
  }
  return out;
}

result<const torchscript_plugin_api*> open_plugin() {
  std::string tried;
  for (const auto& path : candidates()) {
    std::error_code ec;
    if (!fs::exists(path, ec)) {
      tried += (tried.empty() ? "" : ", ") + path;
      continue;
    }
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr)
      return make_model_error(std::string("model.type torchscript: cannot open ") + path + ": "
                              + dlerror()
                              + " (is libtorch installed? ops/setup.sh installs libtorch-dev)");
    using entry_fn = const torchscript_plugin_api* (*)();
    auto entry = reinterpret_cast<entry_fn>(dlsym(h, "satrap_torchscript_plugin"));
    if (entry == nullptr)
      return make_model_error("model.type torchscript: " + path
                              + " has no entry point satrap_torchscript_plugin");
    const auto* api = entry();
    if (api == nullptr || api->abi != torchscript_plugin_abi)
      return make_model_error("model.type torchscript: " + path
                              + " was built for another satrap (plugin ABI "
                              + std::to_string(api ? api->abi : -1) + ", expected "
                              + std::to_string(torchscript_plugin_abi) + "); rebuild satrap");
    return api;
  }
  return make_model_error(
    "model.type torchscript: this satrap has no libtorch plugin (" + std::string(plugin_file)
    + " not found; looked at " + (tried.empty() ? std::string("nothing") : tried)
    + "). Build satrap where CMake finds Torch (ops/setup.sh installs libtorch-dev; or "
      "-DTorch_DIR=...), or set SATRAP_TORCH_PLUGIN to the plugin's path");
}

}  // namespace

result<const torchscript_plugin_api*> torchscript_plugin() {
  static std::once_flag once;
  static std::optional<result<const torchscript_plugin_api*>> opened;
  std::call_once(once, [] { opened.emplace(open_plugin()); });
  return *opened;
}

}  // namespace satrap
