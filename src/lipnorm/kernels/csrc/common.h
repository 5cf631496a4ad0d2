/* What every kernel shares, whatever its floating-point type: the names of its two
 * builds, the widths compiled apart, and exp written out so that its bits are the same
 * on every CPU.
 *
 * Reproducibility. A kernel's result depends on the order of its operations only, never
 * on the instruction set it was compiled for: reductions run in a fixed order of LANES
 * partial sums (FOR_LANES, reduce.h), products are fused only where FMA says so (the build
 * passes -ffp-contract=off; fmaf and fma are correctly rounded, in hardware or in libm),
 * and exp is the polynomial below, not libm's, whose x86-64 build picks an FMA variant at
 * run time. "#pragma omp simd" (-fopenmp-simd) marks loops whose iterations are
 * independent, never a reduction: they give the same bits in any vector width. So a build for the CPU at
 * hand (-march=native) and a build for the oldest x86-64 give the same numbers
 * (tests/kernels/test_reproducible.py compares them bit for bit).
 */
#ifndef LIPNORM_KERNELS_COMMON_H
#define LIPNORM_KERNELS_COMMON_H

#include <math.h>
#include <stdint.h>

/* A typed function's name: NAME(dot) is dot_f32 in the float build, dot_f64 in the double one. */
#define LIPNORM_CAT_(a, b) a##_##b
#define LIPNORM_CAT(a, b) LIPNORM_CAT_(a, b)
#define NAME(name) LIPNORM_CAT(name, SFX)

/* Partial sums of a reduction: element d goes to lane d % LANES, lanes folded in halves. */
#define LANES 8

/* BODY for w = 0 .. W - 1 with l = w % LANES, a reduction's terms into lane l: chunk by
 * chunk of LANES elements, each chunk's lanes independent of each other, so that a chunk
 * runs in SIMD lanes (omp simd) while every lane adds its terms in order of w. */
#define FOR_LANES(W, w, l, ...) do { \
    int64_t w##_base = 0; \
    for (; w##_base + LANES <= (W); w##_base += LANES) { \
        _Pragma("omp simd") \
        for (int64_t l = 0; l < LANES; ++l) { const int64_t w = w##_base + l; __VA_ARGS__ } \
    } \
    _Pragma("omp simd") \
    for (int64_t l = 0; l < (W) - w##_base; ++l) { const int64_t w = w##_base + l; __VA_ARGS__ } \
} while (0)

/* The fold of reduce.h for double partial sums, which every build's statistics use. */
static inline double fold_double(double lane[LANES]) {
    for (int l = 0; l < 4; ++l) lane[l] += lane[l + 4];
    for (int l = 0; l < 2; ++l) lane[l] += lane[l + 2];
    return lane[0] + lane[1];
}

/* CALL(width) with the width a constant for the widths compiled apart, so that the loops
 * over a node's features unroll and stay in registers (a width known only at run time
 * took about twice the time); with the width as given otherwise. Compiled apart: 16 and
 * 8, the usual hidden widths of small deep networks, and 4, 6 and 7, the usual output
 * widths (class counts). Each further width adds about a second to the first build. */
#define WITH_WIDTH(width, CALL) \
    switch (width) { \
    case 16: CALL(16); break; case 8: CALL(8); break; \
    case 7: CALL(7); break;   case 6: CALL(6); break; case 4: CALL(4); break; \
    default: CALL(width); }

/* exp(x) in float to about 1 ulp (Cephes' expf: 2^n times a degree-7 polynomial of the
 * rest), without branches or calls, so that a loop of it runs in SIMD lanes. Below
 * -87.34 it gives 0 (libm: denormals, which weigh nothing beside a softmax's largest
 * term, exp(0) = 1); NaN stays NaN. */
static inline float exp_f32(float x) {
    const float lowest = -87.3365447505531f, highest = 88.3762626647949f;
    float r = x < lowest ? lowest : (x > highest ? highest : x);
    const float n = __builtin_floorf(r * 1.44269504088896341f + 0.5f);
    r = r - n * 0.693359375f + n * 2.12194440e-4f; /* x - n ln 2, ln 2 in two parts */
    float y = 1.9875691500e-4f;
    y = y * r + 1.3981999507e-3f;
    y = y * r + 8.3334519073e-3f;
    y = y * r + 4.1665795894e-2f;
    y = y * r + 1.6666665459e-1f;
    y = y * r + 5.0000001201e-1f;
    y = y * r * r + r + 1.0f;
    union { int32_t i; float f; } scale = { .i = ((int32_t)n + 127) << 23 };
    y = y * scale.f;
    return x < lowest ? 0.0f : (x == x ? y : x);
}

/* exp(x) in double to about 1 ulp (Cephes' exp: 2^n times a rational function of the
 * rest, 1 + 2 r P(r^2) / (Q(r^2) - r P(r^2))). 2^n is applied as two exact powers of two,
 * each normal. Below -708.39 (the smallest normal's log) it gives 0, above 709.78 inf;
 * NaN stays NaN. */
static inline double exp_f64(double x) {
    const double lowest = -708.39641853226408, highest = 709.78271289338397;
    double r = x < lowest ? lowest : (x > highest ? highest : x);
    const double n = __builtin_floor(r * 1.4426950408889634073599 + 0.5);
    r = r - n * 6.93145751953125e-1 - n * 1.42860682030941723212e-6; /* x - n ln 2 */
    const double rr = r * r;
    const double p = r * ((1.26177193074810590878e-4 * rr + 3.02994407707441961300e-2) * rr + 9.99999999999999999910e-1);
    const double q = ((3.00198505138664455042e-6 * rr + 2.52448340349684104192e-3) * rr + 2.27265548208155028766e-1) * rr
                     + 2.00000000000000000009e0;
    double y = 1.0 + 2.0 * (p / (q - p));
    const int64_t half = (int64_t)n / 2; /* n = half + rest, both within the normal exponents */
    union { int64_t i; double f; } first = { .i = (half + 1023) << 52 }, second = { .i = ((int64_t)n - half + 1023) << 52 };
    y = y * first.f * second.f;
    return x < lowest ? 0.0 : (x > highest ? INFINITY : (x == x ? y : x));
}

#endif
