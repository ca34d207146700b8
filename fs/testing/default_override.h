// Testing only: puts a FileSystem double behind fs::default_file_system() for a scope, so code
// that takes no FileSystem argument (checkpoint save, convert, export) runs on it.
#pragma once

#include "fs/file_system.h"

namespace tierzero::fs::testing {

class ScopedDefaultFileSystem {
 public:
  // From now until destruction, default_file_system() returns `fs` (which must outlive this).
  explicit ScopedDefaultFileSystem(FileSystem& fs);
  // Restores the file system that was the default before.
  ~ScopedDefaultFileSystem();
  ScopedDefaultFileSystem(const ScopedDefaultFileSystem&) = delete;
  ScopedDefaultFileSystem& operator=(const ScopedDefaultFileSystem&) = delete;

 private:
  FileSystem* previous_;
};

}  // namespace tierzero::fs::testing
