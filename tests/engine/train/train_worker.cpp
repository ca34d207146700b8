// One rank of a multi-rank trainer test (periodic_save_test.cpp starts them under torchrun's
// environment: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT): runs engine::train() with the flags
// given and, on rank 0, writes each step's loss (%.17g, one per line) to --losses FILE and each
// evaluation's loss to --evals FILE.
//   train_worker --config F --steps N [--save D] [--save-every N] [--keep-last K] [--resume D]
//                [--eval-data F --eval-every N] [--losses FILE] [--evals FILE]
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "engine/train/trainer.h"

int main(int argc, char** argv) {
  tierzero::engine::TrainArgs args;
  std::string losses_path, evals_path;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--config")
      args.config_path = value;
    else if (flag == "--steps")
      args.steps = std::atoll(value.c_str());
    else if (flag == "--save")
      args.save_dir = value;
    else if (flag == "--save-every")
      args.save_every = std::atoll(value.c_str());
    else if (flag == "--keep-last")
      args.keep_last = std::atoll(value.c_str());
    else if (flag == "--resume")
      args.resume_dir = value;
    else if (flag == "--eval-data")
      args.eval_data_path = value;
    else if (flag == "--eval-every")
      args.eval_every = std::atoll(value.c_str());
    else if (flag == "--losses")
      losses_path = value;
    else if (flag == "--evals")
      evals_path = value;
    else {
      std::fprintf(stderr, "train_worker: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  tierzero::Result<tierzero::engine::TrainSummary> summary = tierzero::engine::train(args, stdout);
  if (!summary.ok()) {
    std::fprintf(stderr, "train_worker: %s\n", summary.status().to_string().c_str());
    return 1;
  }
  const char* rank = std::getenv("RANK");
  if (rank != nullptr && std::atoi(rank) != 0) return 0;
  std::vector<double> evals;
  for (const tierzero::engine::EvalPoint& e : summary->evals) evals.push_back(e.loss);
  for (const auto& [path, values] : {std::pair{losses_path, summary->losses}, std::pair{evals_path, evals}}) {
    if (path.empty()) continue;
    std::FILE* out = std::fopen(path.c_str(), "w");
    if (out == nullptr) return 1;
    for (double v : values) std::fprintf(out, "%.17g\n", v);
    std::fclose(out);
  }
  return 0;
}
