/* Fixed-order reductions of one type (REAL, SFX, FMA: kernels.c). Included once per type. */

/* lane[0] + ... + lane[LANES - 1], folded in halves: (0 + 4, 1 + 5, 2 + 6, 3 + 7), then
 * (0 + 2, 1 + 3), then 0 + 1 (a vector's horizontal sum, written out). */
static inline REAL NAME(fold)(REAL lane[LANES]) {
    for (int l = 0; l < 4; ++l) lane[l] += lane[l + 4];
    for (int l = 0; l < 2; ++l) lane[l] += lane[l + 2];
    return lane[0] + lane[1];
}

/* a . b over n values: product d fused into lane d % LANES, in order of d, lanes folded. */
static inline REAL NAME(dot)(const REAL *restrict a, const REAL *restrict b, int64_t n) {
    REAL lane[LANES] = {0};
    FOR_LANES(n, d, l, lane[l] = FMA(a[d], b[d], lane[l]););
    return NAME(fold)(lane);
}

/* y += w x over n values, fused. */
static inline void NAME(axpy)(REAL *restrict y, REAL w, const REAL *restrict x, int64_t n) {
#pragma omp simd
    for (int64_t d = 0; d < n; ++d) y[d] = FMA(w, x[d], y[d]);
}

/* y += w x over n values, each product rounded before its sum (as torch's projections,
 * which the seeds' projections are checked against). */
static inline void NAME(axpy_rounded)(REAL *restrict y, REAL w, const REAL *restrict x, int64_t n) {
#pragma omp simd
    for (int64_t d = 0; d < n; ++d) y[d] += w * x[d];
}
