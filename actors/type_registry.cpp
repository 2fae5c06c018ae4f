#include "actors/type_registry.hpp"

#include "actors/admin/admin.hpp"
#include "actors/job_supervisor/job_supervisor.hpp"
#include "runtime/error.hpp"
#include "runtime/wake_stealing.hpp"

#include <caf/io/middleman.hpp>
#include <caf/scheduler/coordinator.hpp>

#include <algorithm>
#include <thread>

namespace satrap {

void register_types(caf::actor_system_config& cfg) {
  cfg.add_message_type<capnp_payload>("satrap::capnp_payload");
  cfg.add_message_type<shard_stats>("satrap::shard_stats");
  cfg.add_message_type<shard_snapshot_info>("satrap::shard_snapshot_info");
  cfg.add_message_type<cut_report>("satrap::cut_report");
  cfg.add_message_type<actor_stat>("satrap::actor_stat");
  cfg.add_message_type<std::vector<actor_stat>>("std::vector<satrap::actor_stat>");
  cfg.add_message_type<std::vector<node_agent_actor>>("std::vector<satrap::node_agent_actor>");
  cfg.add_message_type<train_plan>("satrap::train_plan");
  cfg.add_message_type<progress_report>("satrap::progress_report");
  cfg.add_message_type<trainer_report>("satrap::trainer_report");
  cfg.add_message_type<job_result>("satrap::job_result");
  cfg.add_message_type<std::vector<double>>("std::vector<double>");
  cfg.add_message_type<embedding_shard_actor>("satrap::embedding_shard_actor");
  cfg.add_message_type<gradient_aggregator_actor>("satrap::gradient_aggregator_actor");
  cfg.add_message_type<data_loader_actor>("satrap::data_loader_actor");
  cfg.add_message_type<dense_trainer_actor>("satrap::dense_trainer_actor");
  cfg.add_message_type<progress_sink_actor>("satrap::progress_sink_actor");
  cfg.add_message_type<job_supervisor_actor>("satrap::job_supervisor_actor");
  cfg.add_message_type<node_agent_actor>("satrap::node_agent_actor");
  cfg.add_message_type<admin_actor>("satrap::admin_actor");
  cfg.add_message_type<node_info>("satrap::node_info");
  cfg.add_message_type<job_record>("satrap::job_record");
  cfg.add_message_type<std::vector<job_record>>("std::vector<satrap::job_record>");
  cfg.add_message_type<job_progress>("satrap::job_progress");
  cfg.add_message_type<std::vector<embedding_shard_actor>>(
    "std::vector<satrap::embedding_shard_actor>");
  cfg.add_message_type<std::vector<gradient_aggregator_actor>>(
    "std::vector<satrap::gradient_aggregator_actor>");
  cfg.add_message_type<std::vector<data_loader_actor>>("std::vector<satrap::data_loader_actor>");
  cfg.add_error_category(caf::atom("satrap"),
                         [](uint8_t code, caf::atom_value, const caf::message& ctx) {
                           auto text = std::string(to_string(static_cast<errc>(code)));
                           if (ctx.size() == 1 && ctx.match_element<std::string>(0))
                             text += ": " + ctx.get_as<std::string>(0);
                           return text;
                         });
}

satrap_config::satrap_config() {
  tune_allocator_for_payloads();  // multi-MB payloads without a page fault per 4 KiB
  register_types(*this);
  load<caf::io::middleman>();
  // Nodes that learn of each other's actors through the head connect directly instead of
  // routing every lookup through the head.
  set("middleman.enable-automatic-connections", true);
  // Deserialise arriving messages in the middleman's thread instead of handing them to a BASP
  // worker: the worker first copies the whole payload (payload_.assign) and is one more thread
  // hop, while satrap's bulk messages deserialise as one memcpy (capnp_payload) anyway.
  set("middleman.workers", size_t{0});
  // Scheduler: one worker per core, and satrap's work-stealing policy (runtime/wake_stealing.hpp):
  // an idle worker polls for 100 us, yielding, then parks until work is enqueued for it. CAF's
  // own policy only polls (50 us naps, then 1 ms sleeps) and left the second core idle 11% of a
  // training run while actors waited on the first one's queue. CAF 0.17's defaults also ran at
  // least 4 workers; between multi-MB remote lookups the idle ones woke 20,000 times a second.
  set("scheduler.max-threads", size_t{std::max(1u, std::thread::hardware_concurrency())});
  add_scheduler_options(custom_options_);
  load<caf::scheduler::coordinator<wake_stealing>>();
}

}  // namespace satrap
