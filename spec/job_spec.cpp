#include "spec/job_spec.hpp"

#include "models/reference_trainer.hpp"
#include "runtime/error.hpp"
#include "spec/job_spec_fields.hpp"
#include "runtime/text_file.hpp"

#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <map>

namespace satrap {

using namespace job_spec_detail;

job_spec job_spec_defaults() {
  job_spec s;
  reference_options ref;
  s.model.network = ref.model;
  s.model.pool = ref.pool;
  s.model.dense = ref.dense;
  s.model.embedding = ref.embedding;
  s.training.batch_size = ref.batch_size;
  s.training.train_batches = ref.train_batches;
  s.training.test_batches = ref.test_batches;
  s.training.seed = ref.seed;
  return s;
}

namespace {

// The key table: name, then each section's rows (job_spec_fields.hpp).
std::vector<job_field> make_fields() {
  std::vector<job_field> fields{SATRAP_STRING_FIELD("name", "name", "job name", name)};
  for (auto section : {model_fields, data_fields, run_fields})
    for (auto& f : section())
      fields.push_back(std::move(f));
  for (auto& f : fields)  // every path that sets a key (file, flag, serving) records it
    f.set = [key = f.key, set = std::move(f.set)](job_spec& spec, const std::string& text) {
      auto want = set(spec, text);
      if (want.empty())
        spec.keys_set.insert(key);
      return want;
    };
  return fields;
}

const job_field* find_field(const std::string& key) {
  for (auto& f : job_fields())
    if (f.key == key)
      return &f;
  return nullptr;
}

std::string where(const std::string& origin, const YAML::Mark& m) {
  return origin + ":" + std::to_string(m.line + 1) + ":" + std::to_string(m.column + 1);
}

// An item of a sequence as text: a scalar, or a sequence of scalars as "[a,b]" (nested keys).
std::string sequence_item(const YAML::Node& item) {
  if (item.IsScalar())
    return item.Scalar();
  if (!item.IsSequence())
    return "?";
  std::string text = "[";
  for (size_t i = 0; i < item.size(); ++i)
    text.append(i ? "," : "").append(item[i].IsScalar() ? item[i].Scalar() : std::string("?"));
  text.push_back(']');
  return text;
}

caf::error load_node(const YAML::Node& node, const std::string& prefix, const std::string& origin,
                     job_spec& spec) {
  for (auto it = node.begin(); it != node.end(); ++it) {
    auto name = YAML::Node(it->first).as<std::string>();
    auto key = prefix.empty() ? name : prefix + "." + name;
    YAML::Node value = it->second;
    YAML::Node key_node = it->first;
    auto* field = find_field(key);
    if (field && field->yaml) {
      YAML::Emitter flow;
      flow.SetMapFormat(YAML::Flow);
      flow.SetSeqFormat(YAML::Flow);
      flow << value;
      auto message = field->set(spec, flow.c_str());
      if (!message.empty())
        return make_error(errc::invalid_config, where(origin, value.Mark()) + ": " + message);
      continue;
    }
    if (value.IsMap() && !field) {
      if (auto err = load_node(value, key, origin, spec))
        return err;
      continue;
    }
    if (!field)
      return make_error(errc::invalid_config,
                        where(origin, key_node.Mark()) + ": unknown key '" + key + "'");
    std::string text;
    if (value.IsScalar())
      text = value.Scalar();
    else if (value.IsSequence())
      for (size_t i = 0; i < value.size(); ++i)
        text.append(i ? "," : "").append(sequence_item(value[i]));  // (append: g++ 12 warns on +)
    auto want = field->set(spec, text);
    if (!want.empty())
      return make_error(errc::invalid_config, where(origin, value.Mark()) + ": " + key
                                                + ": expected " + want + ", got '" + text + "'");
  }
  return caf::none;
}

}  // namespace

const std::vector<job_field>& job_fields() {
  static const std::vector<job_field> fields = make_fields();
  return fields;
}

caf::error job_spec_load_text(const std::string& text, const std::string& origin, job_spec& spec) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return make_error(errc::invalid_config, where(origin, e.mark) + ": not valid YAML: " + e.msg);
  }
  if (root.IsNull())
    return caf::none;
  if (!root.IsMap())
    return make_error(errc::invalid_config,
                      where(origin, root.Mark()) + ": expected a map of sections "
                                                   "(name, model, data, training, placement, checkpoint, "
                                                   "supervision, timing)");
  try {
    return load_node(root, "", origin, spec);
  } catch (const YAML::Exception& e) {
    return make_error(errc::invalid_config, where(origin, e.mark) + ": " + e.msg);
  }
}

caf::error job_spec_load_file(const std::string& path, job_spec& spec) {
  auto text = read_text_file(path, job_file_max_bytes, "job file");
  if (!text)
    return text.error();
  auto train = spec.data.train_files, test = spec.data.test_files,
       valid = spec.data.validation_files;
  auto cache = spec.data.cache_dir;
  auto ckpt = spec.checkpoint.dir, resume = spec.checkpoint.resume_from;
  if (auto err = job_spec_load_text(*text, path, spec))
    return err;
  // Data paths (files, cache folder) the file gives are relative to the file's folder, so a job
  // runs from anywhere.
  auto folder = std::filesystem::absolute(path).parent_path();
  for (auto [files, before] : {std::pair{&spec.data.train_files, &train},
                               {&spec.data.test_files, &test},
                               {&spec.data.validation_files, &valid}})
    if (*files != *before)
      for (auto& f : *files)
        if (std::filesystem::path(f).is_relative())
          f = (folder / f).lexically_normal().string();
  auto& dir = spec.data.cache_dir;
  if (dir != cache && !dir.empty() && std::filesystem::path(dir).is_relative())
    dir = (folder / dir).lexically_normal().string();
  for (auto [d, before] :
       {std::pair{&spec.checkpoint.dir, &ckpt}, {&spec.checkpoint.resume_from, &resume}})
    if (*d != *before && !d->empty() && std::filesystem::path(*d).is_relative())
      *d = (folder / *d).lexically_normal().string();
  if (auto& f = spec.model.file; !f.empty() && std::filesystem::path(f).is_relative())
    f = (folder / f).lexically_normal().string();
  auto& history = spec.training.history_file;
  if (!history.empty() && std::filesystem::path(history).is_relative())
    history = (folder / history).lexically_normal().string();
  auto& trace = spec.data.kafka.trace_file;
  if (!trace.empty() && std::filesystem::path(trace).is_relative())
    trace = (folder / trace).lexically_normal().string();
  return caf::none;
}

caf::error job_spec_finalize(job_spec& spec) {
  if (auto err = data_finalize(spec))
    return err;
  spec.model.network.slots = job_data_slots(spec.data);
  spec.model.network.dense_features = job_data_dense_features(spec.data);
  spec.model.network.sequences = job_data_sequences(spec.data).lengths;
  spec.model.network.tasks = static_cast<int>(spec.data.labels.size());
  spec.model.network.task_weights = spec.training.task_weights;
  spec.model.embedding.dim = spec.model.network.dim;
  if (auto err = model_finalize(spec))
    return err;
  return run_finalize(spec);
}

bool job_has_validation(const job_spec& spec) {
  auto& d = spec.data;
  if (d.source == data_source::synthetic)
    return spec.training.validation_batches > 0;
  return !d.validation_files.empty() || d.reading.validation_fraction > 0.0;
}

// Every key through yaml-cpp's emitter, so that any string (a name "a: b", "{x", "run #7", a
// path with ": ") is quoted as YAML needs; lists as flow sequences; sections in the order of
// their first key.
std::string job_spec_to_yaml(const job_spec& spec) {
  std::vector<std::string> sections;
  std::map<std::string, std::vector<const job_field*>> by_section;
  for (auto& f : job_fields()) {
    auto dot = f.key.find('.');
    auto top = dot == std::string::npos ? std::string{} : f.key.substr(0, dot);
    if (!by_section.count(top))
      sections.push_back(top);
    by_section[top].push_back(&f);
  }
  YAML::Emitter e;
  e << YAML::BeginMap;
  auto emit = [&](const job_field& f, const std::string& key) {
    auto value = f.get(spec);
    e << YAML::Key << key << YAML::Value;
    if (f.yaml) {
      e << YAML::Load(value);
      return;
    }
    if (!f.list) {
      e << value;
      return;
    }
    if (f.nested) {
      std::vector<std::vector<std::string>> lists;
      split_nested(value, lists);
      e << YAML::Flow << YAML::BeginSeq;
      for (auto& list : lists) {
        e << YAML::Flow << YAML::BeginSeq;
        for (auto& item : list)
          e << item;
        e << YAML::EndSeq;
      }
      e << YAML::EndSeq;
      return;
    }
    if (value.size() >= 2 && value.front() == '[' && value.back() == ']')
      value = value.substr(1, value.size() - 2);
    e << YAML::Flow << YAML::BeginSeq;
    for (auto& item : split_list(value)) {
      auto b = item.find_first_not_of(' ');
      e << (b == std::string::npos ? std::string{} : item.substr(b));
    }
    e << YAML::EndSeq;
  };
  for (auto& top : sections) {
    if (top.empty()) {
      for (auto* f : by_section[top])
        emit(*f, f->key);
      continue;
    }
    e << YAML::Key << top << YAML::Value << YAML::BeginMap;
    for (auto* f : by_section[top])
      emit(*f, f->key.substr(top.size() + 1));
    e << YAML::EndMap;
  }
  e << YAML::EndMap;
  return std::string(e.c_str()) + "\n";
}

caf::expected<job_spec> job_spec_from_wire(const std::string& yaml, const std::string& origin) {
  auto spec = job_spec_defaults();
  if (auto err = job_spec_load_text(yaml, origin, spec))
    return err;
  if (auto err = job_spec_finalize(spec))
    return err;
  if (job_spec_to_yaml(spec) != yaml)
    return make_error(errc::invalid_config,
                      origin + ": the job spec does not read back as the spec that was sent "
                               "(it must be job_spec_to_yaml's text of a finalized spec)");
  return spec;
}

}  // namespace satrap
