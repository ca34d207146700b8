#include "fuzz/fuzz_support.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

namespace tierzero::fuzz {
namespace {

std::string make_scratch_dir() {
  std::string base = "/dev/shm";
  if (!std::filesystem::is_directory(base)) {
    const char* tmp = std::getenv("TMPDIR");
    base = tmp != nullptr ? tmp : "/tmp";
  }
  std::string templ = base + "/tierzero-fuzz-XXXXXX";
  if (mkdtemp(templ.data()) == nullptr) {
    std::perror("tierzero fuzz: mkdtemp");
    std::abort();
  }
  static std::string remove_at_exit;
  remove_at_exit = templ;
  std::atexit([] {
    std::error_code ec;
    std::filesystem::remove_all(remove_at_exit, ec);
  });
  return templ;
}

}  // namespace

const std::string& scratch_dir() {
  static const std::string dir = make_scratch_dir();
  return dir;
}

std::string write_input_file(const std::string& name, const uint8_t* data, size_t size) {
  const std::string path = scratch_dir() + "/" + name;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  size_t done = 0;
  while (fd >= 0 && done < size) {
    const ssize_t n = ::write(fd, data + done, size - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  if (fd < 0 || done != size || ::close(fd) != 0) {
    std::perror(("tierzero fuzz: writing " + path).c_str());
    std::abort();
  }
  return path;
}

}  // namespace tierzero::fuzz
