// The batch triad, as DeepSpeed's DeepSpeedConfig._set_batch_related_parameters() and
// _batch_assertion() do it (deepspeed/runtime/config.py): derive the missing values with floor
// division, then require all three > 0 and train = micro * accumulation * world size.
#include <optional>
#include <string>

#include "engine/config/internal/ds_config_sections.h"
#include "engine/config/internal/flag_values.h"

namespace tierzero::engine::detail {
namespace {

constexpr const char* kTrain = "train_batch_size";
constexpr const char* kMicro = "train_micro_batch_size_per_gpu";
constexpr const char* kAccum = "gradient_accumulation_steps";

// One of the triad: the value (resolve_int() with its flag), or nothing when absent, or "auto" for
// train_batch_size (always the product). *unresolved_auto: "auto" with its flag not given, for
// DeepSpeed's derivation to fill or the caller to refuse.
Result<std::optional<int64_t>> read_triad(JsonFields& root, const char* key, const std::optional<int64_t>& flag,
                                          const char* flag_name, bool* unresolved_auto) {
  *unresolved_auto = root.is_auto(key) && !flag;
  if (*unresolved_auto || (!root.has(key) && !flag)) return std::optional<int64_t>();
  int64_t value = 0;
  TZ_RETURN_IF_ERROR(resolve_int(root, key, flag, flag_name, &value, INT64_MIN));
  return std::optional<int64_t>(value);
}

Status must_be_positive(const char* key, int64_t value, bool derived) {
  if (value > 0) return {};
  return invalid_argument(std::string(key) + " must be > 0, got " + std::to_string(value) +
                          (derived ? " (derived by floor division from the other batch sizes and the world size; "
                                     "make train_batch_size a multiple of the others)"
                                   : ""));
}

// micro * accum * world, or an error naming the three when the product does not fit int64_t
// (fuzzing: a micro-batch of 7777777777777777777 overflowed here).
Result<int64_t> batch_product(int64_t micro, int64_t accum, int64_t world) {
  int64_t product = 0;
  if (__builtin_mul_overflow(micro, accum, &product) || __builtin_mul_overflow(product, world, &product)) {
    return invalid_argument(std::string(kMicro) + " " + std::to_string(micro) + " * " + kAccum + " " +
                            std::to_string(accum) + " * world size " + std::to_string(world) +
                            " is past any batch tierzero can count (2^63); use real batch sizes");
  }
  return product;
}

}  // namespace

Status parse_batch(JsonFields& root, const ResolveHints& hints, BatchConfig* out) {
  if (hints.world_size < 1) {
    return invalid_argument("world size must be >= 1, got " + std::to_string(hints.world_size));
  }
  const TrainerFlags& flags = hints.flags;
  bool train_auto = false, micro_auto = false, accum_auto = false;
  TZ_ASSIGN_OR_RETURN(std::optional<int64_t> train, read_triad(root, kTrain, std::nullopt, "", &train_auto));
  TZ_ASSIGN_OR_RETURN(std::optional<int64_t> micro,
                      read_triad(root, kMicro, flags.micro_batch_size, "--micro-batch", &micro_auto));
  TZ_ASSIGN_OR_RETURN(std::optional<int64_t> accum,
                      read_triad(root, kAccum, flags.gradient_accumulation_steps, "--grad-accum", &accum_auto));
  // "auto" without its flag is derived only from the other two, as DeepSpeed derives an absent one.
  if (micro_auto && !(train && accum)) return auto_needs_flag(root, kMicro, "--micro-batch");
  if (accum_auto && !(train && micro)) return auto_needs_flag(root, kAccum, "--grad-accum");
  const int64_t world = hints.world_size;
  // A given value <= 0 fails DeepSpeed's assertion whatever is derived; name it, not a derived one.
  if (train) TZ_RETURN_IF_ERROR(must_be_positive(kTrain, *train, false));
  if (micro) TZ_RETURN_IF_ERROR(must_be_positive(kMicro, *micro, false));
  if (accum) TZ_RETURN_IF_ERROR(must_be_positive(kAccum, *accum, false));

  if (train && micro && accum) {
    // All given: nothing to derive.
  } else if (train && micro) {
    accum = *train / *micro / world;
  } else if (train && accum) {
    micro = *train / world / *accum;
  } else if (micro && accum) {
    // The batch is their product (below).
  } else if (train) {
    accum = 1;
    micro = *train / world;
  } else if (micro) {
    accum = 1;
  } else {
    return invalid_argument(std::string("either ") + kTrain + " or " + kMicro +
                            " must be given (gradient_accumulation_steps alone does not determine the batch; "
                            "or pass --micro-batch to tierzero train)");
  }

  if (train) TZ_RETURN_IF_ERROR(must_be_positive(kTrain, *train, true));
  TZ_RETURN_IF_ERROR(must_be_positive(kMicro, *micro, true));
  TZ_RETURN_IF_ERROR(must_be_positive(kAccum, *accum, true));
  TZ_ASSIGN_OR_RETURN(const int64_t product, batch_product(*micro, *accum, world));
  if (!train) train = product;
  if (*train != product) {
    return invalid_argument(std::string(kTrain) + " " + std::to_string(*train) + " != " + kMicro + " " +
                            std::to_string(*micro) + " * " + kAccum + " " + std::to_string(*accum) + " * world size " +
                            std::to_string(world) + " = " + std::to_string(product) +
                            ": give two of the three, or three that agree");
  }
  *out = BatchConfig{*train, *micro, *accum, hints.world_size};
  return {};
}

}  // namespace tierzero::engine::detail
