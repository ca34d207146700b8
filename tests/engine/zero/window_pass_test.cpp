// The window pass (window_pass.h): a stage-3 offloaded window runs unit by unit both ways, so each
// parameter is gathered twice a step whatever the accumulation, and the run equals the micro-batch-
// major path (overlap off) bit for bit when no weight is tied. With the optimizer on the device and
// the parameters offloaded the window runs too (nothing follows the step), equal bit for bit to the
// same run with the parameters on the device (micro-batch by micro-batch). With groups
// (tierzero.window_group) the body units take several micro-batches at once: the same sums in
// another fp32 order. Kept layers (tierzero.kept_activations) are not recomputed: the same bits.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/engine/zero/scenario.h"

namespace tierzero::engine::testing {
namespace {

constexpr const char* kLayer0Weight = "model.layers.0.mlp.down_proj.weight";

Scenario window_scenario(int accumulation) {
  Scenario s;
  s.stage = 3;
  s.offload = true;
  s.dtype = "bf16";
  s.accumulation = accumulation;
  s.steps = 6;
  s.clip = 0.5;
  s.prefetch_numel = 0;      // every gather is a fetch's: the counts follow the pass alone
  s.max_reuse_distance = 0;  // nothing kept gathered between uses
  return s;
}

TEST(WindowPass, GathersEachParameterTwiceAStepWhateverTheAccumulation) {
  for (int accumulation : {2, 4}) {
    const TrainTrace window = train_one_rank(window_scenario(accumulation));
    // The first step records the order (the trace), then every step fetches each layer once for the
    // window's forwards and once for its backwards.
    EXPECT_EQ(window.gathers.at(kLayer0Weight), 2 * window_scenario(accumulation).steps) << accumulation;
    Scenario plain = window_scenario(accumulation);
    plain.overlap = false;  // micro-batch by micro-batch: a forward and a backward gather per micro-batch
    const TrainTrace micro_major = train_one_rank(plain);
    EXPECT_EQ(micro_major.gathers.at(kLayer0Weight), 2 * accumulation * plain.steps) << accumulation;
    // A tied weight's two uses are summed per unit here, per micro-batch there: the same up to the
    // order of fp32 additions (the untied test below is exact).
    EXPECT_EQ(compare_traces(window, micro_major, 1e-5, 1e-6), "") << accumulation;
  }
}

TEST(WindowPass, UntiedModelEqualsMicroBatchPathBitForBit) {
  Scenario s = window_scenario(3);
  s.tied = false;
  s.prefetch_numel = Scenario().prefetch_numel;
  s.max_reuse_distance = Scenario().max_reuse_distance;
  const TrainTrace window = train_one_rank(s);
  s.overlap = false;
  EXPECT_EQ(compare_exactly(window, train_one_rank(s)), "");
}

TEST(WindowPass, RunsWithTheOptimizerOnTheDeviceWhenTheParametersAreOffloaded) {
  Scenario s = window_scenario(3);
  s.offload = false;  // the optimizer on the device: no step follows into the forward
  s.offload_params = true;
  s.tied = false;
  const TrainTrace window = train_one_rank(s);
  EXPECT_EQ(window.gathers.at(kLayer0Weight), 2 * s.steps) << "one gather for the forwards, one for the backwards";
  s.offload_params = false;  // the parameters on the device: micro-batch by micro-batch
  const TrainTrace micro_major = train_one_rank(s);
  EXPECT_EQ(micro_major.gathers.at(kLayer0Weight), 2 * 3 * s.steps);
  EXPECT_EQ(compare_exactly(window, micro_major), "");
}

TEST(WindowPass, GroupsOfMicroBatchesGiveTheSameStepsUpToFp32Rounding) {
  Scenario s = window_scenario(4);
  s.tied = false;
  s.dtype = "fp32";  // no 16-bit rounding of the gradients: the sums differ in fp32 order alone
  const TrainTrace one = train_one_rank(s);
  for (int64_t group : {2, 4}) {
    s.window_group = group;
    const TrainTrace grouped = train_one_rank(s);
    EXPECT_EQ(grouped.gathers.at(kLayer0Weight), 2 * s.steps) << group;
    // Adam divides by the root of v, so a near-zero gradient's fp32 rounding moves a weight by up to a
    // few 1e-6 over the 6 steps (lr 1e-2).
    EXPECT_EQ(compare_traces(grouped, one, 1e-5, 1e-5), "") << group;
    // The groups ran: a group's weight gradient is summed inside its matrix product, in another
    // order than the micro-batches' fp32 additions, so the bits differ.
    EXPECT_NE(compare_exactly(grouped, one), "") << group;
  }
}

TEST(WindowPass, KeptLayersAreGatheredOnceAStepAndGiveTheSameBits) {
  Scenario s = window_scenario(4);
  s.tied = false;
  const TrainTrace recomputed = train_one_rank(s);
  for (int64_t group : {1, 2}) {
    s.window_group = group;
    const TrainTrace reference = group == 1 ? recomputed : train_one_rank(s);
    // Alone: the last layer, then more than the model has (both); in groups: both layers.
    for (int64_t kept : group == 1 ? std::vector<int64_t>{1, 5} : std::vector<int64_t>{2}) {
      s.kept_layers = kept;
      const TrainTrace run = train_one_rank(s);
      // Layer 0 is kept from 2 on: its graph serves the backward, which fetches it no more.
      EXPECT_EQ(run.gathers.at(kLayer0Weight), (kept >= 2 ? 1 : 2) * s.steps) << group << " " << kept;
      // The backward differentiates the forward's own graph: the operations a recomputation would run.
      EXPECT_EQ(compare_exactly(run, reference), "") << group << " " << kept;
    }
    s.kept_layers = 0;
  }
}

TEST(WindowPass, AGroupThatDoesNotDivideTheMicroBatchesRunsThemOneAtATime) {
  Scenario s = window_scenario(3);
  s.tied = false;
  const TrainTrace one = train_one_rank(s);
  s.window_group = 2;  // 3 micro-batches: no whole groups of 2 (the config refuses this before a run)
  EXPECT_EQ(compare_exactly(train_one_rank(s), one), "");
}

}  // namespace
}  // namespace tierzero::engine::testing
