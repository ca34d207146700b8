#include "checkpoint/deepspeed_export/deepspeed_export.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "checkpoint/deepspeed_export/internal/deepspeed_pickles.h"
#include "checkpoint/deepspeed_export/internal/hf_order.h"
#include "checkpoint/engine_format/engine_checkpoint.h"
#include "common/common.h"

namespace tierzero::checkpoint {
namespace {

namespace fs = std::filesystem;
constexpr const char* kDeepSpeedVersion = "0.19.8";
constexpr const char* kStates[] = {"fp32", "exp_avg", "exp_avg_sq"};

std::string rank_file_name(const char* prefix, uint32_t rank, const char* kind) {
  return std::string(prefix) + "zero_pp_rank_" + std::to_string(rank) + "_mp_rank_00_" + kind + ".pt";
}

class Exporter {
 public:
  Exporter(std::unique_ptr<CheckpointReader> reader, std::string out_dir, const DeepSpeedExportOptions& options)
      : reader_(std::move(reader)), m_(reader_->manifest()), out_(std::move(out_dir)), o_(options) {}

  Status prepare();
  Status write_rank(uint32_t rank);
  Status publish();
  DeepSpeedExportReport report() const { return report_; }

 private:
  const FlatGroup& source_group() const { return m_.groups[0]; }
  std::span<const std::byte> bytes(const std::vector<float>& v) const { return std::as_bytes(std::span(v)); }
  std::vector<float> partition(size_t state, uint32_t rank) const;
  Status write_model_states(const std::string& path);
  Status write_optim_states(uint32_t rank, const std::string& path);
  Status finish_file(TorchSaveWriter& w, const std::string& path);
  Status module(TorchSaveWriter& w);

  std::unique_ptr<CheckpointReader> reader_;
  const CheckpointManifest& m_;
  std::string out_, tag_dir_;
  DeepSpeedExportOptions o_;
  FlatGroup group_;              // the parameters in transformers' order, DeepSpeed's flat group
  std::vector<uint64_t> start_;  // logical offset of each group_ parameter
  std::vector<float> flat_[3];   // each state's logical flat in group_ order
  bool tied_ = false;            // lm_head.weight is model.embed_tokens.weight
  int64_t iteration_ = 0;
  DeepSpeedExportReport report_;
};

Status Exporter::prepare() {
  const std::string& where = reader_->path();
  if (m_.zero_stage < 1 || m_.zero_stage > 3) {
    return unsupported(where + " was saved at ZeRO stage " + std::to_string(m_.zero_stage) +
                       "; DeepSpeed ZeRO checkpoints are stages 1-3");
  }
  if (m_.groups.size() != 1 || m_.groups[0].states.size() != 3 || !m_.replicated.empty()) {
    return unsupported(where + " holds " + std::to_string(m_.groups.size()) + " groups (the first of " +
                       std::to_string(m_.groups.empty() ? 0 : m_.groups[0].states.size()) + " states) and " +
                       std::to_string(m_.replicated.size()) +
                       " replicated tensors; --to deepspeed writes one group of "
                       "fp32 / exp_avg / exp_avg_sq and no buffers or frozen parameters");
  }
  for (size_t s = 0; s < 3; ++s) {
    const StateSpec& st = source_group().states[s];
    if (st.name != kStates[s] || st.dtype != ElementType::kF32) {
      return unsupported(where + ": state " + std::to_string(s) + " is '" + st.name + "' (" +
                         torch_dtype_name(st.dtype) + "); --to deepspeed needs fp32 fp32 / exp_avg / exp_avg_sq");
    }
  }
  // The parameters in transformers' order, and where each sits in the saved (engine) flat.
  const auto& params = source_group().params;
  std::vector<std::array<int64_t, 3>> keys;
  for (const TensorSpec& p : params) {
    TZ_ASSIGN_OR_RETURN(auto key, hf_parameter_rank(p.name));
    keys.push_back(key);
  }
  std::vector<size_t> order(params.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return keys[a] < keys[b]; });
  std::vector<uint64_t> saved_start{0};
  for (const TensorSpec& p : params) saved_start.push_back(saved_start.back() + static_cast<uint64_t>(p.numel()));
  group_.states = source_group().states;
  start_.push_back(0);
  for (size_t i : order) {
    group_.params.push_back(params[i]);
    start_.push_back(start_.back() + static_cast<uint64_t>(params[i].numel()));
  }
  const bool has_head =
      std::any_of(params.begin(), params.end(), [](const TensorSpec& p) { return p.name == "lm_head.weight"; });
  if (!has_head && !m_.model_config_json.empty()) {
    const nlohmann::json config = nlohmann::json::parse(m_.model_config_json, nullptr, false);
    tied_ = config.is_object() && config.value("tie_word_embeddings", false);
  }
  // Each state whole (the saved world-1 partition is the logical flat, padded), reordered.
  const uint64_t padded = partition_numel(source_group(), m_.zero_stage, 1, m_.alignment);
  std::vector<float> saved(padded);
  for (size_t s = 0; s < 3; ++s) {
    TZ_RETURN_IF_ERROR(reader_->read_partition(0, s, 1, 0, std::as_writable_bytes(std::span(saved))));
    flat_[s].resize(start_.back());
    for (size_t k = 0; k < order.size(); ++k) {
      std::copy_n(saved.begin() + static_cast<ptrdiff_t>(saved_start[order[k]]), start_[k + 1] - start_[k],
                  flat_[s].begin() + static_cast<ptrdiff_t>(start_[k]));
    }
  }
  const nlohmann::json& record = reader_->rank_state(0);
  iteration_ = record.is_object() ? record.value("iteration", m_.step) : m_.step;
  report_.tag = "global_step" + std::to_string(iteration_);
  tag_dir_ = out_ + "/" + report_.tag;
  std::error_code ec;
  fs::create_directories(tag_dir_, ec);
  if (ec) return io_error("cannot create " + tag_dir_ + ": " + ec.message());
  return {};
}

std::vector<float> Exporter::partition(size_t state, uint32_t rank) const {
  std::vector<float> out(partition_numel(group_, m_.zero_stage, o_.world_size, m_.alignment), 0.0f);
  for (const PartitionSegment& s : partition_segments(group_, m_.zero_stage, o_.world_size, m_.alignment, rank)) {
    std::copy_n(flat_[state].begin() + static_cast<ptrdiff_t>(s.logical_begin), s.length,
                out.begin() + static_cast<ptrdiff_t>(s.partition_begin));
  }
  return out;
}

Status Exporter::finish_file(TorchSaveWriter& w, const std::string& path) {
  TZ_RETURN_IF_ERROR(w.write(path));
  report_.files += 1;
  report_.bytes += fs::file_size(path);
  return {};
}

// The module's state_dict: every parameter (and a tied lm_head) in the run's dtype; stage 3 holds
// empty placeholders, as DeepSpeed saves partitioned parameters.
Status Exporter::module(TorchSaveWriter& w) {
  PickleWriter& p = w.pickle();
  std::vector<std::string> names;
  ds_pickle::begin_ordered_dict(p);
  p.mark();
  auto one = [&](const std::string& name, size_t k) -> Status {
    names.push_back(name);
    p.string(name);
    const TensorSpec& spec = group_.params[k];
    if (m_.zero_stage == 3) return w.tensor(o_.dtype, {0}, {});
    const std::span<const float> master(flat_[0].data() + start_[k], start_[k + 1] - start_[k]);
    if (o_.dtype == ElementType::kF32) return w.tensor(o_.dtype, spec.shape, std::as_bytes(master));
    std::vector<uint16_t> half(master.size());
    if (o_.dtype == ElementType::kBF16) {
      floats_to_bf16(master, half.data());
    } else {
      floats_to_fp16(master, half.data());
    }
    return w.tensor(o_.dtype, spec.shape, std::as_bytes(std::span(half)));
  };
  for (size_t k = 0; k < group_.params.size(); ++k) {
    TZ_RETURN_IF_ERROR(one(group_.params[k].name, k));
    if (tied_ && group_.params[k].name == "model.norm.weight") {
      const auto embed = std::find_if(group_.params.begin(), group_.params.end(),
                                      [](const TensorSpec& s) { return s.name == "model.embed_tokens.weight"; });
      if (embed != group_.params.end()) TZ_RETURN_IF_ERROR(one("lm_head.weight", embed - group_.params.begin()));
    }
  }
  p.end_dict();
  ds_pickle::state_dict_metadata(p, names);
  return {};
}

Status Exporter::write_model_states(const std::string& path) {
  TorchSaveWriter w(fs::path(path).stem().string());
  PickleWriter& p = w.pickle();
  p.begin_dict();
  p.string("module");
  TZ_RETURN_IF_ERROR(module(w));
  p.string("buffer_names");
  p.begin_list();
  p.end_list();
  p.string("optimizer");
  p.none();
  p.string("param_shapes");
  p.begin_list();
  ds_pickle::begin_ordered_dict(p);
  p.mark();
  for (const TensorSpec& s : group_.params) {
    p.string(s.name);
    ds_pickle::torch_size(p, s.shape);
  }
  p.end_dict();
  p.end_list();
  p.string("frozen_param_shapes");
  ds_pickle::begin_ordered_dict(p);
  p.string("shared_params");
  p.begin_dict();
  if (tied_) {
    p.string("lm_head.weight");
    p.string("model.embed_tokens.weight");
  }
  p.end_dict();
  p.string("frozen_param_fragments");
  ds_pickle::begin_ordered_dict(p);
  p.string("lr_scheduler");
  p.json(m_.lr_scheduler);
  for (const char* none : {"data_sampler", "random_ltd"}) {
    p.string(none);
    p.none();
  }
  const std::pair<const char*, int64_t> counts[] = {{"skipped_steps", iteration_ - m_.step},
                                                    {"global_steps", iteration_},
                                                    {"global_samples", iteration_ * o_.train_batch_size},
                                                    {"dp_world_size", o_.world_size},
                                                    {"mp_world_size", 1}};
  for (const auto& [key, value] : counts) {
    p.string(key);
    p.integer(value);
  }
  p.string("checkpoint_parallel_dimensions");
  p.json({{"pp_degree", 1}, {"tp_degree", 1}});
  p.string("ds_config");
  p.json(o_.ds_config);
  p.string("ds_version");
  p.string(kDeepSpeedVersion);
  p.end_dict();
  return finish_file(w, path);
}

Status Exporter::write_optim_states(uint32_t rank, const std::string& path) {
  TorchSaveWriter w(fs::path(path).stem().string());
  PickleWriter& p = w.pickle();
  const int stage = m_.zero_stage;
  const std::vector<float> parts[3] = {partition(0, rank), partition(1, rank), partition(2, rank)};
  const float step = static_cast<float>(m_.step);
  auto base_state = [&]() -> Status {  // torch's optimizer.state_dict() over the one flat parameter
    p.begin_dict();
    p.string("state");
    p.begin_dict();
    p.integer(0);
    p.begin_dict();
    p.string("step");
    TZ_RETURN_IF_ERROR(w.tensor(ElementType::kF32, {}, std::as_bytes(std::span(&step, 1))));
    for (size_t s = 1; s < 3; ++s) {
      p.string(kStates[s]);
      TZ_RETURN_IF_ERROR(w.tensor(ElementType::kF32, {static_cast<int64_t>(parts[s].size())}, bytes(parts[s])));
    }
    p.end_dict();
    p.end_dict();
    p.string("param_groups");
    ds_pickle::param_groups(p, o_);
    p.end_dict();
    return {};
  };
  auto scaler = [&] {
    p.string("loss_scaler");
    ds_pickle::loss_scaler(p, m_.loss_scaler, o_);
    p.string("dynamic_loss_scale");
    p.boolean(m_.loss_scaler.is_object() && m_.loss_scaler.value("dynamic", false));
    p.string("overflow");
    p.boolean(false);
  };
  const std::vector<int64_t> flat_shape{static_cast<int64_t>(parts[0].size())};
  p.begin_dict();
  p.string("optimizer_state_dict");
  p.begin_dict();
  if (stage == 3) {
    p.string("zero_stage");
    ds_pickle::zero_stage(p, 3);
    scaler();
    p.string("partition_count");
    p.integer(o_.world_size);
    p.string("optimizer_state_dict");
    TZ_RETURN_IF_ERROR(base_state());
    p.string("fp32_flat_groups");
    p.begin_list();
    TZ_RETURN_IF_ERROR(w.tensor(ElementType::kF32, flat_shape, bytes(parts[0])));
    p.end_list();
  } else {
    scaler();
    p.string("clip_grad");
    p.real(o_.gradient_clipping);
    p.string("base_optimizer_state");
    TZ_RETURN_IF_ERROR(base_state());
    p.string("single_partition_of_fp32_groups");
    p.begin_list();
    TZ_RETURN_IF_ERROR(w.tensor(ElementType::kF32, flat_shape, bytes(parts[0])));
    p.end_list();
    p.string("zero_stage");
    ds_pickle::zero_stage(p, stage);
    const uint64_t total = start_.back(), per_rank = parts[0].size();
    const uint64_t first = std::min<uint64_t>(total, uint64_t{rank} * per_rank);
    const uint64_t real = std::min<uint64_t>(total - first, per_rank);
    p.string("group_paddings");
    p.begin_list();
    p.integer(static_cast<int64_t>(per_rank - real));
    p.end_list();
    p.string("param_alignment_paddings");
    p.begin_list();
    p.begin_list();
    for (size_t k = 0; k < group_.params.size(); ++k) p.integer(0);
    p.end_list();
    p.end_list();
    p.string("partition_count");
    p.begin_list();
    p.integer(o_.world_size);
    p.end_list();
    p.string("ds_version");
    p.string(kDeepSpeedVersion);
    p.string("param_slice_mappings");
    p.begin_list();
    ds_pickle::begin_ordered_dict(p);
    p.mark();
    for (size_t k = 0; k < group_.params.size(); ++k) {
      const uint64_t lo = std::max(start_[k], first), hi = std::min(start_[k + 1], first + real);
      if (lo >= hi) continue;
      p.string(group_.params[k].name);
      ds_pickle::fragment_address(p, hi - lo, lo - first);
    }
    p.end_dict();
    p.end_list();
  }
  p.end_dict();
  p.string("ds_config");
  p.json(o_.ds_config);
  p.string("ds_version");
  p.string(kDeepSpeedVersion);
  p.end_dict();
  return finish_file(w, path);
}

Status Exporter::write_rank(uint32_t rank) {
  const char* prefix = o_.dtype == ElementType::kBF16 ? "bf16_" : "";
  TZ_RETURN_IF_ERROR(write_optim_states(rank, tag_dir_ + "/" + rank_file_name(prefix, rank, "optim_states")));
  if (m_.zero_stage == 3) return write_model_states(tag_dir_ + "/" + rank_file_name("", rank, "model_states"));
  if (rank == 0) return write_model_states(tag_dir_ + "/mp_rank_00_model_states.pt");
  return {};
}

// config.json, then `latest` through a temporary file renamed into place, the folder fsynced.
Status Exporter::publish() {
  if (!m_.model_config_json.empty()) {
    std::ofstream config(out_ + "/config.json", std::ios::binary);
    config << m_.model_config_json;
    if (!config.flush()) return io_error("cannot write " + out_ + "/config.json");
  }
  const std::string tmp = out_ + "/latest.tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return errno_status(errno, "creating " + tmp);
  const bool written =
      ::write(fd, report_.tag.data(), report_.tag.size()) == static_cast<ssize_t>(report_.tag.size()) &&
      ::fsync(fd) == 0;
  const int err = errno;
  ::close(fd);
  if (!written) return errno_status(err, "writing " + tmp);
  if (::rename(tmp.c_str(), (out_ + "/latest").c_str()) != 0) return errno_status(errno, "renaming " + tmp);
  const int dir = ::open(out_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return errno_status(errno, "opening " + out_);
  const int synced = ::fsync(dir);
  ::close(dir);
  if (synced != 0) return errno_status(errno, "fsync of " + out_);
  return {};
}

}  // namespace

Result<DeepSpeedExportReport> export_deepspeed_checkpoint(const std::string& src_dir, const std::string& src_tag,
                                                          const std::string& out_dir,
                                                          const DeepSpeedExportOptions& options) {
  if (options.world_size < 1) return invalid_argument("--to deepspeed: world size must be at least 1");
  if (options.dtype != ElementType::kF32 && options.dtype != ElementType::kBF16 && options.dtype != ElementType::kF16) {
    return invalid_argument(std::string("--to deepspeed: the run's dtype must be bf16, fp16 or fp32, not ") +
                            torch_dtype_name(options.dtype));
  }
  std::error_code ec;
  if (fs::exists(out_dir, ec) && !fs::is_empty(out_dir, ec)) {
    return invalid_argument(out_dir + " exists and is not empty; choose a new output folder");
  }
  TZ_ASSIGN_OR_RETURN(std::unique_ptr<CheckpointReader> reader, CheckpointReader::open(src_dir, src_tag));
  Exporter exporter(std::move(reader), out_dir, options);
  TZ_RETURN_IF_ERROR(exporter.prepare());
  for (uint32_t r = 0; r < options.world_size; ++r) TZ_RETURN_IF_ERROR(exporter.write_rank(r));
  TZ_RETURN_IF_ERROR(exporter.publish());
  return exporter.report();
}

}  // namespace tierzero::checkpoint
