// doctor: GPUs through the CUDA runtime (when built with CUDA), their PCIe links from sysfs.
#include <cstdio>
#include <filesystem>
#include <fstream>

#ifdef TIERZERO_DOCTOR_CUDA
#include <cuda_runtime.h>
#endif

#include "common/common.h"
#include "tools/doctor_checks.h"

namespace tierzero::tools {

namespace {

std::string read_sysfs(const std::string& path) {
  std::ifstream in(path);
  std::string value;
  std::getline(in, value);
  return value;
}

// "PCIe 32.0 GT/s PCIe x16 (max 32.0 GT/s PCIe x16)" for the device at `address`
// ("0000:17:00.0"); sets `narrow` when the link runs narrower than it could.
std::string pcie_link(const std::string& address, bool& narrow) {
  const std::string dir = "/sys/bus/pci/devices/" + address + "/";
  const std::string speed = read_sysfs(dir + "current_link_speed"), width = read_sysfs(dir + "current_link_width");
  const std::string max_speed = read_sysfs(dir + "max_link_speed"), max_width = read_sysfs(dir + "max_link_width");
  if (speed.empty() || width.empty()) return "PCIe link not visible in " + dir;
  narrow = !max_width.empty() && width != max_width;
  return "link " + speed + " x" + width + " (max " + max_speed + " x" + max_width + ")";
}

#ifdef TIERZERO_DOCTOR_CUDA

std::string version_text(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }

std::vector<DoctorLine> cuda_gpus() {
  std::vector<DoctorLine> lines;
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    const std::string why = err != cudaSuccess ? std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err)
                                               : "cudaGetDeviceCount found none";
    lines.push_back({"gpu", "GPUs", "no GPU (" + why + ")", Verdict::kWarn,
                     "train computes on the CPU: fine for tests, not for training speed; install the NVIDIA "
                     "driver or run where a GPU is visible (CUDA_VISIBLE_DEVICES)"});
    return lines;
  }
  lines.push_back({"gpu", "CUDA", "runtime " + version_text(runtime) + ", driver supports " + version_text(driver),
                   driver < runtime ? Verdict::kFail : Verdict::kOk,
                   driver < runtime ? "the driver is older than the CUDA runtime tierzero was built with: update the "
                                      "NVIDIA driver"
                                    : ""});
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, d) != cudaSuccess) continue;
    char address[32];
    std::snprintf(address, sizeof address, "%04x:%02x:%02x.0", p.pciDomainID, p.pciBusID, p.pciDeviceID);
    bool narrow = false;
    const std::string link = pcie_link(address, narrow);
    size_t free = 0, total = 0;
    cudaSetDevice(d);
    cudaMemGetInfo(&free, &total);
    lines.push_back({"gpu", "GPU " + std::to_string(d),
                     std::string(p.name) + ", " + format_bytes(free) + " free of " + format_bytes(total) +
                         ", compute " + std::to_string(p.major) + "." + std::to_string(p.minor) + ", " + address + " " +
                         link,
                     narrow ? Verdict::kWarn : Verdict::kOk,
                     narrow ? "the PCIe link runs narrower than the card supports: reseat it or use a full x16 slot; "
                              "host <-> GPU copies are capped by it"
                            : ""});
  }
  return lines;
}

#else

// NVIDIA display/3D controllers (vendor 0x10de, class 0x03xxxx) in sysfs.
std::vector<std::string> nvidia_pci_devices() {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/sys/bus/pci/devices", ec)) {
    const std::string dir = entry.path().string() + "/";
    if (read_sysfs(dir + "vendor") == "0x10de" && read_sysfs(dir + "class").rfind("0x03", 0) == 0) {
      out.push_back(entry.path().filename().string());
    }
  }
  return out;
}

#endif

}  // namespace

std::vector<DoctorLine> check_gpus() {
#ifdef TIERZERO_DOCTOR_CUDA
  return cuda_gpus();
#else
  std::vector<DoctorLine> lines;
  const std::vector<std::string> devices = nvidia_pci_devices();
  if (devices.empty()) {
    lines.push_back({"gpu", "GPUs", "none on the PCI bus; tierzero built without CUDA", Verdict::kWarn,
                     "train computes on the CPU: fine for tests, not for training speed"});
  }
  for (const std::string& address : devices) {
    bool narrow = false;
    lines.push_back({"gpu", address, "NVIDIA GPU, " + pcie_link(address, narrow), Verdict::kWarn,
                     "tierzero was built without CUDA and will not use it: install the CUDA toolkit and rebuild "
                     "(scripts/setup.sh)"});
  }
  return lines;
#endif
}

}  // namespace tierzero::tools
