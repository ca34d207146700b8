// PyTorch distributed checkpoints (torch.distributed.checkpoint: `.metadata` + `__R_0.distcp`, as
// FSDP2 and torchtitan save them) as a ConsolidationSource, read without Python or torch.
//
// `.metadata` names every tensor, its dtype and shape, and the chunks (boxes of it) the ranks wrote;
// each chunk is a torch.save blob at a byte range of a .distcp file. Opening reads only .metadata
// and checks that each chunk's range lies inside its file; a tensor is assembled when read, chunk by
// chunk (one open at a time), one contiguous run at a time, so memory stays at the converter's read
// piece whatever the checkpoint weighs (integer tensors: one chunk's bytes more). Non-tensor
// entries (ints, pickled objects: BytesStorageMetadata) are left out; model_config_json is DIR's
// config.json when present.
#pragma once

#include <memory>
#include <string>

#include "checkpoint/convert/consolidate.h"
#include "common/common.h"

namespace tierzero::checkpoint {

// True when DIR holds a `.metadata` file and a `*.distcp` file. Cheap; never fails.
bool is_dcp_checkpoint(const std::string& dir);

// Opens the DCP checkpoint in DIR. `prefix` keeps only the tensors whose names start with it and
// strips it ("model." for a checkpoint of {"model": ..., "optimizer": ...}); empty keeps all.
// Returns kNotFound when DIR/.metadata or a data file is missing or no tensor matches `prefix`,
// kCorrupt naming the file, byte and reason for a malformed .metadata or a chunk whose range passes
// the end of its file, kUnsupported for dtypes or storage transforms it does not read. Reading a
// chunk that is not a contiguous torch.save tensor of the chunk's shape and dtype is kCorrupt naming
// the .distcp file and byte range.
Result<std::unique_ptr<ConsolidationSource>> open_dcp_checkpoint(const std::string& dir, const std::string& prefix);

}  // namespace tierzero::checkpoint
