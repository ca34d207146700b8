// The `.metadata` file of a PyTorch distributed checkpoint (torch.distributed.checkpoint, as FSDP2
// and torchtitan save them), read with the inert pickle reader.
//
// It pickles (protocol 4) a Metadata dataclass:
//   state_dict_metadata  {fqn: TensorStorageMetadata | BytesStorageMetadata}, in state-dict order
//       TensorStorageMetadata(properties=TensorProperties (BUILD state: a tuple whose first item is
//       the dtype, a global torch.float32 ...), size=torch.Size, chunks=[ChunkStorageMetadata(
//       offsets=torch.Size, sizes=torch.Size)])
//   storage_data         {MetadataIndex(fqn, offset=torch.Size, index): _StorageInfo(relative_path,
//                         offset, length, transform_descriptors)}
// Each chunk's bytes [offset, offset + length) of relative_path are a torch.save zip of that chunk,
// a contiguous tensor of `sizes`. Dataclasses are NEWOBJ + BUILD with a dict of fields.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/common.h"

namespace tierzero::checkpoint {

// One stored piece of a tensor: the box [offsets, offsets + sizes) of it, and where its
// torch.save blob lies.
struct DcpChunk {
  std::vector<int64_t> offsets;
  std::vector<int64_t> sizes;
  std::string file;     // relative_path, a plain file name inside the checkpoint folder
  uint64_t offset = 0;  // of the blob in `file`
  uint64_t length = 0;
};

struct DcpTensor {
  std::string name;  // the fully qualified name ("model.layers.0.attention.wq.weight")
  ElementType dtype = ElementType::kF32;
  std::vector<int64_t> shape;
  std::vector<DcpChunk> chunks;  // tile the tensor exactly
};

struct DcpMetadata {
  std::vector<DcpTensor> tensors;        // state-dict order
  std::vector<std::string> non_tensors;  // BytesStorageMetadata entries (ints, pickled objects)
};

// Reads and checks `path` (a DCP .metadata file). Every chunk has a storage_data entry, lies inside
// its tensor, and the chunks of a tensor tile it with no gap or overlap; relative paths name files
// inside the folder. Returns kNotFound / kIo when the file cannot be read; kCorrupt "PATH: byte N:
// reason" for a malformed pickle or a value of the wrong kind (N: the opcode that made the value);
// kUnsupported for dtypes other than fp64/fp32/fp16/bf16 and the integer and bool types torch.save
// writes, and for transformed (compressed) storage.
Result<DcpMetadata> read_dcp_metadata(const std::string& path);

}  // namespace tierzero::checkpoint
