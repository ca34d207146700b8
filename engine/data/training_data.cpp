// open_training_data(): the bridge from a parsed ds_config to one rank's micro-batch stream.
#include <filesystem>

#include "engine/config/ds_config.h"
#include "engine/data/token_data.h"

namespace tierzero::engine {

Result<MicroBatchIterator> open_training_data(const DsConfig& config, int rank, const std::string& base_dir) {
  const TierzeroConfig& t = config.tierzero;
  if (t.data_path.empty()) {
    return invalid_argument("tierzero.data.path is not set: give a token file (.u16/.u32/TZTOKENS) or a .jsonl file");
  }
  std::optional<TokenDtype> dtype;
  if (!t.data_dtype.empty()) {
    TZ_ASSIGN_OR_RETURN(dtype, parse_token_dtype(t.data_dtype));
  }
  std::filesystem::path path(t.data_path);
  if (path.is_relative() && !base_dir.empty()) path = std::filesystem::path(base_dir) / path;
  TZ_ASSIGN_OR_RETURN(std::shared_ptr<const SampleSource> source, open_samples(path.string(), t.data_seq_len, dtype));
  return MicroBatchIterator::create(std::move(source),
                                    ShardSpec{.seed = t.data_seed,
                                              .rank = rank,
                                              .world_size = config.batch.world_size,
                                              .micro_batch_size = config.batch.train_micro_batch_size_per_gpu});
}

}  // namespace tierzero::engine
