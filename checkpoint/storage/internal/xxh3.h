// Private: XXH3 from the system's libxxhash, through its run-time dispatch on x86-64 (AVX2 /
// AVX-512 where the CPU has them: 2.3x the baseline SSE2 code on 1 MiB pieces on the CI box).
// The digests are XXH3's whatever the code path; include this instead of <xxhash.h>.
#pragma once

#include <xxhash.h>

#if defined(__x86_64__)
#include <xxh_x86dispatch.h>  // maps XXH3_64bits and XXH3_64bits_update to their _dispatch forms
#endif
