#include "test_env.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>

namespace tierzero::nvme::testing {

std::string test_root() {
  const char* env = std::getenv("TIERZERO_TEST_NVME");
  struct stat st {};
  if (env != nullptr && *env != '\0' && stat(env, &st) == 0 && S_ISDIR(st.st_mode) && access(env, W_OK) == 0)
    return env;
  return test_support::working_dir_root();
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
