// Runs make_chat_fixture.py (a no-op when its STAMP is up to date).
#include "tests/text/chat_fixture.h"

#include <cstdlib>

#include "tests/support/python.h"

namespace tierzero::text::testing {

std::string chat_fixture_dir(std::string& skip_reason) {
  ::setenv("TIERZERO_LLAMA_CPP_SDIST", TIERZERO_LLAMA_CPP_SDIST, /*overwrite=*/1);
  return test_support::python_fixture_dir(TIERZERO_CHAT_FIXTURE_SCRIPT, TIERZERO_CHAT_FIXTURE_DIR, skip_reason);
}

}  // namespace tierzero::text::testing
