/* PairNorm "PN" for S sets side by side, of one type (kernels.c;
 * lipnorm.nn.norm.pairnorm.pairnorm_pn has the formulas): x (N, S, W) node-major; each
 * set's column means (S, W) and its inverse scale 1 / sqrt(eps + mean_n ||x_n - mean||^2)
 * (S) in double, its centred squares summed after the mean is known (the rows of a deep
 * network's layer can be all but equal: the squares of the raw values would cancel).
 * Writes mean, inv and out = scale (x - mean) inv. Sums over w in LANES partial sums. */
static inline __attribute__((always_inline)) void NAME(pairnorm_forward_body)(
    int64_t N, int64_t S, int64_t W, const REAL *x, double scale, double eps, double *mean, double *inv, REAL *out)
{
    const int64_t C = S * W;
    for (int64_t c = 0; c < C; ++c) mean[c] = 0;
    for (int64_t n = 0; n < N; ++n) {
        const REAL *restrict row = x + n * C;
#pragma omp simd
        for (int64_t c = 0; c < C; ++c) mean[c] += row[c];
    }
    for (int64_t c = 0; c < C; ++c) mean[c] /= N;
    for (int64_t s = 0; s < S; ++s) {
        double lane[LANES] = {0};
        const double *restrict mu = mean + s * W;
        for (int64_t n = 0; n < N; ++n) {
            const REAL *restrict row = x + n * C + s * W;
            FOR_LANES(W, w, l, const double d = row[w] - mu[w]; lane[l] += d * d;);
        }
        inv[s] = 1 / sqrt(eps + fold_double(lane) / N);
    }
    for (int64_t n = 0; n < N; ++n)
        for (int64_t s = 0; s < S; ++s) {
            const REAL *restrict row = x + n * C + s * W;
            REAL *restrict o = out + n * C + s * W;
            const double *restrict mu = mean + s * W;
            const double factor = scale * inv[s];
#pragma omp simd
            for (int64_t w = 0; w < W; ++w) o[w] = (REAL)((row[w] - mu[w]) * factor);
        }
}

/* Its backward: with c = x - mean, g = grad_out and k = sum_n g . c per set,
 * grad_x = scale inv (g - mean_n g) - scale k inv^3 / N c (the mean of c over the nodes is 0). */
static inline __attribute__((always_inline)) void NAME(pairnorm_backward_body)(
    int64_t N, int64_t S, int64_t W, const REAL *x, const REAL *grad_out, double scale,
    const double *mean, const double *inv, double *work, REAL *grad_x)
{
    const int64_t C = S * W;
    double *restrict grad_mean = work, *restrict k = work + C; /* (S, W), (S) */
    for (int64_t c = 0; c < C; ++c) grad_mean[c] = 0;
    for (int64_t s = 0; s < S; ++s) k[s] = 0;
    for (int64_t n = 0; n < N; ++n)
        for (int64_t s = 0; s < S; ++s) {
            const REAL *restrict row = x + n * C + s * W, *restrict g = grad_out + n * C + s * W;
            const double *restrict mu = mean + s * W;
            double *restrict gm = grad_mean + s * W;
            double lane[LANES] = {0};
            FOR_LANES(W, w, l, gm[w] += g[w]; lane[l] += g[w] * (row[w] - mu[w]););
            k[s] += fold_double(lane);
        }
    for (int64_t c = 0; c < C; ++c) grad_mean[c] /= N;
    for (int64_t n = 0; n < N; ++n)
        for (int64_t s = 0; s < S; ++s) {
            const REAL *restrict row = x + n * C + s * W, *restrict g = grad_out + n * C + s * W;
            const double *restrict mu = mean + s * W, *restrict gm = grad_mean + s * W;
            REAL *restrict out = grad_x + n * C + s * W;
            const double direct = scale * inv[s], through_inv = scale * k[s] * inv[s] * inv[s] * inv[s] / N;
#pragma omp simd
            for (int64_t w = 0; w < W; ++w) out[w] = (REAL)(direct * (g[w] - gm[w]) - through_inv * (row[w] - mu[w]));
        }
}

void NAME(pairnorm_forward)(int64_t N, int64_t S, int64_t W, const REAL *x, double scale, double eps,
                            double *mean, double *inv, REAL *out)
{
#define FORWARD(w) NAME(pairnorm_forward_body)(N, S, w, x, scale, eps, mean, inv, out)
    WITH_WIDTH(W, FORWARD)
#undef FORWARD
}

void NAME(pairnorm_backward)(int64_t N, int64_t S, int64_t W, const REAL *x, const REAL *grad_out, double scale,
                             const double *mean, const double *inv, double *work, REAL *grad_x)
{
#define BACKWARD(w) NAME(pairnorm_backward_body)(N, S, w, x, grad_out, scale, mean, inv, work, grad_x)
    WITH_WIDTH(W, BACKWARD)
#undef BACKWARD
}
