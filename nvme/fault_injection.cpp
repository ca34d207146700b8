// The process-wide fault injector behind testing/fault_injection.h: ScopedFaultInjector installs
// it and every lane's completions read it (settle_completion, internal/piece.h).
#include "nvme/testing/fault_injection.h"

#include <atomic>
#include <mutex>
#include <utility>

#include "nvme/internal/piece.h"

namespace tierzero::nvme {
namespace {

using InjectorRef = std::shared_ptr<const testing::FaultInjector>;

std::mutex g_mu;
InjectorRef g_injector;                // guarded by g_mu
std::atomic<bool> g_installed{false};  // g_injector != nullptr: lets completions skip the lock

// Installs `injector` (null: none) and returns the one it replaces.
InjectorRef exchange_injector(InjectorRef injector) {
  std::lock_guard lock(g_mu);
  std::swap(g_injector, injector);
  g_installed.store(g_injector != nullptr, std::memory_order_release);
  return injector;
}

}  // namespace

int64_t apply_injected_fault(const Piece& piece, int64_t result) {
  if (!g_installed.load(std::memory_order_acquire)) return result;
  InjectorRef injector;
  {
    std::lock_guard lock(g_mu);
    injector = g_injector;
  }
  if (!injector) return result;
  return (*injector)(
      testing::PieceCompletion{piece.owner->file->path(), piece.op, piece.next_offset(), piece.next_length()}, result);
}

namespace testing {

ScopedFaultInjector::ScopedFaultInjector(FaultInjector injector)
    : previous_(exchange_injector(injector ? std::make_shared<const FaultInjector>(std::move(injector)) : nullptr)) {}

ScopedFaultInjector::~ScopedFaultInjector() { exchange_injector(std::move(previous_)); }

}  // namespace testing
}  // namespace tierzero::nvme
