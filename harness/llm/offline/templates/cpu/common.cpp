#include <math.h>
#include <stdint.h>

// exp from a Cephes polynomial (about 2 ulp): glibc's expf has no SIMD variant unless the
// build uses -ffast-math, so a loop that calls it stays scalar; this one vectorises.
static inline float poly_exp(float x) {
    x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
    // Round to nearest by the 1.5 * 2^23 trick: floorf would keep the loop from vectorising.
    const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = x - n * 0.693359375f + n * 2.12194440e-4f;  // ln 2 split in two keeps r exact
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    int32_t bits = ((int32_t)n + 127) << 23;
    return p * __builtin_bit_cast(float, bits);  // 2^n; memcpy here would stop vectorisation
}

#ifdef EXP_poly
#define EXPF poly_exp
#else
#define EXPF expf
#endif

static inline float sigmoid_f(float x) { return 1.0f / (1.0f + EXPF(-x)); }

// erf by Abramowitz & Stegun 7.1.26 (absolute error 1.5e-7), which vectorises; erff does not.
static inline float erf_poly(float v) {
    const float z = fabsf(v), t = 1.0f / (1.0f + 0.3275911f * z);
    const float p = t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
    const float e = 1.0f - p * EXPF(-z * z);
    return v < 0.0f ? -e : e;
}

#ifdef EXP_poly
#define ERFF erf_poly
#define TANHF(v) (2.0f * sigmoid_f(2.0f * (v)) - 1.0f)
#else
#define ERFF erff
#define TANHF tanhf
#endif
