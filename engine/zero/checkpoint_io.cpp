#include "engine/zero/zero_engine.h"

#include <ATen/ATen.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <memory>
#include <mutex>
#include <span>
#include <string_view>
#include <thread>
#include <vector>

#include "checkpoint/deepspeed/deepspeed_source.h"
#include "checkpoint/engine_format/engine_checkpoint.h"
#include "engine/zero/internal/save_progress.h"

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
  states.push_back(
      {"fp32", ElementType::kF32, layout.record.compact_master ? StateCodec::kCompactMaster : StateCodec::kRaw});
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

namespace {

// The save of a BackgroundSave: the rank's files written by `write` (on a thread of its own, or
// before start() returns), then the commit. The write runs in a TBB arena of `copy_threads` threads
// (0: every core), the threads the fills copy the state into the staging buffers on
// (checkpoint::copy_in_parallel).
class EngineSave final : public BackgroundSave {
 public:
  EngineSave(Comm& comm, std::string dir, std::string tag, checkpoint::CheckpointManifest manifest,
             checkpoint::CheckpointOptions options, std::shared_ptr<SaveProgress> progress, int copy_threads)
      : comm_(comm),
        dir_(std::move(dir)),
        tag_(std::move(tag)),
        manifest_(std::move(manifest)),
        options_(options),
        progress_(std::move(progress)),
        copy_threads_(copy_threads) {}
  ~EngineSave() override {
    if (writer_.joinable()) writer_.join();
  }

  // Writes this rank's files from `data`: on a thread of its own with `in_background`, else now.
  void write(checkpoint::RankData data, bool in_background) {
    if (!in_background) {
      write_now(data);
      return;
    }
    writer_ = std::thread([this, data = std::move(data)]() mutable {
      {
        const checkpoint::RankData fills = std::move(data);  // gone (records let go) before the end
        write_now(fills);
      }
      progress_->end();  // the optimizer holds for nothing more, whatever became of the save
    });
  }

  bool written() override {
    if (comm_.world_size() == 1) return ended_.load(std::memory_order_acquire);  // nothing to agree on
    at::Tensor writing = at::full({1}, ended_.load(std::memory_order_acquire) ? 0.0 : 1.0,
                                  at::TensorOptions().dtype(at::kFloat).device(comm_.device()));
    comm_.all_reduce_sum(writing).wait();
    return writing.item<float>() == 0;
  }

  Status finish() override {
    if (writer_.joinable()) writer_.join();
    const std::string path = dir_ + "/" + tag_;
    Status status = agree_across_ranks(comm_, written_, "writing rank files of " + path);
    TZ_RETURN_IF_ERROR(status);
    status = comm_.rank() == 0 ? checkpoint::commit_checkpoint(dir_, tag_, manifest_, options_) : Status();
    return agree_across_ranks(comm_, status, "committing checkpoint " + path);
  }

  double held_seconds() const override { return progress_->held_seconds(); }
  double write_seconds() const override { return write_seconds_; }

 private:
  // Writes the rank's files: written_ its status, write_seconds_ the time since started_.
  void write_now(const checkpoint::RankData& data) {
    tbb::task_arena arena(copy_threads_ > 0 ? copy_threads_ : tbb::task_arena::automatic);
    arena.execute([&] { written_ = write_rank(data); });
    write_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
    ended_.store(true, std::memory_order_release);
  }
  Status write_rank(const checkpoint::RankData& data) {
    try {
      return checkpoint::write_checkpoint_rank(dir_, tag_, manifest_, static_cast<uint32_t>(comm_.rank()), data,
                                               options_);
    } catch (const Error& e) {
      return e.status();
    } catch (const std::exception& e) {
      return internal_error("writing checkpoint " + dir_ + "/" + tag_ + ": " + e.what());
    }
  }

  Comm& comm_;
  const std::string dir_, tag_;
  const checkpoint::CheckpointManifest manifest_;
  const checkpoint::CheckpointOptions options_;
  std::shared_ptr<SaveProgress> progress_;
  const int copy_threads_;
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  std::thread writer_;
  Status written_;                  // the rank files' write, once the writer is done
  std::atomic<bool> ended_{false};  // written_ and write_seconds_ are final
  double write_seconds_ = 0;        // from started_ to the end of that write
};

// `fills`, the sections of a partition of `numel` elements in manifest group `group`'s state_parts()
// order, each announcing what it has copied out; `progress` hears the prefix of the partition that
// every section has passed (a scales section passes the elements of each whole block it has read).
void report_reads(std::vector<StateReader>& fills, const checkpoint::FlatGroup& group, int64_t numel,
                  const std::shared_ptr<SaveProgress>& progress) {
  auto ends = std::make_shared<std::vector<int64_t>>(fills.size(), 0);
  auto guard = std::make_shared<std::mutex>();
  size_t section = 0;
  for (const checkpoint::StateSpec& state : group.states) {
    for (const checkpoint::StatePart& part : checkpoint::state_parts(state)) {
      const uint64_t bits = element_bits(part.dtype);
      const uint64_t per_item = part.per_block ? checkpoint::kStateBlock : 1;
      StateReader& slot = fills.at(section);
      slot = [fill = std::move(slot), section, bits, per_item, numel, ends, guard, progress,
              bytes = uint64_t{0}](std::span<std::byte> out) mutable -> Status {
        TZ_RETURN_IF_ERROR(fill(out));
        bytes += out.size();
        const auto end = static_cast<int64_t>(std::min<uint64_t>(bytes * 8 / bits * per_item, numel));
        std::lock_guard<std::mutex> lock(*guard);
        (*ends)[section] = end;
        progress->advance(*std::min_element(ends->begin(), ends->end()));
        return Status();
      };
      ++section;
    }
  }
}

Result<std::unique_ptr<EngineSave>> start_save(const std::string& dir, ZeroEngine& engine,
                                               const CheckpointExtras& extras, int compression_level,
                                               const checkpoint::WriteBuffers* write_buffers, bool in_background) {
  Comm& comm = engine.comm();
  const auto rank = static_cast<uint32_t>(comm.rank());
  const std::string tag = "global_step" + std::to_string(extras.iteration);
  checkpoint::CheckpointManifest manifest = make_manifest(engine, extras);
  checkpoint::CheckpointOptions options;
  options.compression_level = compression_level;
  options.write_buffers = write_buffers;

  Status status = rank == 0 ? checkpoint::begin_checkpoint(dir, tag, manifest, options) : Status();
  TZ_RETURN_IF_ERROR(agree_across_ranks(comm, status, "starting checkpoint " + dir + "/" + tag));

  // Each state streams from the optimizer into its section (from NVMe: a sub-group at a time); an
  // encoded state as it lives, record by record (each record read once for all its parts).
  checkpoint::RankData data;
  auto progress = std::make_shared<SaveProgress>();
  if (checkpoint::rank_stores_groups(manifest.zero_stage, rank)) {
    PartitionOptimizer& optimizer = engine.optimizer();
    const StoredLayout layout = optimizer.stored_layout();
    std::vector<StateReader> fills;
    if (layout.encoded()) {
      fills = optimizer.stored_readers();
      const auto block = static_cast<int64_t>(checkpoint::kStateBlock);  // a lone record may end inside a block
      data.piece_elements = static_cast<uint64_t>(
          layout.moments_8bit() ? (layout.record_numel + block - 1) / block * block : layout.record_numel);
    } else {
      fills = {optimizer.state_reader(0), optimizer.state_reader(1), optimizer.state_reader(2)};
    }
    // The steps after start() update only what the save has read; an optimizer that cannot wait
    // for it is saved now.
    in_background = in_background && optimizer.hold_for_save(progress);
    if (in_background) report_reads(fills, manifest.groups[0], engine.partitioner().partition_numel(), progress);
    data.group_state_fills.push_back(std::move(fills));
  }
  data.rank_state = {{"iteration", extras.iteration}, {"data", extras.data}};
  auto save = std::make_unique<EngineSave>(comm, dir, tag, std::move(manifest), options, progress,
                                           engine.options().cpu_threads);
  save->write(std::move(data), in_background);
  return save;
}

}  // namespace

Result<std::unique_ptr<BackgroundSave>> BackgroundSave::start(const std::string& dir, ZeroEngine& engine,
                                                              const CheckpointExtras& extras, int compression_level,
                                                              const checkpoint::WriteBuffers* write_buffers) {
  TZ_ASSIGN_OR_RETURN(std::unique_ptr<EngineSave> save,
                      start_save(dir, engine, extras, compression_level, write_buffers, true));
  return std::unique_ptr<BackgroundSave>(std::move(save));
}

Status save_engine_checkpoint(const std::string& dir, ZeroEngine& engine, const CheckpointExtras& extras,
                              int compression_level, const checkpoint::WriteBuffers* write_buffers) {
  TZ_ASSIGN_OR_RETURN(std::unique_ptr<EngineSave> save,
                      start_save(dir, engine, extras, compression_level, write_buffers, false));
  return save->finish();
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
  const at::ScalarType moments = checkpoint_moment_dtype(engine.options().optimizer_state_dtype);
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
