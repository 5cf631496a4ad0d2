/* GAT attention in one pass per destination node: scores, LipschitzNorm, LeakyReLU,
 * edge softmax, attention dropout and the weighted neighbour sum, forward and backward.
 *
 * Compiled on first use by lipnorm.nn.fused (which documents the contract), once for
 * float and once for double: REAL, SFX, EXP and SQRT are replaced there. Single-threaded: the grids
 * it serves run one thread per job.
 *
 * Layouts: a graph of N nodes and E edges as its in-edge (CSC) index: indptr (N + 1),
 * src (E), eid (E), the edges of destination i at positions indptr[i] .. indptr[i+1].
 * Features node-major (N, G, D), G = S seeds x H heads ("groups"); attention vectors
 * (G, D); per-edge inputs (kept (E, S) bytes, drop (S, E, H)) by edge ID; the saved
 * attention (E, G) by CSC position.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

/* a . b over n values, summed in 8 lanes and then as a tree: the lanes vectorise, and
 * the tree is 3 dependent adds where one running sum is n (D = 16 in the grids). */
static inline REAL dot_SFX(const REAL *restrict a, const REAL *restrict b, int64_t n) {
    REAL lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t d = 0;
    for (; d + 8 <= n; d += 8)
        for (int l = 0; l < 8; ++l) lanes[l] += a[d + l] * b[d + l];
    REAL s = ((lanes[0] + lanes[4]) + (lanes[2] + lanes[6])) + ((lanes[1] + lanes[5]) + (lanes[3] + lanes[7]));
    for (; d < n; ++d) s += a[d] * b[d];
    return s;
}

/* y += w x over n values */
static inline void axpy_SFX(REAL *restrict y, REAL w, const REAL *restrict x, int64_t n) {
#pragma omp simd
    for (int64_t d = 0; d < n; ++d) y[d] += w * x[d];
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

/* Where the dropout multiplier of edge k's head g lies: drop is (S, E, H), seed-major. */
#define DROP_INDEX (((g / heads_per_seed) * indptr[N] + eid[k]) * heads_per_seed + g % heads_per_seed)

/* Forward. Outputs: el, er, sq, maxsq, scale (N, G); argmax (N, G); att (E, G); out (N, G, D). */
static inline __attribute__((always_inline)) void forward_body_SFX(
    COMMON_PARAMETERS
    REAL *el, REAL *er, REAL *sq, REAL *maxsq, REAL *scale, int64_t *argmax,
    REAL *att, REAL *out)
{
    const int64_t H = heads_per_seed, S = G / H;
    for (int64_t n = 0; n < N; ++n)
        for (int64_t g = 0; g < G; ++g) {
            const REAL *x = ft + (n * G + g) * D;
            el[n * G + g] = dot_SFX(attn_l + g * D, x, D);
            er[n * G + g] = dot_SFX(attn_r + g * D, x, D);
            if (lip) sq[n * G + g] = dot_SFX(x, x, D);
        }
    /* per group: row max, row sum, ||a_l||^2 + ||a_r||^2, the row's LipschitzNorm factor */
    REAL *restrict row_max = malloc(sizeof(REAL) * 4 * G), *restrict row_sum = row_max + G, *restrict a2 = row_max + 2 * G,
         *restrict c = row_max + 3 * G;
    int64_t *seed_of = malloc(sizeof(int64_t) * G); /* g / H, not divided per edge */
    for (int64_t g = 0; g < G; ++g) {
        a2[g] = dot_SFX(attn_l + g * D, attn_l + g * D, D) + dot_SFX(attn_r + g * D, attn_r + g * D, D);
        c[g] = 1;
        seed_of[g] = g / H;
    }
    for (int64_t i = 0; i < N; ++i) {
        const int64_t begin = indptr[i], end = indptr[i + 1];
        const REAL *er_i = er + i * G;
        if (lip) {
            /* max over the kept in-neighbours of ||W h_j||^2; 0 (neutral) if none */
            REAL *best = maxsq + i * G;
            int64_t *at = argmax + i * G;
            for (int64_t g = 0; g < G; ++g) { best[g] = 0; at[g] = -1; }
            for (int64_t k = begin; k < end; ++k) {
                const int64_t j = src[k];
                const uint8_t *kp = kept ? kept + eid[k] * S : NULL;
                for (int64_t g = 0; g < G; ++g) {
                    const REAL v = sq[j * G + g];
                    const int larger = (v > best[g]) & (kp ? kp[seed_of[g]] : 1); /* no branch: random */
                    best[g] = larger ? v : best[g];
                    at[g] = larger ? j : at[g];
                }
            }
            for (int64_t g = 0; g < G; ++g) {
                const REAL bound = a2[g] * (sq[i * G + g] + best[g]);
                c[g] = bound <= eps * eps ? 0 : 1 / SQRT(bound);
                scale[i * G + g] = c[g];
            }
        }
        /* scores after the LeakyReLU; -inf for a dropped edge (exp gives 0). Selects, not
         * branches (-fno-trapping-math lets them be): the signs of the scores are random. */
        for (int64_t g = 0; g < G; ++g) { row_max[g] = -INFINITY; row_sum[g] = 0; }
        for (int64_t k = begin; k < end; ++k) {
            const REAL *restrict el_j = el + src[k] * G;
            const uint8_t *kp = kept ? kept + eid[k] * S : NULL;
            REAL *restrict a = att + k * G;
            for (int64_t g = 0; g < G; ++g) {
                REAL z = el_j[g] + er_i[g];
                if (lip) { z = z * c[g]; if (alpha != 1) z = alpha * z; }
                const REAL negative = slope * z;
                REAL e = z > 0 ? z : negative;
                if (kp) e = kp[seed_of[g]] ? e : -INFINITY;
                a[g] = e;
                row_max[g] = e > row_max[g] ? e : row_max[g];
            }
        }
        for (int64_t k = begin; k < end; ++k) {
            REAL *restrict a = att + k * G;
            for (int64_t g = 0; g < G; ++g) {
                const REAL w = EXP(a[g] - row_max[g]);
                a[g] = w;
                row_sum[g] += w;
            }
        }
        REAL *o = out + i * G * D;
        for (int64_t t = 0; t < G * D; ++t) o[t] = 0;
        for (int64_t k = begin; k < end; ++k) {
            const REAL *x = ft + src[k] * G * D;
            REAL *a = att + k * G;
            for (int64_t g = 0; g < G; ++g) {
                a[g] = row_max[g] == -INFINITY ? 0 : a[g] / row_sum[g]; /* 0: no kept in-edge */
                axpy_SFX(o + g * D, drop ? a[g] * drop[DROP_INDEX] : a[g], x + g * D, D);
            }
        }
    }
    free(row_max);
    free(seed_of);
}

/* D = 16 (the grids' hidden size) compiled apart: its dot products and sums unrolled. */
void gat_attention_forward_SFX(
    COMMON_PARAMETERS
    REAL *el, REAL *er, REAL *sq, REAL *maxsq, REAL *scale, int64_t *argmax,
    REAL *att, REAL *out)
{
    if (D == 16) forward_body_SFX(COMMON_ARGUMENTS(16) el, er, sq, maxsq, scale, argmax, att, out);
    else forward_body_SFX(COMMON_ARGUMENTS(D) el, er, sq, maxsq, scale, argmax, att, out);
}

/* Backward: grad_ft (N, G, D), grad_attn_l and grad_attn_r (G, D) are written (not
 * accumulated); work (4 N G + G) is scratch. */
static inline __attribute__((always_inline)) void backward_body_SFX(
    COMMON_PARAMETERS
    const REAL *el, const REAL *er, const REAL *sq, const REAL *maxsq, const REAL *scale, const int64_t *argmax,
    const REAL *att, const REAL *grad_out,
    REAL *grad_ft, REAL *grad_attn_l, REAL *grad_attn_r, REAL *work)
{
    REAL *grad_el = work, *grad_er = work + N * G, *grad_scale = work + 2 * N * G, *grad_sq = work + 3 * N * G;
    REAL *grad_a2 = work + 4 * N * G;
    for (int64_t t = 0; t < 4 * N * G + G; ++t) work[t] = 0;
    for (int64_t t = 0; t < N * G * D; ++t) grad_ft[t] = 0;
    REAL *weighted = malloc(sizeof(REAL) * G);
    int64_t widest = 0;
    for (int64_t i = 0; i < N; ++i) if (indptr[i + 1] - indptr[i] > widest) widest = indptr[i + 1] - indptr[i];
    REAL *grad_att = malloc(sizeof(REAL) * (widest * G + 1)); /* d loss / d attention of the row's edges */
    for (int64_t i = 0; i < N; ++i) {
        const int64_t begin = indptr[i], end = indptr[i + 1];
        const REAL *go = grad_out + i * G * D;
        /* d loss / d attention (after dropout) and the softmax's sum over the row */
        for (int64_t g = 0; g < G; ++g) weighted[g] = 0;
        for (int64_t k = begin; k < end; ++k) {
            const REAL *x = ft + src[k] * G * D;
            REAL *gx = grad_ft + src[k] * G * D;
            for (int64_t g = 0; g < G; ++g) {
                const REAL a = att[k * G + g];
                if (a == 0) { grad_att[(k - begin) * G + g] = 0; continue; } /* dropped: no work */
                const REAL m = drop ? drop[DROP_INDEX] : 1;
                axpy_SFX(gx + g * D, a * m, go + g * D, D);
                const REAL da = m * dot_SFX(go + g * D, x + g * D, D);
                grad_att[(k - begin) * G + g] = da;
                weighted[g] += a * da;
            }
        }
        /* through the softmax and the LeakyReLU (selects, not branches) to the scores */
        for (int64_t k = begin; k < end; ++k) {
            const REAL *restrict el_j = el + src[k] * G, *restrict a = att + k * G, *restrict da = grad_att + (k - begin) * G;
            REAL *restrict grad_el_j = grad_el + src[k] * G;
            for (int64_t g = 0; g < G; ++g) {
                const REAL ds = a[g] * (da[g] - weighted[g]); /* 0 on a dropped edge */
                const REAL raw = el_j[g] + er[i * G + g];
                if (lip) {
                    const REAL cg = scale[i * G + g];
                    REAL z = raw * cg;
                    if (alpha != 1) z = alpha * z;
                    const REAL negative = ds * slope;
                    REAL dz = z > 0 ? ds : negative;
                    if (alpha != 1) dz = alpha * dz;
                    grad_scale[i * G + g] += dz * raw;
                    grad_el_j[g] += dz * cg;
                    grad_er[i * G + g] += dz * cg;
                } else {
                    const REAL negative = ds * slope;
                    const REAL dz = raw > 0 ? ds : negative;
                    grad_el_j[g] += dz;
                    grad_er[i * G + g] += dz;
                }
            }
        }
    }
    free(weighted);
    free(grad_att);
    if (lip) {
        REAL *a2 = malloc(sizeof(REAL) * G);
        for (int64_t g = 0; g < G; ++g)
            a2[g] = dot_SFX(attn_l + g * D, attn_l + g * D, D) + dot_SFX(attn_r + g * D, attn_r + g * D, D);
        for (int64_t i = 0; i < N; ++i)
            for (int64_t g = 0; g < G; ++g) {
                const REAL c = scale[i * G + g];
                if (c == 0) continue;
                /* c = bound^(-1/2): d c / d bound = -c^3 / 2 */
                const REAL grad_bound = grad_scale[i * G + g] * c * c * c * (REAL)-0.5;
                grad_a2[g] += grad_bound * (sq[i * G + g] + maxsq[i * G + g]);
                grad_sq[i * G + g] += grad_bound * a2[g];
                if (argmax[i * G + g] >= 0) grad_sq[argmax[i * G + g] * G + g] += grad_bound * a2[g];
            }
        free(a2);
    }
    for (int64_t g = 0; g < G * D; ++g) { grad_attn_l[g] = 0; grad_attn_r[g] = 0; }
    for (int64_t n = 0; n < N; ++n)
        for (int64_t g = 0; g < G; ++g) {
            const REAL *x = ft + (n * G + g) * D;
            REAL *gx = grad_ft + (n * G + g) * D;
            const REAL gl = grad_el[n * G + g], gr = grad_er[n * G + g], gs = 2 * grad_sq[n * G + g];
            for (int64_t d = 0; d < D; ++d) {
                gx[d] += gl * attn_l[g * D + d] + gr * attn_r[g * D + d] + gs * x[d];
                grad_attn_l[g * D + d] += gl * x[d];
                grad_attn_r[g * D + d] += gr * x[d];
            }
        }
    if (lip)
        for (int64_t g = 0; g < G; ++g)
            for (int64_t d = 0; d < D; ++d) {
                grad_attn_l[g * D + d] += 2 * grad_a2[g] * attn_l[g * D + d];
                grad_attn_r[g * D + d] += 2 * grad_a2[g] * attn_r[g * D + d];
            }
}

void gat_attention_backward_SFX(
    COMMON_PARAMETERS
    const REAL *el, const REAL *er, const REAL *sq, const REAL *maxsq, const REAL *scale, const int64_t *argmax,
    const REAL *att, const REAL *grad_out,
    REAL *grad_ft, REAL *grad_attn_l, REAL *grad_attn_r, REAL *work)
{
    if (D == 16)
        backward_body_SFX(COMMON_ARGUMENTS(16) el, er, sq, maxsq, scale, argmax, att, grad_out, grad_ft, grad_attn_l,
                          grad_attn_r, work);
    else
        backward_body_SFX(COMMON_ARGUMENTS(D) el, er, sq, maxsq, scale, argmax, att, grad_out, grad_ft, grad_attn_l,
                          grad_attn_r, work);
}

#undef COMMON_PARAMETERS
#undef COMMON_ARGUMENTS
#undef DROP_INDEX

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
            for (int64_t i = 0; i < I; ++i) axpy_SFX(o, xs[i], weight_t + (s * I + i) * O, O);
        }
}

void grouped_linear_forward_SFX(int64_t N, int64_t S, int64_t I, int64_t O,
                                const REAL *restrict x, const REAL *restrict weight_t, REAL *restrict out)
{
    if (I == 16 && O == 16) linear_forward_body_SFX(N, S, 16, 16, x, weight_t, out);
    else linear_forward_body_SFX(N, S, I, O, x, weight_t, out);
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
                axpy_SFX(gx, go[o], weight + (s * O + o) * I, I);
                axpy_SFX(grad_weight + (s * O + o) * I, go[o], xs, I);
            }
        }
}

void grouped_linear_backward_SFX(int64_t N, int64_t S, int64_t I, int64_t O,
                                 const REAL *restrict x, const REAL *restrict weight, const REAL *restrict grad_out,
                                 REAL *restrict grad_x, REAL *restrict grad_weight)
{
    if (I == 16 && O == 16) linear_backward_body_SFX(N, S, 16, 16, x, weight, grad_out, grad_x, grad_weight);
    else linear_backward_body_SFX(N, S, I, O, x, weight, grad_out, grad_x, grad_weight);
}
