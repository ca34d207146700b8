// A random forward (LoRA dropout) through the engine's recomputing units (rng_replay.h): each unit's
// recomputation in the backward replays the masks its forward drew, so the adapters' gradients equal
// those of plain autograd over the same forward (one graph, masks drawn once, nothing recomputed)
// from the same generator state. Both paths: a unit at a time (run_unit) and the window pass
// (unit-major over the micro-batches). In double, on the CPU and, where there is one, on a CUDA device.
// The window's groups (window_pass.h) run here too: without dropout, each group's gradients are the
// reference's sum.
#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <map>
#include <mutex>
#include <memory>
#include <string>
#include <vector>

#include "engine/model/functional_model.h"
#include "engine/zero/internal/param_gateway.h"
#include "engine/zero/internal/rng_replay.h"
#include "engine/zero/internal/unit_function.h"
#include "engine/zero/internal/window_pass.h"
#include "tests/engine/zero/scenario.h"
#include "tests/support/status_matchers.h"

namespace tierzero::engine::testing {
namespace {

constexpr int64_t kBatch = 2;
constexpr int64_t kSeq = 12;
constexpr double kDropout = 0.3;

// The adapters as one gateway: fetch hands out the unit's tensors, reduce_grads sums what arrives.
class AdapterGateway : public ParamGateway {
 public:
  explicit AdapterGateway(std::vector<std::vector<at::Tensor>> units) : units_(std::move(units)), grads_(units_.size()) {}
  std::vector<at::Tensor> fetch(size_t unit) override { return units_.at(unit); }
  void release(size_t) override {}
  void reduce_grads(size_t unit, std::vector<at::Tensor> grads) override {
    std::vector<at::Tensor>& sums = grads_.at(unit);
    sums.resize(grads.size());
    for (size_t j = 0; j < grads.size(); ++j) {
      if (!grads[j].defined()) continue;
      sums[j] = sums[j].defined() ? sums[j] + grads[j].to(at::kDouble) : grads[j].to(at::kDouble);
    }
  }
  const std::vector<std::vector<at::Tensor>>& grads() const { return grads_; }

 private:
  std::vector<std::vector<at::Tensor>> units_;
  std::vector<std::vector<at::Tensor>> grads_;
};

// Seeds `device`'s default generator (what the trainer does before each step of a random forward).
void seed_device_generator(at::Device device, uint64_t seed) {
  at::Generator generator = at::globalContext().defaultGenerator(device);
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_current_seed(seed);
}

struct LoraFixture {
  std::unique_ptr<LoraModel> model;
  std::vector<std::vector<at::Tensor>> adapters;  // per unit, unit_params order; B not zero
  std::vector<at::Tensor> ids, targets;           // per micro-batch
};

LoraFixture make_fixture(double dropout, at::Device device, int micro_batches) {
  const ModelConfig config = test_model_config(/*tied=*/false);
  LoraSpec spec;
  spec.r = 4;
  spec.lora_alpha = 8.0;
  spec.target_pattern = "all-linear";
  spec.dropout = dropout;
  std::unique_ptr<ParamSource> base = random_init_params(config, 11);
  auto created = LoraModel::create(make_causal_lm(config), spec, *base, at::kDouble, device, FrozenHome::kDevice);
  EXPECT_OK(created);
  LoraFixture f;
  f.model = std::move(created).value();
  at::manual_seed(5);
  for (size_t u = 0; u < f.model->num_units(); ++u) {
    f.adapters.emplace_back();
    for (const ParamSpec& p : f.model->unit_params(u))
      f.adapters.back().push_back((at::randn(p.shape, at::kDouble) * 0.2).to(device));
  }
  for (int i = 0; i < micro_batches; ++i) {
    f.ids.push_back(at::randint(config.vocab_size, {kBatch, kSeq}, at::kLong).to(device));
    f.targets.push_back(at::randint(config.vocab_size, {kBatch, kSeq}, at::kLong).to(device));
  }
  return f;
}

at::Tensor loss_of(const at::Tensor& logits, const at::Tensor& targets) {
  return at::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}), targets.reshape(-1));
}

// Plain autograd over one graph: every unit's forward on every micro-batch in `unit_major` order or
// micro-batch by micro-batch, masks drawn once; the gradients of the summed losses.
std::vector<std::vector<at::Tensor>> reference_grads(const LoraFixture& f, bool unit_major) {
  std::vector<std::vector<at::Tensor>> leaves;
  for (const std::vector<at::Tensor>& unit : f.adapters) {
    leaves.emplace_back();
    for (const at::Tensor& a : unit) leaves.back().push_back(a.detach().requires_grad_(true));
  }
  const size_t batches = f.ids.size(), units = f.model->num_units();
  std::vector<at::Tensor> hidden = f.ids;
  at::Tensor total;
  auto run = [&](size_t u, size_t i) { hidden[i] = f.model->forward_unit(u, hidden[i], leaves[u]); };
  if (unit_major) {
    for (size_t u = 0; u < units; ++u)
      for (size_t i = 0; i < batches; ++i) run(u, i);
  } else {
    for (size_t i = 0; i < batches; ++i)
      for (size_t u = 0; u < units; ++u) run(u, i);
  }
  for (size_t i = 0; i < batches; ++i) {
    const at::Tensor loss = loss_of(hidden[i], f.targets[i]);
    total = total.defined() ? total + loss : loss;
  }
  total.backward();
  std::vector<std::vector<at::Tensor>> grads;
  for (const std::vector<at::Tensor>& unit : leaves) {
    grads.emplace_back();
    for (const at::Tensor& l : unit) grads.back().push_back(l.grad());
  }
  return grads;
}

// The engine's unit-at-a-time path: run_unit per unit, micro-batch by micro-batch, backward each.
std::vector<std::vector<at::Tensor>> run_unit_grads(const LoraFixture& f) {
  AdapterGateway gateway(f.adapters);
  const at::Tensor anchor = at::zeros({}, at::TensorOptions().dtype(at::kDouble)).requires_grad_(true);
  for (size_t i = 0; i < f.ids.size(); ++i) {
    at::Tensor hidden = f.ids[i];
    for (size_t u = 0; u < f.model->num_units(); ++u) hidden = run_unit(*f.model, gateway, u, hidden, anchor);
    loss_of(hidden, f.targets[i]).backward();
  }
  return gateway.grads();
}

std::vector<std::vector<at::Tensor>> window_grads(const LoraFixture& f) {
  AdapterGateway gateway(f.adapters);
  run_window_pass(*f.model, gateway, f.ids, f.targets, 1.0, WindowPassHooks{});
  return gateway.grads();
}

// The largest |a - b| over every adapter gradient, relative to the largest |b|.
double relative_difference(const std::vector<std::vector<at::Tensor>>& a, const std::vector<std::vector<at::Tensor>>& b) {
  double diff = 0.0, scale = 0.0;
  for (size_t u = 0; u < b.size(); ++u)
    for (size_t j = 0; j < b[u].size(); ++j) {
      diff = std::max(diff, (a.at(u).at(j).cpu() - b[u][j].cpu()).abs().max().item<double>());
      scale = std::max(scale, b[u][j].abs().max().item<double>());
    }
  return diff / scale;
}

std::vector<at::Device> devices() {
  std::vector<at::Device> out{at::kCPU};
  if (at::hasCUDA()) out.emplace_back(at::kCUDA, 0);
  return out;
}

// Runs `path` and the reference from the same state of `device`'s generator.
template <typename Path>
double difference_from_reference(const LoraFixture& f, at::Device device, Path path, bool unit_major) {
  seed_device_generator(device, 77);
  const std::vector<std::vector<at::Tensor>> engine = path(f);
  seed_device_generator(device, 77);
  return relative_difference(engine, reference_grads(f, unit_major));
}

TEST(RngReplay, EachUnitsRecomputationReplaysItsForwardsDropoutMasks) {
  for (const at::Device device : devices()) {
    const LoraFixture f = make_fixture(kDropout, device, 2);
    EXPECT_LT(difference_from_reference(f, device, run_unit_grads, /*unit_major=*/false), 1e-12) << device;
    // The window sums each unit's micro-batch gradients in fp32 (window_pass.h): fp32 rounding, where
    // another mask moves the gradients by more than 1e-3 (the next test).
    EXPECT_LT(difference_from_reference(f, device, window_grads, /*unit_major=*/true), 1e-6) << device;
  }
}

// `inner` whose forward_unit records each unit's batch rows (input.size(0)), in call order.
class RowsSeen : public FunctionalModel {
 public:
  explicit RowsSeen(const FunctionalModel& inner) : inner_(inner) {}
  size_t num_units() const override { return inner_.num_units(); }
  const std::vector<ParamSpec>& unit_params(size_t u) const override { return inner_.unit_params(u); }
  at::Tensor forward_unit_with(size_t u, const at::Tensor& input, at::TensorList params,
                               const Projector& projector) const override {
    rows[u].push_back(input.size(0));
    return inner_.forward_unit_with(u, input, params, projector);
  }
  const ModelConfig& config() const override { return inner_.config(); }
  bool forward_is_random() const override { return inner_.forward_is_random(); }
  mutable std::map<size_t, std::vector<int64_t>> rows;

 private:
  const FunctionalModel& inner_;
};

TEST(WindowGroup, BodyUnitsRunEachGroupAsOneBatchAndSumItsGradients) {
  for (const at::Device device : devices()) {
    const LoraFixture f = make_fixture(0.0, device, 4);
    for (int64_t group : {1, 2, 4}) {
      RowsSeen model(*f.model);
      AdapterGateway gateway(f.adapters);
      run_window_pass(model, gateway, f.ids, f.targets, 1.0, WindowPassHooks{}, {.group = group});
      const size_t head = model.num_units() - 1;
      // Body units: 4 / group forwards and as many recomputations, each of group micro-batches' rows;
      // the head: one recomputation per micro-batch.
      EXPECT_EQ(model.rows.at(1), std::vector<int64_t>(2 * 4 / group, kBatch * group)) << device << group;
      EXPECT_EQ(model.rows.at(head - 1), std::vector<int64_t>(2 * 4 / group, kBatch * group)) << device << group;
      EXPECT_EQ(model.rows.at(head), std::vector<int64_t>(4, kBatch)) << device << group;
      // The sums over the micro-batches, in fp32 (the window's sums): within fp32 rounding of double autograd.
      EXPECT_LT(relative_difference(gateway.grads(), reference_grads(f, /*unit_major=*/true)), 1e-6) << device << group;
    }
  }
}

// Kept layers (window_pass.h): the last layers run once, with grad, and their graphs serve the
// backward; with dropout their masks are the forward's own draws, as plain autograd's are. (A group
// draws one mask for its micro-batches together, other draws than the reference's per micro-batch:
// groups run here without dropout.)
TEST(KeptLayers, TheLastLayersRunOnceAndTheirGraphsGiveAutogradsGradients) {
  for (const at::Device device : devices()) {
    for (int64_t group : {1, 2}) {
      const LoraFixture f = make_fixture(group == 1 ? kDropout : 0.0, device, 4);
      for (int64_t kept : {1, 2}) {  // the model's 2 layers: units 1 and 2, the head 3
        RowsSeen model(*f.model);
        AdapterGateway gateway(f.adapters);
        seed_device_generator(device, 77);
        run_window_pass(model, gateway, f.ids, f.targets, 1.0, WindowPassHooks{},
                        {.group = group, .kept_layers = kept});
        const size_t head = model.num_units() - 1;
        const size_t groups = static_cast<size_t>(4 / group);
        EXPECT_EQ(model.rows.at(head - 1), std::vector<int64_t>(groups, kBatch * group)) << device << group << kept;
        EXPECT_EQ(model.rows.at(1).size(), (kept == 2 ? 1 : 2) * groups) << device << group << kept;
        seed_device_generator(device, 77);
        EXPECT_LT(relative_difference(gateway.grads(), reference_grads(f, /*unit_major=*/true)), 1e-6)
            << device << group << kept;
      }
    }
  }
}

TEST(RngReplay, TheMasksAreDrawnAndTheTestCanTellThem) {
  for (const at::Device device : devices()) {
    const LoraFixture f = make_fixture(kDropout, device, 2);
    // Another state: other masks, other gradients (the comparison above sees masks).
    seed_device_generator(device, 78);
    const std::vector<std::vector<at::Tensor>> other = run_unit_grads(f);
    seed_device_generator(device, 77);
    EXPECT_GT(relative_difference(other, reference_grads(f, false)), 1e-3) << device;
    // Without dropout nothing is drawn: the reference's order of units does not matter.
    const LoraFixture plain = make_fixture(0.0, device, 2);
    EXPECT_LT(relative_difference(reference_grads(plain, true), reference_grads(plain, false)), 1e-12) << device;
    EXPECT_GT(relative_difference(reference_grads(plain, false), reference_grads(f, false)), 1e-3) << device;
  }
}

TEST(RngReplay, ReplayPutsBackTheStateItFound) {
  seed_device_generator(at::kCPU, 3);
  const at::Tensor first = at::rand({8}, at::kDouble);
  seed_device_generator(at::kCPU, 3);
  const RngSnapshot start = RngSnapshot::capture_if(true, at::kCPU);
  at::rand({8}, at::kDouble);  // moves the generator on
  const at::Tensor next = at::rand({8}, at::kDouble);
  seed_device_generator(at::kCPU, 3);
  at::rand({8}, at::kDouble);
  {
    const RngReplay replay(start);
    EXPECT_TRUE(at::equal(at::rand({8}, at::kDouble), first));
  }
  EXPECT_TRUE(at::equal(at::rand({8}, at::kDouble), next)) << "the draws after the replay continue where they were";
  EXPECT_TRUE(RngSnapshot::capture_if(false, at::kCPU).empty());
}

}  // namespace
}  // namespace tierzero::engine::testing
