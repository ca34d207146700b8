// doctor: what tierzero was built with. The versions come from CMake (tools/CMakeLists.txt) as
// TIERZERO_DOCTOR_*_VERSION definitions; absent ones were not found at build time.
#include "common/version.h"
#include "tools/doctor_checks.h"

namespace tierzero::tools {

std::vector<DoctorLine> check_build() {
  std::vector<DoctorLine> lines;
  lines.push_back({"build", "tierzero", kTierzeroVersion, Verdict::kOk, ""});
#ifdef TIERZERO_DOCTOR_CUDA_VERSION
  lines.push_back({"build", "CUDA toolkit", TIERZERO_DOCTOR_CUDA_VERSION, Verdict::kOk, ""});
#else
  lines.push_back({"build", "CUDA toolkit", "not found at build time", Verdict::kWarn,
                   "install the CUDA toolkit (nvcc on PATH) and rebuild, or GPUs go unused"});
#endif
#ifdef TIERZERO_DOCTOR_TORCH_VERSION
  lines.push_back({"build", "LibTorch", TIERZERO_DOCTOR_TORCH_VERSION, Verdict::kOk, ""});
#else
  lines.push_back({"build", "LibTorch", "not found at build time: no `train`", Verdict::kWarn,
                   "run scripts/setup.sh (installs the torch wheel) and rebuild"});
#endif
#ifdef TIERZERO_DOCTOR_NCCL_VERSION
  lines.push_back({"build", "NCCL", TIERZERO_DOCTOR_NCCL_VERSION " (LibTorch's)", Verdict::kOk, ""});
#else
  lines.push_back(
      {"build", "NCCL", "not found beside LibTorch", Verdict::kWarn,
       "multi-GPU training needs a CUDA build of torch (it brings NCCL); one GPU or Gloo on CPU still works"});
#endif
  return lines;
}

}  // namespace tierzero::tools
