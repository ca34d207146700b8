// LibTorch's AVX2 Box-Muller (normal_fill_16_AVX2, ATen/native/cpu/DistributionTemplates.h) on the
// same avx_mathfun functions, so the same bits: compiled with -mavx2 -mfma (CMakeLists.txt).
#include <ATen/native/cpu/avx_mathfun.h>
#include <c10/util/MathConstants.h>

#include "engine/model/internal/init_value.h"

namespace tierzero::engine {

void box_muller_avx2(float* data, int64_t blocks, float std) {
  const __m256 two_pi = _mm256_set1_ps(2.0f * c10::pi<double>);
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 minus_two = _mm256_set1_ps(-2.0f);
  const __m256 mean = _mm256_set1_ps(0.0f);
  const __m256 std_v = _mm256_set1_ps(std);
  for (int64_t b = 0; b < blocks; ++b, data += 16) {
    const __m256 u1 = _mm256_sub_ps(one, _mm256_loadu_ps(data));
    const __m256 u2 = _mm256_loadu_ps(data + 8);
    const __m256 radius = _mm256_sqrt_ps(_mm256_mul_ps(minus_two, log256_ps(u1)));
    const __m256 theta = _mm256_mul_ps(two_pi, u2);
    __m256 sintheta, costheta;
    sincos256_ps(theta, &sintheta, &costheta);
    const __m256 n1 = _mm256_mul_ps(radius, costheta);
    const __m256 n2 = _mm256_mul_ps(radius, sintheta);
    _mm256_storeu_ps(data, _mm256_fmadd_ps(n1, std_v, mean));
    _mm256_storeu_ps(data + 8, _mm256_fmadd_ps(n2, std_v, mean));
  }
}

}  // namespace tierzero::engine
