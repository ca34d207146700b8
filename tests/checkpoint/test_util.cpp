#include "test_util.h"

#include <fstream>
#include <iterator>
#include <sstream>

namespace tierzero::checkpoint::testing {

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string source_file(const std::string& name) { return std::string(TIERZERO_CHECKPOINT_TEST_DIR) + "/" + name; }

Status convert_status(Result<std::unique_ptr<ConsolidationSource>> opened, const std::string& out_dir,
                      ElementType dtype) {
  if (!opened.ok()) return opened.status();
  ConvertOptions options;
  options.progress = false;
  options.dtype = dtype;
  return consolidate_to_safetensors(**opened, out_dir, options).status();
}

}  // namespace tierzero::checkpoint::testing
