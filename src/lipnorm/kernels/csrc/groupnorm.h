/* DGN's output x + lambda sum_g BatchNorm(a_g * x) for S sets side by side, of one type
 * (kernels.c; lipnorm.nn.norm.dgn.dgn_output has the formulas): a (S, G, N), x (N, S, W)
 * node-major, per (s, g, w) statistics and factors in double (their terms can cancel: a
 * column of near-constant features), lambda folded into the factors by the caller. A sum
 * over the nodes per (s, g) runs with its W sums in registers (g outer, n inner); a
 * per-node result with its W values in registers (n outer). */

/* sum1 = sum_n a x and sum2 = sum_n (a x)^2, each (S, G, W), written; where grad_out is
 * given, the backward's sums instead: sum1 = sum_n a x grad_out, sum2 = sum_n grad_out
 * (the same for every g). */
static inline __attribute__((always_inline)) void NAME(dgn_sums_body)(
    int64_t N, int64_t S, int64_t G, int64_t W, const REAL *a, const REAL *x, const REAL *grad_out,
    double *sum1, double *sum2)
{
    for (int64_t s = 0; s < S; ++s)
        for (int64_t g = 0; g < G; ++g) {
            const REAL *restrict as = a + (s * G + g) * N;
            double first[W], second[W];
            for (int64_t w = 0; w < W; ++w) { first[w] = 0; second[w] = 0; }
            for (int64_t n = 0; n < N; ++n) {
                const double av = as[n];
                const REAL *restrict xs = x + (n * S + s) * W;
                if (grad_out) {
                    const REAL *restrict go = grad_out + (n * S + s) * W;
#pragma omp simd
                    for (int64_t w = 0; w < W; ++w) {
                        first[w] += av * ((double)go[w] * (double)xs[w]);
                        second[w] += go[w];
                    }
                    continue;
                }
#pragma omp simd
                for (int64_t w = 0; w < W; ++w) {
                    const double ax = av * (double)xs[w];
                    first[w] += ax;
                    second[w] += ax * ax;
                }
            }
            for (int64_t w = 0; w < W; ++w) { sum1[(s * G + g) * W + w] = first[w]; sum2[(s * G + g) * W + w] = second[w]; }
        }
}

void NAME(dgn_sums)(int64_t N, int64_t S, int64_t G, int64_t W, const REAL *a, const REAL *x,
                    const REAL *grad_out, double *sum1, double *sum2)
{
#define SUMS(w) NAME(dgn_sums_body)(N, S, G, w, a, x, grad_out, sum1, sum2)
    WITH_WIDTH(W, SUMS)
#undef SUMS
}

/* out = x * (1 + sum_g a_g scale_g) + shift_sum: scale (S, G, W), shift_sum (S, W). */
static inline __attribute__((always_inline)) void NAME(dgn_apply_body)(
    int64_t N, int64_t S, int64_t G, int64_t W, const REAL *a, const REAL *x,
    const double *scale, const double *shift_sum, REAL *out)
{
    for (int64_t n = 0; n < N; ++n)
        for (int64_t s = 0; s < S; ++s) {
            double factor[W];
            for (int64_t w = 0; w < W; ++w) factor[w] = 1;
            for (int64_t g = 0; g < G; ++g) {
                const double av = a[(s * G + g) * N + n];
                const double *restrict row = scale + (s * G + g) * W;
#pragma omp simd
                for (int64_t w = 0; w < W; ++w) factor[w] += av * row[w];
            }
            const REAL *restrict xs = x + (n * S + s) * W;
            REAL *restrict os = out + (n * S + s) * W;
            const double *restrict shift = shift_sum + s * W;
#pragma omp simd
            for (int64_t w = 0; w < W; ++w) os[w] = (REAL)((double)xs[w] * factor[w] + shift[w]);
        }
}

void NAME(dgn_apply)(int64_t N, int64_t S, int64_t G, int64_t W, const REAL *a, const REAL *x,
                     const double *scale, const double *shift_sum, REAL *out)
{
#define APPLY(w) NAME(dgn_apply_body)(N, S, G, w, a, x, scale, shift_sum, out)
    WITH_WIDTH(W, APPLY)
#undef APPLY
}

/* Backward of dgn_apply into x and a, in one pass: grad_x (N, S, W) and grad_a (S, G, N),
 * written. Through the factors: grad_x = go (1 + sum_g a_g scale_g), grad_a_g = (go x) .
 * scale_g. With k1, k2 (S, G, W), the gradients of the batch statistics sum1 = sum_n a x
 * and sum2 = sum_n (a x)^2, their terms too: grad_x += sum_g (a k1_g + 2 a^2 x k2_g),
 * grad_a_g += x . (k1_g + 2 a x k2_g). The dot products over w in LANES partial sums. */
static inline __attribute__((always_inline)) void NAME(dgn_backward_body)(
    int64_t N, int64_t S, int64_t G, int64_t W, const REAL *a, const REAL *x,
    const double *scale, const REAL *grad_out, const double *k1, const double *k2,
    REAL *grad_x, REAL *grad_a)
{
    for (int64_t n = 0; n < N; ++n)
        for (int64_t s = 0; s < S; ++s) {
            const REAL *restrict xs = x + (n * S + s) * W, *restrict go = grad_out + (n * S + s) * W;
            double xd[W], gox[W], factor[W], first[W], second[W];
            for (int64_t w = 0; w < W; ++w) {
                xd[w] = xs[w]; gox[w] = (double)go[w] * xd[w];
                factor[w] = 1; first[w] = 0; second[w] = 0;
            }
            for (int64_t g = 0; g < G; ++g) {
                const int64_t sg = s * G + g;
                const double av = a[sg * N + n];
                const double *restrict row = scale + sg * W;
                double lane[LANES] = {0};
                if (k1) {
                    const double *restrict one = k1 + sg * W, *restrict two = k2 + sg * W;
                    FOR_LANES(W, w, l,
                        factor[w] += av * row[w];
                        first[w] += av * one[w];
                        second[w] += av * av * two[w];
                        lane[l] += gox[w] * row[w] + xd[w] * (one[w] + 2 * av * xd[w] * two[w]);
                    );
                } else {
                    FOR_LANES(W, w, l, factor[w] += av * row[w]; lane[l] += gox[w] * row[w];);
                }
                grad_a[sg * N + n] = (REAL)fold_double(lane);
            }
            REAL *restrict out = grad_x + (n * S + s) * W;
#pragma omp simd
            for (int64_t w = 0; w < W; ++w) out[w] = (REAL)((double)go[w] * factor[w] + first[w] + 2 * xd[w] * second[w]);
        }
}

void NAME(dgn_backward)(int64_t N, int64_t S, int64_t G, int64_t W, const REAL *a, const REAL *x,
                        const double *scale, const REAL *grad_out, const double *k1, const double *k2,
                        REAL *grad_x, REAL *grad_a)
{
#define BACKWARD(w) NAME(dgn_backward_body)(N, S, G, w, a, x, scale, grad_out, k1, k2, grad_x, grad_a)
    WITH_WIDTH(W, BACKWARD)
#undef BACKWARD
}
