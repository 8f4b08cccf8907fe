#define COLS $cols
#define LEAD $lead  // leading dimensions: a row's index splits into one index for each
#define INPUTS $inputs
static const long SIZES[LEAD > 0 ? LEAD : 1] = {$sizes};

// Where row r of each input starts: its leading indices times that input's strides (0 where it broadcasts).
static inline void row_inputs(const float* const* in, const long* st, long r, const float** x) {
    for (int k = 0; k < INPUTS; ++k) x[k] = in[k];
    for (int d = LEAD - 1; d >= 0; --d) {
        const long i = r % SIZES[d];
        r /= SIZES[d];
        for (int k = 0; k < INPUTS; ++k) x[k] += i * st[k * LEAD + d];
    }
}
