#include "engines/k8s_parts.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <string_view>

namespace satrap::k8s_detail {

namespace {

// A string YAML would read as something else (a bool, a null, a number) is quoted.
bool needs_quotes(const std::string& s) {
  if (s.empty())
    return true;
  std::string lower(s);
  std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
  for (auto* word : {"true", "false", "yes", "no", "on", "off", "y", "n", "null", "~"})
    if (lower == word)
      return true;
  char* end = nullptr;
  std::strtod(s.c_str(), &end);
  if (end && *end == '\0')
    return true;
  return std::isspace(static_cast<unsigned char>(s.front()))
         || std::isspace(static_cast<unsigned char>(s.back()))
         || std::string_view("-?:,[]{}#&*!|>'\"%@`$").find(s.front()) != std::string_view::npos
         || s.find(": ") != std::string::npos || s.find(" #") != std::string::npos;
}

void emit(YAML::Emitter& out, const obj& j) {
  switch (j.type()) {
    case obj::value_t::object:
      if (j.empty()) {
        out << YAML::Flow << YAML::BeginMap << YAML::EndMap;
        break;
      }
      out << YAML::BeginMap;
      for (auto& [k, v] : j.items()) {
        out << YAML::Key << k << YAML::Value;
        emit(out, v);
      }
      out << YAML::EndMap;
      break;
    case obj::value_t::array:
      if (j.empty()) {
        out << YAML::Flow << YAML::BeginSeq << YAML::EndSeq;
        break;
      }
      out << YAML::BeginSeq;
      for (auto& v : j)
        emit(out, v);
      out << YAML::EndSeq;
      break;
    case obj::value_t::string: {
      auto& s = j.get_ref<const std::string&>();
      if (s.find('\n') != std::string::npos)
        out << YAML::Literal << s;
      else if (needs_quotes(s))
        out << YAML::DoubleQuoted << s;
      else
        out << s;
      break;
    }
    case obj::value_t::boolean: out << j.get<bool>(); break;
    case obj::value_t::number_integer: out << j.get<int64_t>(); break;
    case obj::value_t::number_unsigned: out << j.get<uint64_t>(); break;
    case obj::value_t::number_float: out << j.get<double>(); break;
    default: out << YAML::Null;
  }
}

}  // namespace

std::string to_yaml(const obj& j) {
  YAML::Emitter out;
  out.SetIndent(2);
  out.SetSeqFormat(YAML::Block);
  emit(out, j);
  return std::string(out.c_str()) + "\n";
}

}  // namespace satrap::k8s_detail
