#include "test_env.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

namespace tierzero::nvme::testing {

namespace fs = std::filesystem;

TestDir::TestDir() {
  const char* env = std::getenv("TIERZERO_TEST_NVME");
  fs::path root = env != nullptr && *env != '\0' ? fs::path(env) : fs::current_path();
  std::error_code ec;
  if (!fs::is_directory(root, ec) || access(root.c_str(), W_OK) != 0) root = fs::temp_directory_path();
  std::string templ = (root / "tierzero-nvme-test-XXXXXX").string();
  if (mkdtemp(templ.data()) == nullptr) std::abort();
  path_ = templ;
}

TestDir::~TestDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

std::vector<uint8_t> random_bytes(uint64_t bytes, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> out(bytes);
  uint64_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    const uint64_t v = rng();
    std::memcpy(out.data() + i, &v, 8);
  }
  for (; i < bytes; ++i) out[i] = static_cast<uint8_t>(rng());
  return out;
}

bool write_plain_file(const std::string& path, const std::vector<uint8_t>& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  return static_cast<bool>(out);
}

std::vector<uint8_t> read_plain_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace tierzero::nvme::testing
