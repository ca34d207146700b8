#include "engine/zero/zero_engine.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <span>
#include <string_view>
#include <vector>

#include "checkpoint/deepspeed/deepspeed_source.h"
#include "checkpoint/engine_format/engine_checkpoint.h"

namespace tierzero::engine {
namespace {

// The group's states as the optimizer holds them. An offloaded state with a compact master or 8-bit
// moments (StoredLayout::encoded) is saved as it lives (format_version 3): the master as its bf16
// weights + int16 residual, 8-bit moments as codes + block scales, the other states raw. Else the
// master is fp32 and m and v are in the optimizer's dtype (tierzero.optimizer_state_dtype).
std::vector<checkpoint::StateSpec> saved_states(ZeroEngine& engine) {
  using checkpoint::StateCodec;
  const StoredLayout layout = engine.optimizer().stored_layout();
  const ElementType moments = *to_element_type(checkpoint_moment_dtype(engine.options().optimizer_state_dtype));
  std::vector<checkpoint::StateSpec> states;
  states.push_back({"fp32", ElementType::kF32, layout.record.compact_master ? StateCodec::kCompactMaster : StateCodec::kRaw});
  for (const char* name : {"exp_avg", "exp_avg_sq"}) {
    if (layout.moments_8bit())
      states.push_back({name, ElementType::kF32, StateCodec::kBlockwise8,
                        std::string_view(name) == "exp_avg" ? ElementType::kI8 : ElementType::kU8});
    else
      states.push_back({name, moments});
  }
  return states;
}

bool same_states(const std::vector<checkpoint::StateSpec>& a, const std::vector<checkpoint::StateSpec>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const auto& x, const auto& y) {
    return x.name == y.name && x.dtype == y.dtype && x.codec == y.codec &&
           (x.codec != checkpoint::StateCodec::kBlockwise8 || x.codes == y.codes);
  });
}

checkpoint::CheckpointManifest make_manifest(ZeroEngine& engine, const CheckpointExtras& extras) {
  checkpoint::CheckpointManifest manifest;
  manifest.zero_stage = engine.options().partition.stage;
  manifest.world_size = static_cast<uint32_t>(engine.comm().world_size());
  manifest.alignment = partitioning::kDeepSpeedAlignment;
  manifest.step = engine.optimizer().step_count();
  checkpoint::FlatGroup group;
  for (const ParamSpec& spec : all_params(engine.model())) group.params.push_back({spec.name, spec.shape});
  group.states = saved_states(engine);
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

// Fills elements [begin, begin + n) of this rank's partition of state `s` from `reader`, in the
// run's dtype `run` (converted from the saved one; padding zero): the saved partition's segments
// (`segments`, this rank's layout) that meet the range, read through read_flat_range so a pass in
// increasing order streams each section.
Status fill_partition_range(checkpoint::CheckpointReader& reader,
                            const std::vector<checkpoint::PartitionSegment>& segments, int s, at::ScalarType run,
                            int64_t begin, std::span<std::byte> out) {
  const ElementType saved_type = reader.manifest().groups[0].states[s].dtype;
  const at::ScalarType saved = *to_scalar_type(saved_type);
  const auto n = static_cast<int64_t>(out.size() / c10::elementSize(run));
  at::Tensor target = at::from_blob(out.data(), {n}, at::TensorOptions().dtype(run));
  at::Tensor staged = saved == run ? target : at::empty({n}, at::TensorOptions().dtype(saved));
  staged.zero_();
  const auto item = static_cast<int64_t>(c10::elementSize(saved));
  const auto end = static_cast<uint64_t>(begin + n);
  for (const checkpoint::PartitionSegment& segment : segments) {
    const uint64_t lo = std::max<uint64_t>(segment.partition_begin, static_cast<uint64_t>(begin));
    const uint64_t hi = std::min<uint64_t>(segment.partition_begin + segment.length, end);
    if (lo >= hi) continue;
    TZ_RETURN_IF_ERROR(
        reader.read_flat_range(0, static_cast<size_t>(s), segment.logical_begin + (lo - segment.partition_begin),
                               {static_cast<std::byte*>(staged.data_ptr()) + (static_cast<int64_t>(lo) - begin) * item,
                                static_cast<size_t>(static_cast<int64_t>(hi - lo) * item)}));
  }
  if (!staged.is_same(target)) target.copy_(staged);  // bf16 <-> fp32: rounded to nearest even
  return Status();
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

  // Each state streams from the optimizer into its section (from NVMe: a sub-group at a time); an
  // encoded state as it lives, record by record (each record read once for all its parts).
  checkpoint::RankData data;
  if (checkpoint::rank_stores_groups(manifest.zero_stage, rank)) {
    PartitionOptimizer& optimizer = engine.optimizer();
    const StoredLayout layout = optimizer.stored_layout();
    if (layout.encoded()) {
      data.group_state_fills.push_back(optimizer.stored_readers());
      const auto block = static_cast<int64_t>(checkpoint::kStateBlock);  // a lone record may end inside a block
      data.piece_elements = static_cast<uint64_t>(
          layout.moments_8bit() ? (layout.record_numel + block - 1) / block * block : layout.record_numel);
    } else {
      data.group_state_fills.push_back(
          {optimizer.state_reader(0), optimizer.state_reader(1), optimizer.state_reader(2)});
    }
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

  // Stage 0 stores one copy (rank 0's); every rank reads it as its whole partition. The states go
  // into the optimizer range by range (onto NVMe a sub-group at a time), converted to its dtypes.
  const uint32_t read_world = stage == 0 ? 1 : static_cast<uint32_t>(comm.world_size());
  const uint32_t read_rank = stage == 0 ? 0 : static_cast<uint32_t>(comm.rank());
  const std::vector<checkpoint::PartitionSegment> segments =
      checkpoint::partition_segments(manifest.groups[0], stage, read_world, manifest.alignment, read_rank);
  const at::ScalarType moments =
      engine.options().offload_optimizer ? checkpoint_moment_dtype(engine.options().optimizer_state_dtype) : at::kFloat;
  // Saved as this optimizer holds it (same encoded layout, same partitions): its stored parts go
  // straight into the records, bit for bit. Else decoded to fp32 and converted (a compact master
  // splits exactly; 8-bit moments are re-encoded: new codes, not the saved ones).
  const bool as_stored = engine.optimizer().stored_layout().encoded() &&
                         (stage == 0 || manifest.world_size == static_cast<uint32_t>(comm.world_size())) &&
                         manifest.alignment == partitioning::kDeepSpeedAlignment &&
                         same_states(manifest.groups[0].states, saved_states(engine));
  Status status;
  if (manifest.groups[0].states[0].dtype != ElementType::kF32)
    status = invalid_argument(reader->path() + " holds the master weights in " +
                              element_type_name(manifest.groups[0].states[0].dtype) +
                              "; resume needs an fp32 master (states[0])");
  if (status.ok() && as_stored)
    status = engine.optimizer().load_stored(
        [&](int s, int part, uint64_t offset, std::span<std::byte> out) {
          return reader->read_stored(0, static_cast<size_t>(s), static_cast<size_t>(part), read_rank, offset, out);
        },
        manifest.step);
  else if (status.ok())
    status = engine.optimizer().load_state(
        [&](int s, int64_t begin, std::span<std::byte> out) {
          return fill_partition_range(*reader, segments, s, s == 0 ? at::kFloat : moments, begin, out);
        },
        manifest.step);
  if (status.ok()) status = reader->finish_reads();  // every section read to its end, its checksum checked
  TZ_RETURN_IF_ERROR(agree_across_ranks(comm, status, "reading " + reader->path()));
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
