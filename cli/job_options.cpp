#include "cli/job_options.hpp"

#include "runtime/error.hpp"

#include <filesystem>

namespace satrap {

void job_options::add_to(CLI::App& app, bool job_required) {
  auto* job = app
                .add_option("--job", job_file_,
                            "YAML job file (sections name, model, data, training, placement, "
                            "checkpoint); flags override it")
                ->check(CLI::ExistingFile);
  if (job_required)
    job->required();
  auto defaults = job_spec_defaults();
  for (auto& f : job_fields()) {
    if (f.flag.empty())
      continue;
    auto help = f.help + " [" + f.key + ", default " + f.get(defaults) + "]";
    auto* opt = f.nested
                  ? app.add_option("--" + f.flag, repeated_[f.key], help)->allow_extra_args(false)
                  : app.add_option("--" + f.flag, values_[f.key], help);
    opt->group("Job (override the job file)");
    options_[f.key] = opt;
  }
}

caf::expected<job_spec> job_options::resolve() const {
  auto spec = job_spec_defaults();
  if (!job_file_.empty())
    if (auto err = job_spec_load_file(job_file_, spec))
      return err;
  for (auto& f : job_fields()) {
    auto it = options_.find(f.key);
    if (it == options_.end() || it->second->count() == 0)
      continue;
    std::string text;
    if (f.nested)  // one inner list per use of the flag
      for (auto& item : repeated_.at(f.key))
        text += (text.empty() ? "[" : ",[") + item + "]";
    else
      text = values_.at(f.key);
    auto want = f.set(spec, text);
    if (!want.empty())
      return make_error(errc::invalid_config,
                        "--" + f.flag + ": expected " + want + ", got '" + text + "'");
  }
  // Relative checkpoint folders from flags are relative to where the command runs (a job
  // submitted to a cluster runs elsewhere).
  for (auto* d : {&spec.checkpoint.dir, &spec.checkpoint.resume_from})
    if (!d->empty())
      *d = std::filesystem::absolute(*d).lexically_normal().string();
  if (auto err = job_spec_finalize(spec))
    return err;
  return spec;
}

}  // namespace satrap
