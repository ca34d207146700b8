// The one scratch directory of the tests.
//
//   test_support::ScratchDir dir;                  // $TMPDIR (or /tmp)/tierzero-test-XXXXXX
//   write(dir.file("a.bin"));                      // dir.path() + "/a.bin"
//   test_support::ScratchDir big("ckpt", test_support::working_dir_root());   // on the build disk
//
// The directory is made with mkdtemp (fresh and unique, mode 0700) and removed with everything
// below it on destruction. TIERZERO_KEEP_SCRATCH=1 keeps the directories of failed tests (and
// prints where they are); TIERZERO_KEEP_SCRATCH=all keeps every one.
#pragma once

#include <string>
#include <string_view>

namespace tierzero::test_support {

// $TMPDIR when set and not empty, else /tmp.
std::string temp_root();
// The current directory (under ctest: the build tree, a real disk where /tmp may be a tmpfs
// without O_DIRECT) when writable, else temp_root().
std::string working_dir_root();

class ScratchDir {
 public:
  // A fresh directory `root`/`prefix`-XXXXXX. Throws std::runtime_error naming the path and
  // errno when it cannot be made.
  explicit ScratchDir(std::string_view prefix = "tierzero-test", const std::string& root = temp_root());
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::string& path() const { return path_; }
  // path() + "/" + name.
  std::string file(std::string_view name) const;

 private:
  std::string path_;
};

// Makes a fresh directory `root`/`prefix`-XXXXXX and returns its path (ScratchDir without the
// removal, for directories whose lifetime a test manages itself). Throws like ScratchDir.
std::string make_scratch_dir(std::string_view prefix = "tierzero-test", const std::string& root = temp_root());

// Removes `path` and everything below it, not following symbolic links; a missing path is fine.
// (Not std::filesystem::remove_all: libtorch.so exports its own copy, which the dynamic linker
// may bind instead, and it crashes.) Returns false when something could not be removed.
bool remove_tree(const std::string& path);

}  // namespace tierzero::test_support
