#include "scenario.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/autograd.h>

#include <cmath>
#include <sstream>

#include "engine/model/functional_model.h"
#include "engine/zero/internal/sharded_partitioner.h"
#include "engine/zero/zero_engine.h"

namespace tierzero::engine::testing {
namespace {

constexpr uint64_t kInitSeed = 42;
constexpr double kLr = 1e-2;
constexpr double kWeightDecay = 0.01;

at::ScalarType dtype_of(const std::string& name) {
  if (name == "bf16") return at::kBFloat16;
  if (name == "fp16") return at::kHalf;
  return at::kFloat;
}

GradAccumulator grad_accumulator_of(const std::string& name) {
  if (name == "host") return GradAccumulator::kHost;
  if (name == "device") return GradAccumulator::kDevice;
  if (name == "auto") return GradAccumulator::kAuto;
  throw Error(invalid_argument("grad_accumulator " + name + " is not auto, host or device"));
}

// The global batch of `step`: world * accumulation * micro_batch samples of seq_len + 1 tokens.
at::Tensor global_batch(const Scenario& s, int step) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(1000 + step);
  int64_t samples = int64_t{s.world_size} * s.accumulation * s.micro_batch;
  return at::randint(64, {samples, s.seq_len + 1}, gen, at::kLong);
}

// Copies stage 3's counters into `trace`; throws when the live limit was passed.
void record_stage3_stats(const ShardedPartitioner& partitioner, const Scenario& s, TrainTrace& trace) {
  ShardedPartitioner::Stats stats = partitioner.stats();
  trace.peak_live_numel = stats.peak_live_numel;
  trace.reduce_scatters = stats.reduce_scatters;
  for (size_t slot = 0; slot < partitioner.layout().slots.size(); ++slot)
    trace.gathers[partitioner.layout().slots[slot].name] = partitioner.gathers_of(slot);
  if (stats.peak_live_numel > s.max_live_numel)
    throw Error(internal_error(s.name() + ": " + std::to_string(stats.peak_live_numel) +
                               " gathered elements were alive at once, over max_live_numel " +
                               std::to_string(s.max_live_numel)));
}

}  // namespace

std::vector<std::string> Scenario::to_args() const {
  return {"--stage=" + std::to_string(stage),
          "--offload=" + std::to_string(offload),
          "--offload_params=" + std::to_string(offload_params),
          "--world_size=" + std::to_string(world_size),
          "--steps=" + std::to_string(steps),
          "--accumulation=" + std::to_string(accumulation),
          "--micro_batch=" + std::to_string(micro_batch),
          "--seq_len=" + std::to_string(seq_len),
          "--tied=" + std::to_string(tied),
          "--clip=" + std::to_string(clip),
          "--dtype=" + dtype,
          "--grad_dtype=" + grad_dtype,
          "--device=" + device,
          "--bucket_numel=" + std::to_string(bucket_numel),
          "--persistence_threshold=" + std::to_string(persistence_threshold),
          "--prefetch_numel=" + std::to_string(prefetch_numel),
          "--max_live_numel=" + std::to_string(max_live_numel),
          "--max_reuse_distance=" + std::to_string(max_reuse_distance),
          "--resume_dir=" + resume_dir,
          "--save_dir=" + save_dir,
          "--overlap=" + std::to_string(overlap),
          "--sub_group_numel=" + std::to_string(sub_group_numel),
          "--staging_buffers=" + std::to_string(staging_buffers),
          "--compare_overlap=" + std::to_string(compare_overlap),
          "--staging_slot_bytes=" + std::to_string(staging_slot_bytes),
          "--weights_dir=" + weights_dir,
          "--streamed=" + std::to_string(streamed),
          "--compare_streamed=" + std::to_string(compare_streamed),
          "--grad_accumulator=" + grad_accumulator,
          "--window_steps=" + std::to_string(window_steps),
          "--compare_accumulator=" + std::to_string(compare_accumulator),
          "--nvme_dir=" + nvme_dir,
          "--nvme_buffers=" + std::to_string(nvme_buffers),
          "--nvme_pipeline=" + std::to_string(nvme_pipeline),
          "--compare_nvme=" + std::to_string(compare_nvme),
          "--nvme_params_dir=" + nvme_params_dir,
          "--nvme_param_buffers=" + std::to_string(nvme_param_buffers),
          "--nvme_param_buffer_numel=" + std::to_string(nvme_param_buffer_numel),
          "--max_in_cpu=" + std::to_string(max_in_cpu),
          "--master=" + master,
          "--state_dtype=" + state_dtype,
          "--round_away=" + std::to_string(round_away),
          "--records_in_memory=" + std::to_string(records_in_memory),
          "--host_grads=" + host_grads,
          "--grad_ring_records=" + std::to_string(grad_ring_records),
          "--window_group=" + std::to_string(window_group),
          "--kept_layers=" + std::to_string(kept_layers),
          "--plan_steps=" + std::to_string(plan_steps),
          "--compare_fp32_master=" + std::to_string(compare_fp32_master)};
}

Scenario Scenario::from_args(const std::vector<std::string>& args) {
  Scenario s;
  for (const std::string& arg : args) {
    size_t eq = arg.find('=');
    if (arg.rfind("--", 0) != 0 || eq == std::string::npos) throw Error(invalid_argument("bad argument " + arg));
    std::string key = arg.substr(2, eq - 2), value = arg.substr(eq + 1);
    if (key == "stage")
      s.stage = std::stoi(value);
    else if (key == "offload")
      s.offload = value == "1";
    else if (key == "offload_params")
      s.offload_params = value == "1";
    else if (key == "world_size")
      s.world_size = std::stoi(value);
    else if (key == "steps")
      s.steps = std::stoi(value);
    else if (key == "accumulation")
      s.accumulation = std::stoi(value);
    else if (key == "micro_batch")
      s.micro_batch = std::stoi(value);
    else if (key == "seq_len")
      s.seq_len = std::stoi(value);
    else if (key == "tied")
      s.tied = value == "1";
    else if (key == "clip")
      s.clip = std::stod(value);
    else if (key == "dtype")
      s.dtype = value;
    else if (key == "grad_dtype")
      s.grad_dtype = value;
    else if (key == "device")
      s.device = value;
    else if (key == "bucket_numel")
      s.bucket_numel = std::stoll(value);
    else if (key == "persistence_threshold")
      s.persistence_threshold = std::stoll(value);
    else if (key == "prefetch_numel")
      s.prefetch_numel = std::stoll(value);
    else if (key == "max_live_numel")
      s.max_live_numel = std::stoll(value);
    else if (key == "max_reuse_distance")
      s.max_reuse_distance = std::stoll(value);
    else if (key == "resume_dir")
      s.resume_dir = value;
    else if (key == "save_dir")
      s.save_dir = value;
    else if (key == "overlap")
      s.overlap = value == "1";
    else if (key == "sub_group_numel")
      s.sub_group_numel = std::stoll(value);
    else if (key == "staging_buffers")
      s.staging_buffers = std::stoi(value);
    else if (key == "compare_overlap")
      s.compare_overlap = value == "1";
    else if (key == "staging_slot_bytes")
      s.staging_slot_bytes = std::stoll(value);
    else if (key == "weights_dir")
      s.weights_dir = value;
    else if (key == "streamed")
      s.streamed = value == "1";
    else if (key == "compare_streamed")
      s.compare_streamed = value == "1";
    else if (key == "grad_accumulator")
      s.grad_accumulator = value;
    else if (key == "window_steps")
      s.window_steps = std::stoi(value);
    else if (key == "compare_accumulator")
      s.compare_accumulator = value == "1";
    else if (key == "nvme_dir")
      s.nvme_dir = value;
    else if (key == "nvme_buffers")
      s.nvme_buffers = std::stoi(value);
    else if (key == "nvme_pipeline")
      s.nvme_pipeline = value == "1";
    else if (key == "compare_nvme")
      s.compare_nvme = value == "1";
    else if (key == "nvme_params_dir")
      s.nvme_params_dir = value;
    else if (key == "nvme_param_buffers")
      s.nvme_param_buffers = std::stoi(value);
    else if (key == "nvme_param_buffer_numel")
      s.nvme_param_buffer_numel = std::stoll(value);
    else if (key == "max_in_cpu")
      s.max_in_cpu = std::stoll(value);
    else if (key == "master")
      s.master = value;
    else if (key == "state_dtype")
      s.state_dtype = value;
    else if (key == "round_away")
      s.round_away = value == "1";
    else if (key == "records_in_memory")
      s.records_in_memory = std::stoll(value);
    else if (key == "host_grads")
      s.host_grads = value;
    else if (key == "grad_ring_records")
      s.grad_ring_records = std::stoll(value);
    else if (key == "window_group")
      s.window_group = std::stoll(value);
    else if (key == "kept_layers")
      s.kept_layers = std::stoll(value);
    else if (key == "plan_steps")
      s.plan_steps = value == "1";
    else if (key == "compare_fp32_master")
      s.compare_fp32_master = value == "1";
    else
      throw Error(invalid_argument("unknown argument " + arg));
  }
  return s;
}

std::string Scenario::name() const {
  const Scenario defaults;
  std::string knobs;
  if (bucket_numel != defaults.bucket_numel) knobs += "_bucket" + std::to_string(bucket_numel);
  if (max_live_numel != defaults.max_live_numel) knobs += "_live" + std::to_string(max_live_numel);
  if (max_reuse_distance != defaults.max_reuse_distance) knobs += "_reuse" + std::to_string(max_reuse_distance);
  if (!overlap) knobs += "_plain";
  if (sub_group_numel != defaults.sub_group_numel) knobs += "_subgroup" + std::to_string(sub_group_numel);
  if (staging_slot_bytes != defaults.staging_slot_bytes) knobs += "_slot" + std::to_string(staging_slot_bytes);
  if (streamed) knobs += "_streamed";
  if (grad_dtype != defaults.grad_dtype) knobs += "_grads_" + grad_dtype;
  if (grad_accumulator != defaults.grad_accumulator) knobs += "_accumulate_" + grad_accumulator;
  if (window_steps != defaults.window_steps) knobs += "_window" + std::to_string(window_steps);
  if (!nvme_dir.empty()) knobs += "_nvme" + std::to_string(nvme_buffers) + (nvme_pipeline ? "" : "_sync");
  if (!nvme_params_dir.empty())
    knobs += "_params_nvme" + std::to_string(nvme_param_buffers) + "x" + std::to_string(nvme_param_buffer_numel) +
             (max_in_cpu > 0 ? "_in_cpu" + std::to_string(max_in_cpu) : "");
  if (master != defaults.master) knobs += "_master_" + master;
  if (state_dtype != defaults.state_dtype) knobs += "_state_" + state_dtype;
  if (round_away) knobs += "_round_away";
  if (records_in_memory != 0) knobs += "_records_in_memory" + std::to_string(records_in_memory);
  if (host_grads != defaults.host_grads) knobs += "_host_grads_" + host_grads;
  if (grad_ring_records != 0) knobs += "_grad_ring" + std::to_string(grad_ring_records);
  if (window_group != 1) knobs += "_window_group" + std::to_string(window_group);
  if (kept_layers != 0) knobs += "_kept" + std::to_string(kept_layers);
  if (!plan_steps) knobs += "_unplanned";
  return "stage" + std::to_string(stage) + (offload ? "_offload" : "") + (offload_params ? "_params" : "") + "_w" +
         std::to_string(world_size) + "_acc" + std::to_string(accumulation) + "_" + dtype + "_" + device + knobs;
}

ModelConfig test_model_config(bool tied) {
  ModelConfig c;
  c.vocab_size = 64;
  c.hidden_size = 32;
  c.intermediate_size = 48;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 8;
  c.max_position_embeddings = 64;
  c.tie_word_embeddings = tied;
  c.sliding_window_layers.assign(c.num_hidden_layers, false);
  return c;
}

TrainTrace train_with_engine(const Scenario& s, Comm& comm) {
  ModelConfig config = test_model_config(s.tied);
  std::unique_ptr<FunctionalModel> model = make_causal_lm(config);
  ZeroEngineOptions options;
  options.partition.stage = s.stage;
  options.partition.compute_dtype = dtype_of(s.dtype);
  options.partition.grad_dtype = dtype_of(s.grad_dtype);
  options.partition.reduce_bucket_numel = s.bucket_numel;
  options.partition.persistence_threshold = s.persistence_threshold;
  options.partition.prefetch_numel = s.prefetch_numel;
  options.partition.max_live_numel = s.max_live_numel;
  options.partition.max_reuse_distance = s.max_reuse_distance;
  options.adam.weight_decay = kWeightDecay;
  options.offload_optimizer = s.offload;
  options.partition.offload_params = s.offload_params;
  options.cpu_threads = 1;
  options.gradient_clipping = s.clip;
  options.overlap_offload = s.overlap;
  options.sub_group_size = s.sub_group_numel;
  options.grad_staging_buffers = s.staging_buffers;
  options.grad_staging_slot_bytes = static_cast<uint64_t>(s.staging_slot_bytes);
  options.grad_accumulator = grad_accumulator_of(s.grad_accumulator);
  options.gradient_accumulation_steps = s.window_steps > 0 ? s.window_steps : s.accumulation;
  options.master_layout = s.master == "compact" ? MasterLayout::kCompact : MasterLayout::kFp32;
  options.optimizer_state_dtype = s.state_dtype == "int8" ? at::kChar : dtype_of(s.state_dtype);
  if (s.round_away) options.params16_rounding = cpu_adam::Bf16Rounding::kNearestAway;
  options.optimizer_records_in_memory = s.records_in_memory;
  options.offload_grad_dtype = dtype_of(s.host_grads);
  options.grad_ring_records = s.grad_ring_records;
  options.window_group = s.window_group;
  options.kept_layers = s.kept_layers;
  if (!s.nvme_dir.empty())
    options.nvme_optimizer = {.paths = {s.nvme_dir},
                              .buffer_count = s.nvme_buffers,
                              .pipeline_read = s.nvme_pipeline,
                              .pipeline_write = s.nvme_pipeline,
                              .io = {}};
  if (!s.nvme_params_dir.empty())
    options.nvme_params = {.paths = {s.nvme_params_dir},
                           .buffer_count = s.nvme_param_buffers,
                           .buffer_numel = s.nvme_param_buffer_numel,
                           .max_in_cpu = s.max_in_cpu,
                           .io = {}};
  std::unique_ptr<ZeroEngine> built;
  if (s.streamed) {
    std::unique_ptr<ParamSource> source = value_or_throw(open_safetensors_params(s.weights_dir));
    built = std::make_unique<ZeroEngine>(*model, *source, options, comm);
  } else {
    built = std::make_unique<ZeroEngine>(*model,
                                         s.weights_dir.empty()
                                             ? init_parameters(config, kInitSeed, at::kFloat, at::kCPU)
                                             : value_or_throw(load_hf_weights(s.weights_dir, at::kFloat, at::kCPU)),
                                         options, comm);
  }
  ZeroEngine& engine = *built;
  if (s.offload_params && s.nvme_params_dir.empty()) {  // the shard the optimizer writes is in host memory,
                                                        // pinned when it feeds a GPU
    const at::Tensor shard = engine.partitioner().compute_partition();
    if (!shard.is_cpu() || shard.is_pinned() != comm.device().is_cuda())
      throw Error(internal_error("offloaded parameter shard on " + shard.device().str() +
                                 (shard.is_pinned() ? ", pinned" : ", not pinned")));
  }

  if (s.offload && s.grad_accumulator != "auto" &&
      engine.grad_accumulation_on_device() != (s.grad_accumulator == "device"))
    throw Error(internal_error("grad_accumulator " + s.grad_accumulator +
                               " not honoured: " + engine.grad_accumulator_choice()));

  // The step that follows into the forward: stage 3, the optimizer offloaded (host memory or NVMe), overlap on.
  const bool follows = s.offload && s.overlap && s.stage == 3;
  if (engine.follows_step() != follows)
    throw Error(internal_error(std::string("the optimizer step ") + (follows ? "does not follow" : "follows") +
                               " into the forward"));
  // ... and steps inside the backward: one rank, no clipping, no fp16, parameters not on NVMe.
  const bool in_backward =
      follows && s.world_size == 1 && s.clip == 0.0 && s.dtype != "fp16" && s.nvme_params_dir.empty();
  if (engine.steps_in_backward() != in_backward)
    throw Error(internal_error(std::string("the optimizer ") + (in_backward ? "cannot" : "can") +
                               " step inside the backward: " + engine.backward_step_choice()));

  TrainTrace trace;
  if (!s.resume_dir.empty())
    trace.first_step = static_cast<int>(value_or_throw(load_engine_checkpoint(s.resume_dir, engine)).iteration);
  for (int step = trace.first_step; step < s.steps; ++step) {
    at::Tensor batch = global_batch(s, step);
    std::vector<TokenBatch> window;  // the trainer's path: queue_window
    for (int micro = 0; micro < s.accumulation; ++micro) {
      int64_t first = (int64_t{micro} * s.world_size + comm.rank()) * s.micro_batch;
      at::Tensor samples = batch.narrow(0, first, s.micro_batch);
      window.push_back({samples.narrow(1, 0, s.seq_len), samples.narrow(1, 1, s.seq_len)});
    }
    double loss_sum = 0.0;
    if (s.plan_steps) engine.plan_step(kLr, 1.0);
    for (const at::Tensor& loss : engine.queue_window(window, 1.0 / s.accumulation)) loss_sum += loss.item<double>();
    if (follows && s.accumulation > 1 && engine.forward_window_choice().rfind("unit by unit", 0) != 0)
      throw Error(internal_error("the window ran micro-batch by micro-batch: " + engine.forward_window_choice()));
    StepOutcome outcome = engine.step(kLr, 1.0);
    if (outcome.overflow) throw Error(internal_error("unexpected overflow at step " + std::to_string(step)));
    trace.losses.push_back(engine.mean_over_ranks(loss_sum / s.accumulation));
    trace.grad_norms.push_back(outcome.grad_norm);
  }
  if (!s.save_dir.empty())
    throw_if_error(save_engine_checkpoint(
        s.save_dir, engine, CheckpointExtras{.iteration = s.steps, .loss_scaler = {}, .lr_scheduler = {}, .data = {}}));
  trace.params = engine.master_params();
  if (auto* sharded = dynamic_cast<ShardedPartitioner*>(&engine.partitioner())) record_stage3_stats(*sharded, s, trace);
  if (s.compare_fp32_master) {
    built.reset();  // its swap files, before the baseline's
    Scenario baseline = s;
    baseline.compare_fp32_master = false;
    baseline.master = "fp32";
    baseline.round_away = true;
    baseline.save_dir.clear();
    const std::string mismatch = compare_exactly(trace, train_with_engine(baseline, comm));
    if (!mismatch.empty())
      throw Error(internal_error("compact master vs fp32 master (ties away), rank " + std::to_string(comm.rank()) +
                                 ":\n" + mismatch));
  }
  return trace;
}

TrainTrace train_one_rank(const Scenario& s) {
  std::unique_ptr<Comm> comm = Comm::single(s.device == "cuda" ? at::Device(at::kCUDA, 0) : at::Device(at::kCPU));
  return train_with_engine(s, *comm);
}

std::string resume_difference(const Scenario& whole, Scenario first, Scenario second, int split,
                              const std::string& checkpoint_dir) {
  TrainTrace tail = train_one_rank(whole);
  first.steps = split;
  first.save_dir = checkpoint_dir;
  train_one_rank(first);
  second.steps = whole.steps;
  second.resume_dir = checkpoint_dir;
  const TrainTrace resumed = train_one_rank(second);
  if (resumed.first_step != split) return "resumed at step " + std::to_string(resumed.first_step);
  tail.losses.erase(tail.losses.begin(), tail.losses.begin() + split);
  tail.grad_norms.erase(tail.grad_norms.begin(), tail.grad_norms.begin() + split);
  return compare_exactly(resumed, tail);
}

TrainTrace train_reference(const Scenario& s) {
  ModelConfig config = test_model_config(s.tied);
  std::unique_ptr<FunctionalModel> model = make_causal_lm(config);
  std::map<std::string, at::Tensor> params = init_parameters(config, kInitSeed, at::kFloat, at::kCPU);
  std::map<std::string, at::Tensor> exp_avg, exp_avg_sq;
  for (auto& [name, p] : params) {
    p.requires_grad_(true);
    exp_avg[name] = at::zeros_like(p);
    exp_avg_sq[name] = at::zeros_like(p);
  }
  const double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  TrainTrace trace;
  for (int step = 0; step < s.steps; ++step) {
    at::Tensor batch = global_batch(s, step);
    at::Tensor logits = forward_full(*model, batch.narrow(1, 0, s.seq_len), params);
    at::Tensor loss =
        at::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}), batch.narrow(1, 1, s.seq_len).reshape(-1));
    trace.losses.push_back(loss.item<double>());
    std::vector<at::Tensor> leaves;
    for (auto& [name, p] : params) leaves.push_back(p);
    std::vector<at::Tensor> grads = torch::autograd::grad({loss}, leaves);
    double sq = 0.0;
    for (const at::Tensor& g : grads) sq += g.to(at::kDouble).pow(2).sum().item<double>();
    double clip_ratio = s.clip > 0.0 ? (std::sqrt(sq) + 1e-6) / s.clip : 0.0;
    at::NoGradGuard no_grad;
    const int t = step + 1;
    const double bc1 = 1.0 - std::pow(beta1, t), bc2 = 1.0 - std::pow(beta2, t);
    size_t i = 0;
    for (auto& [name, p] : params) {
      at::Tensor g = grads[i++];
      if (clip_ratio > 1.0) g = g / clip_ratio;
      exp_avg[name].lerp_(g, 1.0 - beta1);
      exp_avg_sq[name].mul_(beta2).addcmul_(g, g, 1.0 - beta2);
      p.mul_(1.0 - kLr * kWeightDecay);
      at::Tensor denom = (exp_avg_sq[name].sqrt() / std::sqrt(bc2)).add_(eps);
      p.addcdiv_(exp_avg[name], denom, -kLr / bc1);
    }
  }
  for (auto& [name, p] : params) trace.params[name] = p.detach().clone();
  return trace;
}

std::string compare_exactly(const TrainTrace& got, const TrainTrace& want) {
  std::ostringstream out;
  if (got.losses.size() != want.losses.size()) return "step counts differ";
  for (size_t i = 0; i < got.losses.size(); ++i)
    if (got.losses[i] != want.losses[i])
      out << "step " << i << ": loss " << got.losses[i] << " vs " << want.losses[i] << "\n";
  if (got.grad_norms.size() != want.grad_norms.size()) return "gradient norm counts differ";
  for (size_t i = 0; i < got.grad_norms.size(); ++i)
    if (got.grad_norms[i] != want.grad_norms[i])
      out << "step " << i << ": gradient norm " << std::hexfloat << got.grad_norms[i] << " vs " << want.grad_norms[i]
          << std::defaultfloat << "\n";
  for (const auto& [name, want_param] : want.params) {
    auto it = got.params.find(name);
    if (it == got.params.end() || !it->second.equal(want_param)) out << name << " differs\n";
  }
  return out.str();
}

std::string compare_traces(const TrainTrace& got, const TrainTrace& want, double loss_rtol, double param_atol) {
  std::ostringstream out;
  if (got.first_step + got.losses.size() != want.first_step + want.losses.size()) return "last steps differ";
  for (size_t i = 0; i < got.losses.size(); ++i) {
    int step = got.first_step + static_cast<int>(i);
    if (step < want.first_step) continue;
    double reference = want.losses[step - want.first_step];
    if (!(std::abs(got.losses[i] - reference) <= loss_rtol * std::abs(reference)))
      out << "step " << step << ": loss " << got.losses[i] << " vs reference " << reference << "\n";
  }
  for (const auto& [name, want_param] : want.params) {
    auto it = got.params.find(name);
    if (it == got.params.end()) {
      out << name << " missing\n";
      continue;
    }
    double diff = (it->second.to(at::kDouble) - want_param.to(at::kDouble)).abs().max().item<double>();
    if (!(diff <= param_atol)) out << name << ": max |diff| " << diff << " > " << param_atol << "\n";
  }
  return out.str();
}

void OneCpuThread::SetUp() { at::set_num_threads(1); }

}  // namespace tierzero::engine::testing
