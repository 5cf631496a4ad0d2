/* lipnorm's compiled CPU kernels, one translation unit: GAT's attention (attention.h),
 * the seeds' per-seed projections (linear.h), DGN's sum of its groups' BatchNorms
 * (groupnorm.h) and PairNorm (pairnorm.h), each built for float (names ending _f32) and
 * for double (_f64). lipnorm.kernels builds, loads and calls them and documents their
 * contracts; common.h says why their numbers are the same on every CPU. Single-threaded:
 * the grids they serve run one thread per job. */
#include "common.h"

#define REAL float
#define SFX f32
#define EXP exp_f32
#define SQRT sqrtf
#define FMA fmaf
#include "reduce.h"
#include "attention.h"
#include "linear.h"
#include "groupnorm.h"
#include "pairnorm.h"
#undef REAL
#undef SFX
#undef EXP
#undef SQRT
#undef FMA

#define REAL double
#define SFX f64
#define EXP exp_f64
#define SQRT sqrt
#define FMA fma
#include "reduce.h"
#include "attention.h"
#include "linear.h"
#include "groupnorm.h"
#include "pairnorm.h"
