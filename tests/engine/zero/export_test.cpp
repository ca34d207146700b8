// The 16-bit export (export_16bit.h) and config.json in engine checkpoints: two ranks (Gloo, one
// thread each; or one rank) train 2 steps at stages 0, 2 and 3, export, and the exported directory — read back
// with the engine's own Hugging Face loader — holds exactly the fp32 master weights rounded to the
// training dtype; transformers loads it where it is installed. A saved checkpoint converts
// (checkpoint/convert/consolidate.h) to a directory whose config.json is the model's. And to_hf_json
// round-trips through the config parser.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <fstream>
#include <nlohmann/json.hpp>

#include "checkpoint/convert/consolidate.h"
#include "checkpoint/engine_format/engine_checkpoint.h"
#include "engine/model/functional_model.h"
#include "engine/zero/zero_engine.h"
#include "rank_launcher.h"
#include "scenario.h"
#include "thread_ranks.h"
#include "tests/support/python.h"
#include "tests/support/status_matchers.h"

namespace tierzero::engine {
namespace {

using testing::make_temp_dir;
using testing::remove_tree;
using testing::run_thread_ranks;
using testing::test_model_config;

// ---- to_hf_json ---------------------------------------------------------------------------------

void expect_round_trip(const ModelConfig& config) {
  Result<ModelConfig> parsed = parse_model_config(to_hf_json(config), "to_hf_json");
  ASSERT_OK(parsed) << "\n" << to_hf_json(config);
  EXPECT_TRUE(parsed.value() == config) << to_hf_json(config);
}

TEST(ModelConfigJson, RoundTripsTheBuiltInConfig) { expect_round_trip(tiny_llama_config()); }

TEST(ModelConfigJson, RoundTripsParsedConfigsOfEveryFamily) {
  const char* const configs[] = {
      // Llama with biases, llama3 rope, a pad token, bf16.
      R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 100, "hidden_size": 64,
          "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
          "attention_bias": true, "mlp_bias": true, "pad_token_id": 3, "torch_dtype": "bfloat16",
          "rms_norm_eps": 1e-05, "tie_word_embeddings": true,
          "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                           "original_max_position_embeddings": 32}, "rope_theta": 500000.0})",
      // Qwen2 with the sliding window on its upper layers, transformers 5 keys.
      R"({"model_type": "qwen2", "vocab_size": 100, "hidden_size": 64, "intermediate_size": 96,
          "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 1, "use_sliding_window": true,
          "sliding_window": 16, "max_window_layers": 1, "dtype": "float16",
          "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0}})",
      // Qwen2 without the window; Mistral with and without it; dynamic rope.
      R"({"model_type": "qwen2", "vocab_size": 10, "hidden_size": 8, "intermediate_size": 8,
          "num_hidden_layers": 1, "num_attention_heads": 2, "use_sliding_window": false})",
      R"({"model_type": "mistral", "vocab_size": 10, "hidden_size": 8, "intermediate_size": 8,
          "num_hidden_layers": 2, "num_attention_heads": 2, "sliding_window": 7,
          "rope_scaling": {"type": "dynamic", "factor": 2.0}})",
      R"({"model_type": "mistral", "vocab_size": 10, "hidden_size": 8, "intermediate_size": 8,
          "num_hidden_layers": 2, "num_attention_heads": 2, "sliding_window": null, "head_dim": 8})",
  };
  for (const char* text : configs) {
    Result<ModelConfig> config = parse_model_config(text, "fixture");
    ASSERT_OK(config);
    expect_round_trip(config.value());
  }
}

// ---- Two ranks ----------------------------------------------------------------------------------

::testing::Environment* const kOneCpuThread = ::testing::AddGlobalTestEnvironment(new testing::OneCpuThread);

// The engine tests' model (scenario.h) as a `family` ("llama" | "qwen2") model.
ModelConfig small_config(const std::string& family, bool tied) {
  ModelConfig c = test_model_config(tied);
  c.model_type = family;
  c.architecture = family == "qwen2" ? "Qwen2ForCausalLM" : "LlamaForCausalLM";
  c.qkv_bias = family == "qwen2";
  return c;
}

// An engine over `comm` trained 2 steps on random tokens (different per rank); `offload`: the
// optimizer on the CPU (cpu_adam).
std::unique_ptr<ZeroEngine> train_two_steps(const FunctionalModel& model, int stage, at::ScalarType dtype, Comm& comm,
                                            bool offload = false) {
  ZeroEngineOptions options;
  options.offload_optimizer = offload;
  options.cpu_threads = 1;
  options.partition.stage = stage;
  options.partition.compute_dtype = dtype;
  options.partition.reduce_bucket_numel = 1000;
  options.partition.persistence_threshold = 64;
  auto engine =
      std::make_unique<ZeroEngine>(model, init_parameters(model.config(), 7, at::kFloat, at::kCPU), options, comm);
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(100 + comm.rank());
  for (int step = 0; step < 2; ++step) {
    at::Tensor tokens = at::randint(model.config().vocab_size, {2, 9}, generator, at::kLong);
    engine->forward_backward(tokens.narrow(1, 0, 8), tokens.narrow(1, 1, 8), 1.0);
    EXPECT_FALSE(engine->step(1e-2, 1.0).overflow);
  }
  return engine;
}

// The config.json text of `model` plus a key tierzero does not model, which exports must keep.
std::string config_text(const FunctionalModel& model) {
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(to_hf_json(model.config()));
  j["eos_token_id"] = 2;
  return j.dump(2);
}

// Every parameter of `model` in `dir` (loaded by the engine's HF loader, keeping the file's dtype)
// equals `master` rounded to `dtype`, bit for bit; a tied model has no lm_head.weight; config.json
// is config_text's with the export's torch_dtype.
void expect_exported(const std::string& dir, const FunctionalModel& model,
                     const std::map<std::string, at::Tensor>& master, at::ScalarType dtype) {
  std::map<std::string, at::Tensor> loaded = value_or_throw(load_hf_weights(dir, dtype, at::kCPU));
  const std::vector<ParamSpec> params = all_params(model);
  EXPECT_EQ(loaded.size(), params.size());
  for (const ParamSpec& spec : params) {
    ASSERT_TRUE(loaded.count(spec.name)) << spec.name << " missing from " << dir;
    EXPECT_TRUE(at::equal(loaded[spec.name], master.at(spec.name).to(dtype))) << spec.name;
  }
  if (model.config().tie_word_embeddings) {
    EXPECT_FALSE(loaded.count("lm_head.weight"));
  }
  ModelConfig want = model.config();
  want.torch_dtype = dtype == at::kBFloat16 ? "bfloat16" : dtype == at::kHalf ? "float16" : "float32";
  EXPECT_TRUE(value_or_throw(load_model_config(dir)) == want);
  EXPECT_EQ(nlohmann::json::parse(value_or_throw(read_model_config_text(dir))).value("eos_token_id", 0), 2);
}

// Loads `dirs` with transformers (load_with_transformers.py, one interpreter for all: importing
// transformers takes most of the time); skips when it is not installed.
void expect_transformers_loads(const std::vector<std::string>& dirs, const std::string& log) {
  const test_support::PythonRun run = test_support::run_python(TIERZERO_LOAD_WITH_TRANSFORMERS, dirs, log);
  if (run.exit_code == test_support::kPythonSkip || run.exit_code == test_support::kPythonMissing) {
    GTEST_SKIP() << "transformers check skipped: " << run.output;
  }
  EXPECT_EQ(run.exit_code, 0) << TIERZERO_LOAD_WITH_TRANSFORMERS << "\n" << run.output;
}

struct ExportCase {
  int stage;
  std::string family;
  bool tied;
  at::ScalarType dtype;
  uint64_t read_piece_bytes;  // Export16bitOptions::read_piece_bytes
};

// Stage 3 (sharded parameters) tied Qwen2 in bf16, stage 2 (flat partitions) untied Llama in fp16
// -- both moved to rank 0 in 16-float ranges, which cross the ranks' partition ends (Qwen2's
// 16-element k/v biases are 8 per rank) -- and stage 0 (every rank holds all; rank 0 writes
// alone) in fp32: every export is read back by the engine, then all of them by transformers.
TEST(ZeroExport, WritesMasterWeightsRoundedToTheTrainingDtype) {
  const std::string tmp = make_temp_dir();
  std::vector<std::string> dirs;
  for (const ExportCase& c :
       {ExportCase{3, "qwen2", true, at::kBFloat16, 64}, ExportCase{2, "llama", false, at::kHalf, 64},
        ExportCase{0, "llama", true, at::kFloat, 256 << 20}}) {
    SCOPED_TRACE("stage " + std::to_string(c.stage));
    const std::string out = tmp + "/stage" + std::to_string(c.stage);
    const std::unique_ptr<FunctionalModel> model = make_causal_lm(small_config(c.family, c.tied));
    std::map<std::string, at::Tensor> master;
    run_thread_ranks(2, [&](Comm& comm) {
      std::unique_ptr<ZeroEngine> engine = train_two_steps(*model, c.stage, c.dtype, comm);
      // 16 KB shards: the model (~35 KB in 2 bytes) spreads over several files and an index.
      throw_if_error(export_16bit_model(*engine, config_text(*model), out,
                                        {.max_shard_bytes = 16 << 10, .read_piece_bytes = c.read_piece_bytes}));
      std::map<std::string, at::Tensor> params = engine->master_params();
      if (comm.rank() == 0) master = std::move(params);
    });
    EXPECT_EQ(::access((out + "/model.safetensors.index.json").c_str(), F_OK), 0);
    expect_exported(out, *model, master, c.dtype);
    dirs.push_back(out);
  }
  expect_transformers_loads(dirs, tmp + "/transformers.log");
  remove_tree(tmp);
}

TEST(ZeroExport, ExportingIntoANonEmptyDirectoryFailsOnEveryRank) {
  const std::string tmp = make_temp_dir();
  std::ofstream(tmp + "/keep.txt") << "not a model";
  EXPECT_ERROR(check_export_dir(tmp), ErrorCode::kInvalidArgument, "not an empty directory");
  EXPECT_OK(check_export_dir(tmp + "/new"));
  const std::unique_ptr<FunctionalModel> model = make_causal_lm(small_config("llama", true));
  Status status[2];
  run_thread_ranks(2, [&](Comm& comm) {
    std::unique_ptr<ZeroEngine> engine = train_two_steps(*model, 3, at::kFloat, comm);
    status[comm.rank()] = export_16bit_model(*engine, config_text(*model), tmp);
  });
  EXPECT_ERROR(status[0], ErrorCode::kInvalidArgument, "not an empty directory");
  EXPECT_ERROR(status[1], ErrorCode::kInternal, "failed on another rank");
  remove_tree(tmp);
}

// One rank, optimizer offloaded (master weights in host memory): the export reads them in place.
TEST(ZeroExport, OneRankWithTheOptimizerOffloaded) {
  const std::string tmp = make_temp_dir(), out = tmp + "/model";
  const std::unique_ptr<FunctionalModel> model = make_causal_lm(small_config("qwen2", false));
  std::unique_ptr<Comm> comm = Comm::single(at::kCPU);
  std::unique_ptr<ZeroEngine> engine = train_two_steps(*model, 2, at::kBFloat16, *comm, /*offload=*/true);
  throw_if_error(export_16bit_model(*engine, config_text(*model), out, {.read_piece_bytes = 64}));
  expect_exported(out, *model, engine->master_params(), at::kBFloat16);
  remove_tree(tmp);
}

// Rank 0's write fails (the file size limit) while rank 1 serves it ranges -- with one 64-byte
// piece read ahead, rank 0's reader is stopped midway through the weights: both ranks return the
// error, neither waits forever, and no output directory is left.
TEST(ZeroExport, AWriteFailingMidwayFailsOnEveryRankWithoutHanging) {
  const std::string tmp = make_temp_dir(), out = tmp + "/model";
  const std::unique_ptr<FunctionalModel> model = make_causal_lm(small_config("llama", true));
  Status status[2];
  run_thread_ranks(2, [&](Comm& comm) {
    std::unique_ptr<ZeroEngine> engine = train_two_steps(*model, 3, at::kFloat, comm);
    comm.barrier();
    rlimit saved{};
    if (comm.rank() == 0) {  // the limit is per process: both ranks' threads see it from here on
      ::signal(SIGXFSZ, SIG_IGN);
      ::getrlimit(RLIMIT_FSIZE, &saved);
      rlimit small = saved;
      small.rlim_cur = 8 << 10;
      ::setrlimit(RLIMIT_FSIZE, &small);
    }
    status[comm.rank()] =
        export_16bit_model(*engine, config_text(*model), out, {.read_ahead_bytes = 64, .read_piece_bytes = 64});
    if (comm.rank() == 0) {
      ::setrlimit(RLIMIT_FSIZE, &saved);
      ::signal(SIGXFSZ, SIG_DFL);
    }
  });
  EXPECT_ERROR(status[0], ErrorCode::kIo, out);
  EXPECT_ERROR(status[1], ErrorCode::kInternal, "failed on another rank");
  EXPECT_NE(::access(out.c_str(), F_OK), 0);
  EXPECT_NE(::access((out + ".partial").c_str(), F_OK), 0);
  remove_tree(tmp);
}

// A saved checkpoint carries the model's config.json: convert writes it, and the 16-bit model that
// stage3_gather_16bit_weights_on_model_save adds sits beside `latest`, loadable from the save dir.
TEST(ZeroCheckpointConfig, ConvertWritesTheModelsConfigAndSavedModelLoads) {
  const std::string tmp = make_temp_dir(), save = tmp + "/ckpt", converted = tmp + "/converted";
  const std::unique_ptr<FunctionalModel> model = make_causal_lm(small_config("qwen2", true));
  std::map<std::string, at::Tensor> master;
  run_thread_ranks(2, [&](Comm& comm) {
    std::unique_ptr<ZeroEngine> engine = train_two_steps(*model, 3, at::kBFloat16, comm);
    CheckpointExtras extras;
    extras.iteration = 2;
    extras.model_config_json = to_hf_json(model->config());
    throw_if_error(save_engine_checkpoint(save, *engine, extras));
    throw_if_error(save_16bit_model(*engine, config_text(*model), save));
    std::map<std::string, at::Tensor> params = engine->master_params();
    if (comm.rank() == 0) master = std::move(params);
  });

  auto source = value_or_throw(checkpoint::open_engine_checkpoint_source(save));
  checkpoint::ConvertOptions options;
  options.progress = false;
  value_or_throw(checkpoint::consolidate_to_safetensors(*source, converted, options));
  ModelConfig want = model->config();
  want.torch_dtype = "bfloat16";  // convert's default output dtype, which config.json now names
  EXPECT_TRUE(value_or_throw(load_model_config(converted)) == want);

  expect_exported(save, *model, master, at::kBFloat16);
  EXPECT_TRUE(checkpoint::is_engine_checkpoint(save));
  remove_tree(tmp);
}

}  // namespace
}  // namespace tierzero::engine
