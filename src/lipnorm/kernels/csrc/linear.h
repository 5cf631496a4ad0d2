/* Per-group linear maps on node-major features, of one type (kernels.c):
 * out[n, s] = W[s] x[n, s] for x (N, S, I), W (S, O, I), out (N, S, O); weight_t is W
 * transposed, (S, I, O). The seeds' projections of a layer, without the copies a batched
 * product over (S, N, I) needs both ways. Sums run over i in order. */

static inline __attribute__((always_inline)) void NAME(linear_forward_body)(int64_t N, int64_t S, int64_t I, int64_t O,
                                const REAL *restrict x, const REAL *restrict weight_t, REAL *restrict out)
{
    for (int64_t n = 0; n < N; ++n)
        for (int64_t s = 0; s < S; ++s) {
            REAL *restrict o = out + (n * S + s) * O;
            const REAL *restrict xs = x + (n * S + s) * I;
            for (int64_t t = 0; t < O; ++t) o[t] = 0;
            for (int64_t i = 0; i < I; ++i) NAME(axpy_rounded)(o, xs[i], weight_t + (s * I + i) * O, O);
        }
}

/* The input width a constant too where it is 16 (a hidden layer's, the common case). */
void NAME(grouped_linear_forward)(int64_t N, int64_t S, int64_t I, int64_t O,
                                  const REAL *restrict x, const REAL *restrict weight_t, REAL *restrict out)
{
#define FORWARD(o) if (I == 16) NAME(linear_forward_body)(N, S, 16, o, x, weight_t, out); \
                   else NAME(linear_forward_body)(N, S, I, o, x, weight_t, out)
    WITH_WIDTH(O, FORWARD)
#undef FORWARD
}

/* grad_x (N, S, I) and grad_weight (S, O, I), written. */
static inline __attribute__((always_inline)) void NAME(linear_backward_body)(int64_t N, int64_t S, int64_t I, int64_t O,
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
                NAME(axpy_rounded)(gx, go[o], weight + (s * O + o) * I, I);
                NAME(axpy_rounded)(grad_weight + (s * O + o) * I, go[o], xs, I);
            }
        }
}

void NAME(grouped_linear_backward)(int64_t N, int64_t S, int64_t I, int64_t O,
                                   const REAL *restrict x, const REAL *restrict weight, const REAL *restrict grad_out,
                                   REAL *restrict grad_x, REAL *restrict grad_weight)
{
#define BACKWARD(o) if (I == 16) NAME(linear_backward_body)(N, S, 16, o, x, weight, grad_out, grad_x, grad_weight); \
                    else NAME(linear_backward_body)(N, S, I, o, x, weight, grad_out, grad_x, grad_weight)
    WITH_WIDTH(O, BACKWARD)
#undef BACKWARD
}
