/* lipnorm's compiled CPU kernels (lipnorm.nn.fused documents their contracts): GAT's
 * attention in one pass per destination node (scores, LipschitzNorm, LeakyReLU, edge
 * softmax, attention dropout and the weighted neighbour sum, forward and backward), the
 * seeds' per-seed projections, and DGN's sum of its groups' BatchNorms.
 *
 * Compiled on first use by lipnorm.nn.fused, once for float and once for double: REAL,
 * SFX, EXP, SQRT and FMA are replaced there. Single-threaded: the grids they serve run
 * one thread per job.
 *
 * Layouts: a graph of N nodes and E edges as its in-edge (CSC) index: indptr (N + 1),
 * src (E), eid (E), the edges of destination i at positions indptr[i] .. indptr[i+1].
 * Features node-major (N, G, D), G = S seeds x H heads ("groups"); attention vectors
 * (G, D); per-edge inputs (kept (E, S) bytes, drop (S, E, H)) by edge ID; what the
 * forward keeps for the backward group-major, the attention (G, E) by CSC position.
 */
#include <math.h>
#include <stdint.h>

#ifndef LIPNORM_GRID_SIZES
#define LIPNORM_GRID_SIZES
/* CALL(size) with the grids' sizes compiled apart, their loops over the features unrolled:
 * 16 (the hidden layers' width), 7 and 6 (the output layer's on Cora and CiteSeer, for
 * which loops over a runtime size took about twice a hidden layer's time). */
#define FOR_GRID_SIZES(size, CALL) \
    switch (size) { case 16: CALL(16); break; case 7: CALL(7); break; case 6: CALL(6); break; default: CALL(size); }
#endif

/* The attention's a . b and y += w x over n values, in SIMD lanes, with fused multiply-adds. */
static inline REAL dot_SFX(const REAL *restrict a, const REAL *restrict b, int64_t n) {
    REAL s = 0;
#pragma omp simd reduction(+:s)
    for (int64_t d = 0; d < n; ++d) s = FMA(a[d], b[d], s);
    return s;
}
static inline void axpy_SFX(REAL *restrict y, REAL w, const REAL *restrict x, int64_t n) {
#pragma omp simd
    for (int64_t d = 0; d < n; ++d) y[d] = FMA(w, x[d], y[d]);
}

/* The projections' y += w x, each product rounded before its sum (as checked against
 * separate runs to 1e-5). */
static inline void axpy_rounded_SFX(REAL *restrict y, REAL w, const REAL *restrict x, int64_t n) {
#pragma omp simd
    for (int64_t d = 0; d < n; ++d) y[d] += w * x[d];
}
#ifndef LIPNORM_EXP_POLY
#define LIPNORM_EXP_POLY
/* exp(x) in float to about 1 ulp (Cephes' expf: 2^n times a degree-7 polynomial of the
 * rest), written without branches or calls so that a loop of it runs in SIMD lanes, where
 * libm's expf is one call per value. Below -87.34 it gives 0 (libm: denormals, which
 * weigh nothing beside the softmax's largest term, exp(0) = 1); NaN stays NaN. */
static inline float exp_poly(float x) {
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
#endif

/* Brings values[0 .. n) towards the cache in order: what is then read at random (by edge
 * ID) no longer waits for memory each time. */
static inline void prefetch_SFX(const REAL *values, int64_t n) {
    for (int64_t t = 0; t < n; t += 64 / sizeof(REAL)) __builtin_prefetch(values + t);
}

/* The arguments both functions take: sizes, graph, inputs, options. */
#define COMMON_PARAMETERS \
    int64_t N, int64_t G, int64_t D, int64_t heads_per_seed, \
    const int64_t *indptr, const int64_t *src, const int64_t *eid, \
    const REAL *ft, const REAL *attn_l, const REAL *attn_r, \
    const uint8_t *kept, const REAL *drop, \
    int lip, REAL alpha, REAL eps, REAL slope,

/* The same arguments passed on, with the feature size d (a constant where specialised). */
#define COMMON_ARGUMENTS(d) \
    N, G, d, heads_per_seed, indptr, src, eid, ft, attn_l, attn_r, kept, drop, lip, alpha, eps, slope,

/* Both passes loop over the groups outermost: group g's slice of the features (N rows of
 * D values, 1/G of them) stays in the core's cache while its edges gather from it, where
 * all G groups' rows together would not (Cora with 5 seeds: 0.9 MB). Per group, the
 * dropout multiplier of edge k is drop[drop_base + eid[k] H] (drop is (S, E, H)) and the
 * edge is kept where kept[eid[k] S + s] (kept is (E, S)), s = g / H its seed. */

/* Forward. Outputs, group-major: el, er, sq, maxsq, scale (G, N); argmax (G, N); att (G, E)
 * by CSC position; out (N, G, D). */
static inline __attribute__((always_inline)) void forward_body_SFX(
    COMMON_PARAMETERS
    REAL *el, REAL *er, REAL *sq, REAL *maxsq, REAL *scale, int64_t *argmax,
    REAL *att, REAL *out)
{
    const int64_t H = heads_per_seed, S = G / H, E = indptr[N];
    for (int64_t g = 0; g < G; ++g) {
        const int64_t seed = g / H, drop_base = seed * E * H + g % H;
        const REAL *restrict al = attn_l + g * D, *restrict ar = attn_r + g * D;
        REAL *restrict el_g = el + g * N, *restrict er_g = er + g * N, *restrict sq_g = sq + g * N;
        REAL *restrict att_g = att + g * E;
        for (int64_t n = 0; n < N; ++n) {
            const REAL *x = ft + (n * G + g) * D;
            el_g[n] = dot_SFX(al, x, D);
            er_g[n] = dot_SFX(ar, x, D);
            if (lip) sq_g[n] = dot_SFX(x, x, D);
        }
        const REAL a2 = dot_SFX(al, al, D) + dot_SFX(ar, ar, D); /* ||a_l||^2 + ||a_r||^2 */
        if (drop && g % H == 0) prefetch_SFX(drop + seed * E * H, E * H); /* the seed's multipliers */
        for (int64_t i = 0; i < N; ++i) {
            const int64_t begin = indptr[i], end = indptr[i + 1];
            REAL c = 1; /* the row's LipschitzNorm factor */
            if (lip) {
                /* max over the kept in-neighbours of ||W h_j||^2; 0 (neutral) if none */
                REAL best = 0;
                int64_t at = -1;
                for (int64_t k = begin; k < end; ++k) {
                    const int64_t j = src[k];
                    const REAL v = sq_g[j];
                    const int larger = (v > best) & (kept ? kept[eid[k] * S + seed] : 1); /* no branch: random */
                    best = larger ? v : best;
                    at = larger ? j : at;
                }
                const REAL bound = a2 * (sq_g[i] + best);
                c = bound <= eps * eps ? 0 : 1 / SQRT(bound);
                scale[g * N + i] = c;
                maxsq[g * N + i] = best;
                argmax[g * N + i] = at;
            }
            /* scores after the LeakyReLU, less the row's largest; -inf for a dropped edge
             * and for every edge of a row without a kept edge (exp gives 0). Selects, not
             * branches (-fno-trapping-math lets them be): the signs of the scores are random. */
            const REAL er_i = er_g[i];
            REAL row_max = -INFINITY;
            for (int64_t k = begin; k < end; ++k) {
                REAL z = el_g[src[k]] + er_i;
                if (lip) { z = z * c; if (alpha != 1) z = alpha * z; }
                const REAL negative = slope * z;
                REAL e = z > 0 ? z : negative;
                if (kept) e = kept[eid[k] * S + seed] ? e : -INFINITY;
                att_g[k] = e;
                row_max = e > row_max ? e : row_max;
            }
            for (int64_t k = begin; k < end; ++k) att_g[k] = row_max == -INFINITY ? -INFINITY : att_g[k] - row_max;
        }
        /* the exponentials of the whole group in one sweep, in SIMD lanes */
#pragma omp simd
        for (int64_t k = 0; k < E; ++k) att_g[k] = EXP(att_g[k]);
        /* the softmax's sums and the weighted neighbour sum, a row at a time */
        for (int64_t i = 0; i < N; ++i) {
            const int64_t begin = indptr[i], end = indptr[i + 1];
            REAL row_sum = 0;
            for (int64_t k = begin; k < end; ++k) row_sum += att_g[k];
            REAL sum[D]; /* in registers, where out's row would be loaded and stored per edge */
            for (int64_t d = 0; d < D; ++d) sum[d] = 0;
            for (int64_t k = begin; k < end; ++k) {
                const REAL a = row_sum == 0 ? 0 : att_g[k] / row_sum; /* 0: no kept in-edge */
                att_g[k] = a;
                axpy_SFX(sum, drop ? a * drop[drop_base + eid[k] * H] : a, ft + (src[k] * G + g) * D, D);
            }
            REAL *restrict o = out + (i * G + g) * D;
            for (int64_t d = 0; d < D; ++d) o[d] = sum[d];
        }
    }
}

/* The grids' sizes D compiled apart (FOR_GRID_SIZES). */
void gat_attention_forward_SFX(
    COMMON_PARAMETERS
    REAL *el, REAL *er, REAL *sq, REAL *maxsq, REAL *scale, int64_t *argmax,
    REAL *att, REAL *out)
{
#define FORWARD(d) forward_body_SFX(COMMON_ARGUMENTS(d) el, er, sq, maxsq, scale, argmax, att, out)
    FOR_GRID_SIZES(D, FORWARD)
#undef FORWARD
}

/* Backward: grad_ft (N, G, D), grad_attn_l and grad_attn_r (G, D) are written (not
 * accumulated); work (4 N + widest in-degree + 1) is scratch. */
static inline __attribute__((always_inline)) void backward_body_SFX(
    COMMON_PARAMETERS
    const REAL *el, const REAL *er, const REAL *sq, const REAL *maxsq, const REAL *scale, const int64_t *argmax,
    const REAL *att, const REAL *grad_out,
    REAL *grad_ft, REAL *grad_attn_l, REAL *grad_attn_r, REAL *work)
{
    const int64_t H = heads_per_seed, E = indptr[N];
    /* d loss / d (el, er, LipschitzNorm factor, ||W h||^2) of group g's nodes, and of its
     * row's attention (after dropout) */
    REAL *restrict grad_el = work, *restrict grad_er = work + N, *restrict grad_scale = work + 2 * N,
         *restrict grad_sq = work + 3 * N, *restrict grad_att = work + 4 * N;
    for (int64_t g = 0; g < G; ++g) {
        /* Group g's rows of the features and of their gradient, in order before the edges
         * gather from them at random: a stream the prefetcher follows, where the gathers
         * would each wait for memory (the backward finds them long evicted). */
        for (int64_t n = 0; n < N; ++n) {
            __builtin_prefetch(ft + (n * G + g) * D);
            for (int64_t d = 0; d < D; ++d) grad_ft[(n * G + g) * D + d] = 0;
        }
        if (drop && g % H == 0) prefetch_SFX(drop + (g / H) * E * H, E * H);
        const int64_t drop_base = (g / H) * E * H + g % H;
        const REAL *restrict al = attn_l + g * D, *restrict ar = attn_r + g * D;
        const REAL *restrict el_g = el + g * N, *restrict er_g = er + g * N, *restrict att_g = att + g * E;
        const REAL *restrict scale_g = scale + g * N;
        REAL *gl_out = grad_attn_l + g * D, *gr_out = grad_attn_r + g * D;
        for (int64_t t = 0; t < 4 * N; ++t) work[t] = 0;
        for (int64_t i = 0; i < N; ++i) {
            const int64_t begin = indptr[i], end = indptr[i + 1];
            REAL go[D]; /* the row's output gradient, in registers */
            for (int64_t d = 0; d < D; ++d) go[d] = grad_out[(i * G + g) * D + d];
            /* d loss / d attention and the softmax's sum over the row */
            REAL weighted = 0;
            for (int64_t k = begin; k < end; ++k) {
                const REAL a = att_g[k];
                if (a == 0) { grad_att[k - begin] = 0; continue; } /* dropped: no work */
                const int64_t j = src[k];
                const REAL m = drop ? drop[drop_base + eid[k] * H] : 1;
                axpy_SFX(grad_ft + (j * G + g) * D, a * m, go, D);
                const REAL da = m * dot_SFX(go, ft + (j * G + g) * D, D);
                grad_att[k - begin] = da;
                weighted += a * da;
            }
            /* through the softmax and the LeakyReLU (selects, not branches) to the scores */
            const REAL er_i = er_g[i];
            REAL grad_er_i = 0, grad_scale_i = 0;
            const REAL cg = lip ? scale_g[i] : 1;
            for (int64_t k = begin; k < end; ++k) {
                const int64_t j = src[k];
                const REAL ds = att_g[k] * (grad_att[k - begin] - weighted); /* 0 on a dropped edge */
                const REAL raw = el_g[j] + er_i;
                if (lip) {
                    REAL z = raw * cg;
                    if (alpha != 1) z = alpha * z;
                    const REAL negative = ds * slope;
                    REAL dz = z > 0 ? ds : negative;
                    if (alpha != 1) dz = alpha * dz;
                    grad_scale_i += dz * raw;
                    grad_el[j] += dz * cg;
                    grad_er_i += dz * cg;
                } else {
                    const REAL negative = ds * slope;
                    const REAL dz = raw > 0 ? ds : negative;
                    grad_el[j] += dz;
                    grad_er_i += dz;
                }
            }
            grad_er[i] += grad_er_i;
            grad_scale[i] += grad_scale_i;
        }
        REAL grad_a2 = 0;
        if (lip) {
            const REAL a2 = dot_SFX(al, al, D) + dot_SFX(ar, ar, D);
            const REAL *restrict sq_g = sq + g * N, *restrict maxsq_g = maxsq + g * N;
            const int64_t *restrict argmax_g = argmax + g * N;
            for (int64_t i = 0; i < N; ++i) {
                const REAL c = scale_g[i];
                if (c == 0) continue;
                /* c = bound^(-1/2): d c / d bound = -c^3 / 2 */
                const REAL grad_bound = grad_scale[i] * c * c * c * (REAL)-0.5;
                grad_a2 += grad_bound * (sq_g[i] + maxsq_g[i]);
                grad_sq[i] += grad_bound * a2;
                if (argmax_g[i] >= 0) grad_sq[argmax_g[i]] += grad_bound * a2;
            }
        }
        REAL sum_l[D], sum_r[D];
        for (int64_t d = 0; d < D; ++d) { sum_l[d] = 2 * grad_a2 * al[d]; sum_r[d] = 2 * grad_a2 * ar[d]; }
        for (int64_t n = 0; n < N; ++n) {
            const REAL *restrict x = ft + (n * G + g) * D;
            REAL *restrict gx = grad_ft + (n * G + g) * D;
            const REAL gl = grad_el[n], gr = grad_er[n], gs = 2 * grad_sq[n];
#pragma omp simd
            for (int64_t d = 0; d < D; ++d) {
                gx[d] += gl * al[d] + gr * ar[d] + gs * x[d];
                sum_l[d] += gl * x[d];
                sum_r[d] += gr * x[d];
            }
        }
        for (int64_t d = 0; d < D; ++d) { gl_out[d] = sum_l[d]; gr_out[d] = sum_r[d]; }
    }
}

void gat_attention_backward_SFX(
    COMMON_PARAMETERS
    const REAL *el, const REAL *er, const REAL *sq, const REAL *maxsq, const REAL *scale, const int64_t *argmax,
    const REAL *att, const REAL *grad_out,
    REAL *grad_ft, REAL *grad_attn_l, REAL *grad_attn_r, REAL *work)
{
#define BACKWARD(d) backward_body_SFX(COMMON_ARGUMENTS(d) el, er, sq, maxsq, scale, argmax, att, grad_out, grad_ft, \
                                      grad_attn_l, grad_attn_r, work)
    FOR_GRID_SIZES(D, BACKWARD)
#undef BACKWARD
}

#undef COMMON_PARAMETERS
#undef COMMON_ARGUMENTS

/* Per-group linear maps on node-major features: out[n, s] = W[s] x[n, s] for x (N, S, I),
 * W (S, O, I), out (N, S, O); weight_t is W transposed, (S, I, O). The seeds' projections
 * of a layer, without the copies a batched product over (S, N, I) needs both ways. */
static inline __attribute__((always_inline)) void linear_forward_body_SFX(int64_t N, int64_t S, int64_t I, int64_t O,
                                const REAL *restrict x, const REAL *restrict weight_t, REAL *restrict out)
{
    for (int64_t n = 0; n < N; ++n)
        for (int64_t s = 0; s < S; ++s) {
            REAL *restrict o = out + (n * S + s) * O;
            const REAL *restrict xs = x + (n * S + s) * I;
            for (int64_t t = 0; t < O; ++t) o[t] = 0;
            for (int64_t i = 0; i < I; ++i) axpy_rounded_SFX(o, xs[i], weight_t + (s * I + i) * O, O);
        }
}

void grouped_linear_forward_SFX(int64_t N, int64_t S, int64_t I, int64_t O,
                                const REAL *restrict x, const REAL *restrict weight_t, REAL *restrict out)
{
    /* from the hidden width I = 16 to the grids' sizes (FOR_GRID_SIZES) compiled apart */
#define FORWARD(o) linear_forward_body_SFX(N, S, I, o, x, weight_t, out)
#define FROM_HIDDEN(o) if (I == 16) linear_forward_body_SFX(N, S, 16, o, x, weight_t, out); else FORWARD(o)
    FOR_GRID_SIZES(O, FROM_HIDDEN)
#undef FROM_HIDDEN
#undef FORWARD
}

/* grad_x (N, S, I) and grad_weight (S, O, I), written. */
static inline __attribute__((always_inline)) void linear_backward_body_SFX(int64_t N, int64_t S, int64_t I, int64_t O,
                                 const REAL *restrict x, const REAL *restrict weight, const REAL *restrict grad_out,
                                 REAL *restrict grad_x, REAL *restrict grad_weight)
{
    for (int64_t t = 0; t < S * O * I; ++t) grad_weight[t] = 0;
    for (int64_t n = 0; n < N; ++n)
        for (int64_t s = 0; s < S; ++s) {
            const REAL *restrict go = grad_out + (n * S + s) * O;
            const REAL *restrict xs = x + (n * S + s) * I;
            REAL *restrict gx = grad_x + (n * S + s) * I;
            for (int64_t i = 0; i < I; ++i) gx[i] = 0;
            for (int64_t o = 0; o < O; ++o) {
                axpy_rounded_SFX(gx, go[o], weight + (s * O + o) * I, I);
                axpy_rounded_SFX(grad_weight + (s * O + o) * I, go[o], xs, I);
            }
        }
}

void grouped_linear_backward_SFX(int64_t N, int64_t S, int64_t I, int64_t O,
                                 const REAL *restrict x, const REAL *restrict weight, const REAL *restrict grad_out,
                                 REAL *restrict grad_x, REAL *restrict grad_weight)
{
#define BACKWARD(o) linear_backward_body_SFX(N, S, I, o, x, weight, grad_out, grad_x, grad_weight)
#define FROM_HIDDEN(o) if (I == 16) linear_backward_body_SFX(N, S, 16, o, x, weight, grad_out, grad_x, grad_weight); \
                       else BACKWARD(o)
    FOR_GRID_SIZES(O, FROM_HIDDEN)
#undef FROM_HIDDEN
#undef BACKWARD
}

/* DGN's output x + lambda sum_g BatchNorm(a_g * x) for S sets side by side
 * (lipnorm.nn.norm.dgn.dgn_output has the formulas): a (S, G, N), x (N, S, W) node-major,
 * per (s, g, w) statistics and factors in double (their terms can cancel: a column of
 * near-constant features), lambda folded into the factors by the caller. A sum over the
 * nodes per (s, g) runs with its W sums in registers (g outer, n inner); a per-node
 * result with its W values in registers (n outer). The grids' widths compiled apart (FOR_GRID_SIZES). */

/* sum1 = sum_n a x and sum2 = sum_n (a x)^2, each (S, G, W), written; where grad_out is
 * given, the backward's sums instead: sum1 = sum_n a x grad_out, sum2 = sum_n grad_out
 * (the same for every g). */
static inline __attribute__((always_inline)) void dgn_sums_body_SFX(
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

void dgn_sums_SFX(int64_t N, int64_t S, int64_t G, int64_t W, const REAL *a, const REAL *x,
                  const REAL *grad_out, double *sum1, double *sum2)
{
#define SUMS(w) dgn_sums_body_SFX(N, S, G, w, a, x, grad_out, sum1, sum2)
    FOR_GRID_SIZES(W, SUMS)
#undef SUMS
}

/* out = x * (1 + sum_g a_g scale_g) + shift_sum: scale (S, G, W), shift_sum (S, W). */
static inline __attribute__((always_inline)) void dgn_apply_body_SFX(
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

void dgn_apply_SFX(int64_t N, int64_t S, int64_t G, int64_t W, const REAL *a, const REAL *x,
                   const double *scale, const double *shift_sum, REAL *out)
{
#define APPLY(w) dgn_apply_body_SFX(N, S, G, w, a, x, scale, shift_sum, out)
    FOR_GRID_SIZES(W, APPLY)
#undef APPLY
}

/* Backward of dgn_apply into x and a, in one pass: grad_x (N, S, W) and grad_a (S, G, N),
 * written. Through the factors: grad_x = go (1 + sum_g a_g scale_g), grad_a_g = (go x) .
 * scale_g. With k1, k2 (S, G, W), the gradients of the batch statistics sum1 = sum_n a x
 * and sum2 = sum_n (a x)^2, their terms too: grad_x += sum_g (a k1_g + 2 a^2 x k2_g),
 * grad_a_g += x . (k1_g + 2 a x k2_g). */
static inline __attribute__((always_inline)) void dgn_backward_body_SFX(
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
                double da = 0;
                if (k1) {
                    const double *restrict one = k1 + sg * W, *restrict two = k2 + sg * W;
#pragma omp simd reduction(+:da)
                    for (int64_t w = 0; w < W; ++w) {
                        factor[w] += av * row[w];
                        first[w] += av * one[w];
                        second[w] += av * av * two[w];
                        da += gox[w] * row[w] + xd[w] * (one[w] + 2 * av * xd[w] * two[w]);
                    }
                } else {
#pragma omp simd reduction(+:da)
                    for (int64_t w = 0; w < W; ++w) {
                        factor[w] += av * row[w];
                        da += gox[w] * row[w];
                    }
                }
                grad_a[sg * N + n] = (REAL)da;
            }
            REAL *restrict out = grad_x + (n * S + s) * W;
#pragma omp simd
            for (int64_t w = 0; w < W; ++w) out[w] = (REAL)((double)go[w] * factor[w] + first[w] + 2 * xd[w] * second[w]);
        }
}

void dgn_backward_SFX(int64_t N, int64_t S, int64_t G, int64_t W, const REAL *a, const REAL *x,
                      const double *scale, const REAL *grad_out, const double *k1, const double *k2,
                      REAL *grad_x, REAL *grad_a)
{
#define BACKWARD(w) dgn_backward_body_SFX(N, S, G, w, a, x, scale, grad_out, k1, k2, grad_x, grad_a)
    FOR_GRID_SIZES(W, BACKWARD)
#undef BACKWARD
}

/* PairNorm "PN" for S sets side by side (lipnorm.nn.norm.pairnorm.pairnorm_pn has the
 * formulas): x (N, S, W) node-major; each set's column means (S, W) and its inverse scale
 * 1 / sqrt(eps + mean_n ||x_n - mean||^2) (S) in double, its centred squares summed after
 * the mean is known (the rows of a deep network's layer can be all but equal: the squares
 * of the raw values would cancel). Writes mean, inv and out = scale (x - mean) inv. */
static inline __attribute__((always_inline)) void pairnorm_forward_body_SFX(
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
        double sum = 0;
        for (int64_t n = 0; n < N; ++n) {
            const REAL *restrict row = x + n * C + s * W;
            const double *restrict mu = mean + s * W;
#pragma omp simd reduction(+:sum)
            for (int64_t w = 0; w < W; ++w) { const double d = row[w] - mu[w]; sum += d * d; }
        }
        inv[s] = 1 / sqrt(eps + sum / N);
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
static inline __attribute__((always_inline)) void pairnorm_backward_body_SFX(
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
            double dot = 0;
#pragma omp simd reduction(+:dot)
            for (int64_t w = 0; w < W; ++w) { gm[w] += g[w]; dot += g[w] * (row[w] - mu[w]); }
            k[s] += dot;
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

/* The grids' widths compiled apart (FOR_GRID_SIZES). */
void pairnorm_forward_SFX(int64_t N, int64_t S, int64_t W, const REAL *x, double scale, double eps,
                          double *mean, double *inv, REAL *out)
{
#define FORWARD(w) pairnorm_forward_body_SFX(N, S, w, x, scale, eps, mean, inv, out)
    FOR_GRID_SIZES(W, FORWARD)
#undef FORWARD
}

void pairnorm_backward_SFX(int64_t N, int64_t S, int64_t W, const REAL *x, const REAL *grad_out, double scale,
                           const double *mean, const double *inv, double *work, REAL *grad_x)
{
#define BACKWARD(w) pairnorm_backward_body_SFX(N, S, w, x, grad_out, scale, mean, inv, work, grad_x)
    FOR_GRID_SIZES(W, BACKWARD)
#undef BACKWARD
}
