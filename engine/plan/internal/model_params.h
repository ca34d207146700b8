// Private: the model's parameters as the engine lays them out (engine/model: unit 0 the embedding,
// units 1..L the decoder layers, unit L+1 the final norm and LM head), as element counts.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/plan/plan.h"

namespace tierzero::engine::plan {

// Element count of every distinct parameter, in first-use order (a tied LM head not repeated).
std::vector<int64_t> distinct_param_numels(const ModelDims& model);
// Element count of each unit's parameters, in unit_params order (a tied LM head in the last unit too).
std::vector<std::vector<int64_t>> unit_param_numels(const ModelDims& model);
// tierzero.grad_ring_records' fewest slots on one rank at stage 3, for records of `record_numel`
// elements: the records the backward holds at once, as engine/zero's grad_ring_records_needed counts
// them from the model. The partition lays the units' parameters out in order, so unit u's gradients
// land on the records spanning its range, which stay held until u's backward is done (each unit's
// parameters are final then); a tied embedding's records from the head's landing until unit 0's.
// The most, over the units, of the records held while a unit's gradients land.
int64_t grad_ring_slots(const ModelDims& model, int64_t record_numel);
// tierzero.lora: the adapters' element counts (lora_A, then lora_B, per targeted projection) of
// each unit, matched as engine/model's LoraModel matches them (lora_targets_module); none in the
// embedding and LM head units. kInvalidArgument, naming a layer's projections, when no projection
// matches.
Result<std::vector<std::vector<int64_t>>> lora_unit_numels(const ModelDims& model, const LoraConfig& lora);
// Weights of one decoder layer used in a matmul (q, k, v, o, gate, up, down).
int64_t layer_matmul_params(const ModelDims& model);
// Training FLOPs of one token with every layer recomputed in backward: 8 x the matmul weights
// (forward 2, backward 4, recomputation 2; the LM head counted, the embedding lookup not) plus
// attention's 16 x layers x heads x head_dim x seq_len (12 for forward + backward, as PaLM counts,
// and 4 more for the recomputation). Without `weight_grads` (a LoRA run's frozen base) the backward
// computes only the inputs' gradients: 6 x the matmul weights. `kept_layers` decoder layers are not
// recomputed (tierzero.kept_activations): each saves its forward's 2 x matmul weights + 4 x heads x
// head_dim x seq_len.
double flops_per_token(const ModelDims& model, int64_t seq_len, bool weight_grads = true, int64_t kept_layers = 0);

}  // namespace tierzero::engine::plan
