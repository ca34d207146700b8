// read_pickle_file: a file that is one pickle, read whole and parsed inertly.
#include <fstream>
#include <vector>

#include "checkpoint/torch_format/internal/pickle_reader.h"
#include "checkpoint/torch_format/torch_file.h"

namespace tierzero::checkpoint {

Result<PickleDocument> read_pickle_file(const std::string& path, uint64_t max_bytes) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return not_found("cannot open " + path);
  const std::streamoff size = in.tellg();
  if (size < 0) return io_error("cannot size " + path);
  if (static_cast<uint64_t>(size) > max_bytes) {
    return corrupt(path + ": " + std::to_string(size) + " bytes, over the " + std::to_string(max_bytes) +
                   "-byte limit for checkpoint metadata");
  }
  std::vector<std::byte> bytes(static_cast<size_t>(size));
  in.seekg(0);
  if (!in.read(reinterpret_cast<char*>(bytes.data()), size)) return io_error("cannot read " + path);
  return parse_pickle(bytes, path, 0);
}

}  // namespace tierzero::checkpoint
