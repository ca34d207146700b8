// `tierzero bench adam` without LibTorch in the build: no peer, the table shows n/a.
#include "tools/bench_adam_torch.h"

namespace tierzero::tools {

Result<std::unique_ptr<TorchAdamPeer>> make_torch_adam_peer(const TorchPeerBuffers&) {
  return unsupported("this tierzero was built without LibTorch: reconfigure with -DTIERZERO_WITH_TORCH=ON");
}

std::string torch_peer_description() { return "none (built without LibTorch)"; }

}  // namespace tierzero::tools
