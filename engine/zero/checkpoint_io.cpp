#include "engine/zero/zero_engine.h"

#include <ATen/ATen.h>

#include <span>
#include <string_view>
#include <vector>

#include "checkpoint/deepspeed/deepspeed_source.h"
#include "checkpoint/engine_format/engine_checkpoint.h"

namespace tierzero::engine {
namespace {

const char* const kStateNames[] = {"fp32", "exp_avg", "exp_avg_sq"};

checkpoint::CheckpointManifest make_manifest(ZeroEngine& engine, const CheckpointExtras& extras) {
  checkpoint::CheckpointManifest manifest;
  manifest.zero_stage = engine.options().partition.stage;
  manifest.world_size = static_cast<uint32_t>(engine.comm().world_size());
  manifest.alignment = partitioning::kDeepSpeedAlignment;
  manifest.step = engine.optimizer().state().step;
  checkpoint::FlatGroup group;
  for (const ParamSpec& spec : all_params(engine.model())) group.params.push_back({spec.name, spec.shape});
  // m and v as the optimizer holds them (tierzero.optimizer_state_dtype); the master is fp32.
  const ElementType moments = *to_element_type(engine.options().optimizer_state_dtype);
  for (const char* name : kStateNames)
    group.states.push_back({name, std::string_view(name) == "fp32" ? ElementType::kF32 : moments});
  manifest.groups.push_back(std::move(group));
  manifest.loss_scaler = extras.loss_scaler;
  manifest.lr_scheduler = extras.lr_scheduler;
  manifest.model_config_json = extras.model_config_json;
  return manifest;
}

// DIR as a tierzero engine checkpoint, or a DeepSpeed ZeRO one (DIR/latest + *_optim_states.pt)
// read in `params`' order.
Result<std::unique_ptr<checkpoint::CheckpointReader>> open_for_resume(const std::string& dir,
                                                                      const std::vector<ParamSpec>& params) {
  if (checkpoint::is_engine_checkpoint(dir) || !checkpoint::is_deepspeed_checkpoint(dir))
    return checkpoint::CheckpointReader::open(dir);
  std::vector<checkpoint::TensorSpec> order;
  for (const ParamSpec& p : params) order.push_back({p.name, p.shape});
  return checkpoint::open_deepspeed_resume_reader(dir, "", order);
}

std::span<const std::byte> bytes_of(const at::Tensor& t) {
  return {static_cast<const std::byte*>(t.const_data_ptr()), static_cast<size_t>(t.nbytes())};
}

}  // namespace

Status agree_across_ranks(Comm& comm, const Status& status, const std::string& what) {
  at::Tensor failed =
      at::full({1}, status.ok() ? 0.0 : 1.0, at::TensorOptions().dtype(at::kFloat).device(comm.device()));
  comm.all_reduce_sum(failed).wait();
  if (!status.ok()) return status;
  if (failed.item<float>() > 0) return internal_error(what + " failed on another rank; see its log");
  return Status();
}

Status save_engine_checkpoint(const std::string& dir, ZeroEngine& engine, const CheckpointExtras& extras,
                              int compression_level) {
  Comm& comm = engine.comm();
  const auto rank = static_cast<uint32_t>(comm.rank());
  const std::string tag = "global_step" + std::to_string(extras.iteration);
  checkpoint::CheckpointManifest manifest = make_manifest(engine, extras);
  checkpoint::CheckpointOptions options;
  options.compression_level = compression_level;

  Status status = rank == 0 ? checkpoint::begin_checkpoint(dir, tag, manifest, options) : Status();
  TZ_RETURN_IF_ERROR(agree_across_ranks(comm, status, "starting checkpoint " + dir + "/" + tag));

  AdamPartitionState& state = engine.optimizer().state();
  std::vector<at::Tensor> host_states = {state.master.cpu().contiguous(), state.exp_avg.cpu().contiguous(),
                                         state.exp_avg_sq.cpu().contiguous()};
  checkpoint::RankData data;
  if (checkpoint::rank_stores_groups(manifest.zero_stage, rank)) {
    std::vector<std::span<const std::byte>> group;
    for (const at::Tensor& t : host_states) group.push_back(bytes_of(t));
    data.group_states.push_back(std::move(group));
  }
  data.rank_state = {{"iteration", extras.iteration}, {"data", extras.data}};
  status = checkpoint::write_checkpoint_rank(dir, tag, manifest, rank, data, options);
  TZ_RETURN_IF_ERROR(agree_across_ranks(comm, status, "writing rank files of " + dir + "/" + tag));

  status = rank == 0 ? checkpoint::commit_checkpoint(dir, tag, manifest, options) : Status();
  return agree_across_ranks(comm, status, "committing checkpoint " + dir + "/" + tag);
}

Result<CheckpointExtras> load_engine_checkpoint(const std::string& dir, ZeroEngine& engine) {
  Comm& comm = engine.comm();
  std::vector<ParamSpec> params = all_params(engine.model());
  TZ_ASSIGN_OR_RETURN(std::unique_ptr<checkpoint::CheckpointReader> reader, open_for_resume(dir, params));
  const checkpoint::CheckpointManifest& manifest = reader->manifest();
  const int stage = engine.options().partition.stage;
  if (manifest.zero_stage != stage)
    return invalid_argument(reader->path() +
                            " was saved with zero_optimization.stage=" + std::to_string(manifest.zero_stage) +
                            "; resume with that stage (this run uses " + std::to_string(stage) + ")");
  bool same_params = manifest.groups.size() == 1 && manifest.groups[0].params.size() == params.size() &&
                     manifest.groups[0].states.size() == 3;
  for (size_t i = 0; same_params && i < params.size(); ++i)
    same_params =
        manifest.groups[0].params[i].name == params[i].name && manifest.groups[0].params[i].shape == params[i].shape;
  if (!same_params)
    return invalid_argument(reader->path() +
                            " holds other parameters than this model (names, shapes or order "
                            "differ); resume with the model it was saved from");

  AdamPartitionState& state = engine.optimizer().state();
  at::Tensor* targets[] = {&state.master, &state.exp_avg, &state.exp_avg_sq};
  // Stage 0 stores one copy (rank 0's); every rank reads it as its whole partition.
  const uint32_t read_world = stage == 0 ? 1 : static_cast<uint32_t>(comm.world_size());
  const uint32_t read_rank = stage == 0 ? 0 : static_cast<uint32_t>(comm.rank());
  Status status;
  for (size_t s = 0; s < 3 && status.ok(); ++s) {
    // Read in the saved dtype; copy_ converts to the run's (bf16 moments round to nearest even).
    const ElementType dtype = manifest.groups[0].states[s].dtype;  // F32, BF16 or F16 (validate_manifest)
    if (s == 0 && dtype != ElementType::kF32) {
      status = invalid_argument(reader->path() + " holds the master weights in " + element_type_name(dtype) +
                                "; resume needs an fp32 master (states[0])");
      break;
    }
    at::Tensor host = at::empty({targets[s]->numel()}, *to_scalar_type(dtype));
    status = reader->read_partition(0, s, read_world, read_rank,
                                    {static_cast<std::byte*>(host.data_ptr()), static_cast<size_t>(host.nbytes())});
    if (status.ok()) targets[s]->copy_(host);
  }
  TZ_RETURN_IF_ERROR(agree_across_ranks(comm, status, "reading " + reader->path()));
  state.step = manifest.step;
  engine.sync_compute_params();

  CheckpointExtras extras;
  extras.loss_scaler = manifest.loss_scaler;
  extras.lr_scheduler = manifest.lr_scheduler;
  extras.model_config_json = manifest.model_config_json;
  extras.saved_world_size = static_cast<int>(manifest.world_size);
  const nlohmann::json& saved = reader->rank_state(0);
  extras.iteration = saved.is_object() ? saved.value("iteration", int64_t{0}) : 0;
  const uint32_t data_rank = extras.saved_world_size == comm.world_size() ? static_cast<uint32_t>(comm.rank()) : 0;
  const nlohmann::json& record = reader->rank_state(data_rank);
  if (record.is_object() && record.contains("data")) extras.data = record["data"];
  return extras;
}

}  // namespace tierzero::engine
