/* GAT's attention in one pass per destination node, forward and backward, of one type
 * (REAL, SFX, EXP, SQRT, FMA: kernels.c): scores, LipschitzNorm, LeakyReLU, edge softmax,
 * attention dropout and the weighted neighbour sum. lipnorm.kernels documents the contract.
 *
 * Layouts: a graph of N nodes and E edges as its in-edge (CSC) index: indptr (N + 1),
 * src (E), eid (E), the edges of destination i at positions indptr[i] .. indptr[i+1].
 * Features node-major (N, G, D), G = S seeds x H heads ("groups"); attention vectors
 * (G, D); per-edge inputs (kept (E, S) bytes, drop (S, E, H)) by edge ID; what the
 * forward keeps for the backward group-major, the attention (G, E) by CSC position.
 *
 * Both passes loop over the groups outermost: group g's slice of the features (N rows of
 * D values, 1/G of them) stays in the core's cache while its edges gather from it. Per
 * group, the dropout multiplier of edge k is drop[drop_base + eid[k] H] and the edge is
 * kept where kept[eid[k] S + s], s = g / H its seed.
 */

/* Brings values[0 .. n) towards the cache in order: what is then read at random (by edge
 * ID) no longer waits for memory each time. */
static inline void NAME(prefetch)(const REAL *values, int64_t n) {
    for (int64_t t = 0; t < n; t += 64 / sizeof(REAL)) __builtin_prefetch(values + t);
}

/* The arguments both passes take: sizes, graph, inputs, options. */
#define ATTENTION_PARAMETERS \
    int64_t N, int64_t G, int64_t D, int64_t heads_per_seed, \
    const int64_t *indptr, const int64_t *src, const int64_t *eid, \
    const REAL *ft, const REAL *attn_l, const REAL *attn_r, \
    const uint8_t *kept, const REAL *drop, \
    int lip, REAL alpha, REAL eps, REAL slope,

/* The same arguments passed on, with the width d (a constant where specialised). */
#define ATTENTION_ARGUMENTS(d) \
    N, G, d, heads_per_seed, indptr, src, eid, ft, attn_l, attn_r, kept, drop, lip, alpha, eps, slope,

/* Forward. Outputs, group-major: el, er, sq, maxsq, scale (G, N); argmax (G, N); att (G, E)
 * by CSC position; out (N, G, D). */
static inline __attribute__((always_inline)) void NAME(attention_forward_body)(
    ATTENTION_PARAMETERS
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
            el_g[n] = NAME(dot)(al, x, D);
            er_g[n] = NAME(dot)(ar, x, D);
            if (lip) sq_g[n] = NAME(dot)(x, x, D);
        }
        const REAL a2 = NAME(dot)(al, al, D) + NAME(dot)(ar, ar, D); /* ||a_l||^2 + ||a_r||^2 */
        if (drop && g % H == 0) NAME(prefetch)(drop + seed * E * H, E * H); /* the seed's multipliers */
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
                NAME(axpy)(sum, drop ? a * drop[drop_base + eid[k] * H] : a, ft + (src[k] * G + g) * D, D);
            }
            REAL *restrict o = out + (i * G + g) * D;
            for (int64_t d = 0; d < D; ++d) o[d] = sum[d];
        }
    }
}

void NAME(gat_attention_forward)(
    ATTENTION_PARAMETERS
    REAL *el, REAL *er, REAL *sq, REAL *maxsq, REAL *scale, int64_t *argmax,
    REAL *att, REAL *out)
{
#define FORWARD(d) NAME(attention_forward_body)(ATTENTION_ARGUMENTS(d) el, er, sq, maxsq, scale, argmax, att, out)
    WITH_WIDTH(D, FORWARD)
#undef FORWARD
}

/* Backward: grad_ft (N, G, D), grad_attn_l and grad_attn_r (G, D) are written (not
 * accumulated); work (4 N + widest in-degree + 1) is scratch. */
static inline __attribute__((always_inline)) void NAME(attention_backward_body)(
    ATTENTION_PARAMETERS
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
        if (drop && g % H == 0) NAME(prefetch)(drop + (g / H) * E * H, E * H);
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
                NAME(axpy)(grad_ft + (j * G + g) * D, a * m, go, D);
                const REAL da = m * NAME(dot)(go, ft + (j * G + g) * D, D);
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
            const REAL a2 = NAME(dot)(al, al, D) + NAME(dot)(ar, ar, D);
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

void NAME(gat_attention_backward)(
    ATTENTION_PARAMETERS
    const REAL *el, const REAL *er, const REAL *sq, const REAL *maxsq, const REAL *scale, const int64_t *argmax,
    const REAL *att, const REAL *grad_out,
    REAL *grad_ft, REAL *grad_attn_l, REAL *grad_attn_r, REAL *work)
{
#define BACKWARD(d) NAME(attention_backward_body)(ATTENTION_ARGUMENTS(d) el, er, sq, maxsq, scale, argmax, att, \
                                                  grad_out, grad_ft, grad_attn_l, grad_attn_r, work)
    WITH_WIDTH(D, BACKWARD)
#undef BACKWARD
}

#undef ATTENTION_PARAMETERS
#undef ATTENTION_ARGUMENTS
