// One rank of a multi-rank engine test (launched by rank_launcher.h): trains the scenario given on
// the command line with the engine over a Gloo/NCCL group that meets in a FileStore, trains the
// single-process reference too, and exits 0 when both agree (1 with the mismatch on stderr).
// Rank r uses CUDA device r mod the device count. Environment: RANK, WORLD_SIZE, TIERZERO_TEST_STORE
// (the FileStore path), TIERZERO_TEST_LOSS_RTOL and TIERZERO_TEST_PARAM_ATOL.
#include <ATen/Context.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/csrc/distributed/c10d/FileStore.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "scenario.h"

using tierzero::engine::Comm;
using tierzero::engine::testing::Scenario;

int main(int argc, char** argv) {
  try {
    Scenario scenario = Scenario::from_args(std::vector<std::string>(argv + 1, argv + argc));
    int rank = std::atoi(std::getenv("RANK"));
    auto store = c10::make_intrusive<c10d::FileStore>(std::getenv("TIERZERO_TEST_STORE"), scenario.world_size);
    at::Device device(at::kCPU);
    if (scenario.device == "cuda") {  // one GPU per rank, as under torchrun: NCCL refuses a shared GPU
      device = at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(rank % static_cast<int>(at::getNumGPUs())));
      c10::impl::getDeviceGuardImpl(at::kCUDA)->setDevice(device);
    }
    std::unique_ptr<Comm> comm = tierzero::value_or_throw(Comm::create(store, rank, scenario.world_size, device));
    auto got = tierzero::engine::testing::train_with_engine(scenario, *comm);
    std::string mismatch;
    if (scenario.compare_overlap || scenario.compare_streamed || scenario.compare_nvme ||
        scenario.compare_accumulator) {
      Scenario plain = scenario;
      if (scenario.compare_accumulator) plain.grad_accumulator = "host";
      if (scenario.compare_nvme) {
        plain.nvme_dir.clear();
        plain.nvme_params_dir.clear();
      }
      plain.overlap = plain.overlap && !scenario.compare_overlap;
      plain.streamed = plain.streamed && !scenario.compare_streamed;
      mismatch =
          tierzero::engine::testing::compare_exactly(got, tierzero::engine::testing::train_with_engine(plain, *comm));
    } else {
      auto want = tierzero::engine::testing::train_reference(scenario);
      mismatch = tierzero::engine::testing::compare_traces(got, want, std::atof(std::getenv("TIERZERO_TEST_LOSS_RTOL")),
                                                           std::atof(std::getenv("TIERZERO_TEST_PARAM_ATOL")));
    }
    comm->barrier();
    if (!mismatch.empty()) {
      std::fprintf(stderr, "rank %d, %s:\n%s", rank, scenario.name().c_str(), mismatch.c_str());
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "worker failed: %s\n", e.what());
    return 2;
  }
}
