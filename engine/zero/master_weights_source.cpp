#include "engine/zero/internal/master_weights_source.h"

#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>

#include <exception>

namespace tierzero::engine {
namespace {

enum RequestKind : int64_t { kDone = 0, kRange = 1 };

// Runs `body`, turning an exception thrown by a collective or a tensor operation into a status
// (an Error's own, else an internal error: "`what`: ...").
template <class Body>
Status guarded(const std::string& what, Body&& body) {
  try {
    body();
    return Status();
  } catch (const Error& e) {
    return e.status();
  } catch (const std::exception& e) {
    return internal_error(what + ": " + e.what());
  }
}

}  // namespace

MasterWeightsSource::MasterWeightsSource(ZeroEngine& engine, std::string config_json)
    : engine_(engine), config_json_(std::move(config_json)) {
  for (const ParamSpec& spec : all_params(engine.model())) specs_.push_back({spec.name, spec.shape});
}

std::vector<int64_t> MasterWeightsSource::exchange_request(std::vector<int64_t> request) {
  Comm& comm = engine_.comm();
  at::Tensor message = at::tensor(request, at::kLong).to(comm.device());
  comm.broadcast(message, 0).wait();
  message = message.cpu();
  return {message.const_data_ptr<int64_t>(), message.const_data_ptr<int64_t>() + message.numel()};
}

void MasterWeightsSource::move_range(size_t index, int64_t first, int64_t count, const at::Tensor& destination) {
  Comm& comm = engine_.comm();
  PartitionOptimizer& optimizer = engine_.optimizer();
  for (const PartitionRun& run : engine_.partitioner().locate(specs_.at(index).name, first, count)) {
    at::Tensor mine;  // this rank's run, read from the optimizer
    if (run.rank == comm.rank()) {
      mine = at::empty({run.numel}, at::kFloat);
      throw_if_error(optimizer.read_master(run.partition_offset,
                                           {mine.data_ptr<float>(), static_cast<size_t>(run.numel)}));
    }
    at::Tensor into = destination.defined() ? destination.narrow(0, run.param_offset - first, run.numel) : at::Tensor();
    if (run.rank == 0) {  // rank 0's own: no exchange
      if (into.defined()) into.copy_(mine);
      continue;
    }
    at::Tensor buffer = mine.defined()
                            ? mine.to(comm.device(), at::kFloat)
                            : at::empty({run.numel}, at::TensorOptions().dtype(at::kFloat).device(comm.device()));
    comm.broadcast(buffer, run.rank).wait();
    if (into.defined()) into.copy_(buffer);
  }
}

Status MasterWeightsSource::fill_fp32(size_t index, uint64_t first, std::span<float> out) {
  return guarded("reading master weights of '" + specs_.at(index).name + "'", [&] {
    const c10::DeviceGuard on_device(engine_.comm().device());  // the writer's thread, not the engine's
    const auto begin = static_cast<int64_t>(first), count = static_cast<int64_t>(out.size());
    if (exchanges()) exchange_request({kRange, static_cast<int64_t>(index), begin, count});
    move_range(index, begin, count, at::from_blob(out.data(), {count}, at::kFloat));
  });
}

Status MasterWeightsSource::serve() {
  if (!exchanges()) return Status();
  return guarded("serving master weights to rank 0", [&] {
    for (;;) {
      const std::vector<int64_t> request = exchange_request({kDone, 0, 0, 0});
      if (request[0] == kDone) return;
      move_range(static_cast<size_t>(request[1]), request[2], request[3], at::Tensor());
    }
  });
}

Status MasterWeightsSource::finish() {
  if (!exchanges()) return Status();
  return guarded("ending the master weights exchange", [&] { exchange_request({kDone, 0, 0, 0}); });
}

}  // namespace tierzero::engine
