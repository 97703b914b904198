/*
 * The C ABI can grow: a program compiled against an older specla.h keeps working with this
 * library. An older header is simulated by struct layouts that are a prefix of today's (each cut
 * where the next field begins, as a real older struct ends), passed with their smaller
 * struct_size and followed by guard bytes of 0xFF: a library that read past struct_size would see
 * NaN floats, huge counts and pointers to nowhere, and refuse or crash; one that wrote past it
 * would change the guard. Also: a struct from a newer header (larger, zero tail accepted,
 * non-zero tail refused), struct_size 0 refused, and the run-time ABI version.
 *
 * Usage: specla_abi_test MODEL_DIR (the tiny fixture model tests/fixtures/gdn_tiny_a).
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "specla/specla.h"

static int failures = 0;

#define CHECK(cond)                                                                    \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            fprintf(stderr, "%s:%d: CHECK failed: %s (last error: %s)\n", __FILE__,    \
                    __LINE__, #cond, specla_last_error());                             \
            ++failures;                                                                \
        }                                                                              \
    } while (0)

/* The old layouts: today's structs cut before a field. Each static assertion says the cut is
 * where that field begins, so the old sizeof is what an older compiler would have produced. */
typedef struct old_model_params {
    size_t struct_size;
    specla_backend backend;
    int32_t device;
    int32_t n_threads;
} old_model_params; /* before arena_block_bytes, progress callback, load_tokenizer */
_Static_assert(sizeof(old_model_params) == offsetof(specla_model_params, arena_block_bytes), "cut");

typedef struct old_sampling_params {
    size_t struct_size;
    float temperature;
    int32_t top_k;
    float top_p;
    uint64_t seed;
} old_sampling_params; /* before the penalties, min_p and logit bias */
_Static_assert(sizeof(old_sampling_params) == offsetof(specla_sampling_params, repetition_penalty), "cut");

typedef struct old_generate_params {
    size_t struct_size;
    const old_sampling_params *sampling;
    int32_t max_tokens;
    specla_token_callback on_token;
    void *user_data;
} old_generate_params; /* before stop strings, stop_at_eos and the text options */
_Static_assert(sizeof(old_generate_params) == offsetof(specla_generate_params, stop_strings), "cut");

typedef struct old_spec_params {
    size_t struct_size;
    const old_generate_params *generate;
    int32_t max_draft_nodes;
    int32_t max_draft_depth;
} old_spec_params; /* before tree_algorithm, deferred_commit and the tree shape */
_Static_assert(sizeof(old_spec_params) == offsetof(specla_spec_params, tree_algorithm), "cut");

/* The layout before speculation_min_gain: a field added later must lie beyond such a caller's
 * struct_size (its tail padding included), or the library would read the caller's padding. */
typedef struct v2_spec_params {
    size_t struct_size;
    const specla_generate_params *generate;
    int32_t max_draft_nodes;
    int32_t max_draft_depth;
    specla_tree_algorithm tree_algorithm;
    bool deferred_commit;
    int32_t tree_top_k;
    float tree_prune_margin;
    bool tree_size_from_cost;
} v2_spec_params;
_Static_assert(offsetof(specla_spec_params, speculation_min_gain) >= sizeof(v2_spec_params), "padding reuse");
/* The layout before tree_shape (it ends with speculation_min_gain). */
_Static_assert(offsetof(specla_spec_params, tree_shape) ==
                   offsetof(specla_spec_params, speculation_min_gain) + sizeof(double),
               "cut");

typedef struct old_verify_params {
    size_t struct_size;
    const old_sampling_params *sampling;
} old_verify_params; /* before deferred_commit and tree_algorithm */
_Static_assert(sizeof(old_verify_params) == offsetof(specla_verify_params, deferred_commit), "cut");

typedef struct old_model_info {
    size_t struct_size;
    int32_t vocab_size, hidden_size, num_layers, num_heads, num_v_heads, head_k_dim, head_v_dim,
        conv_size, intermediate_size, bos_token_id, eos_token_id;
} old_model_info; /* before num_parameters, state_bytes, backend, has_tokenizer */
_Static_assert(sizeof(old_model_info) == offsetof(specla_model_info, num_parameters), "cut");

typedef struct old_spec_stats {
    size_t struct_size;
    int64_t steps;
    int64_t drafted;
} old_spec_stats; /* before accepted and the rest */
_Static_assert(sizeof(old_spec_stats) == offsetof(specla_spec_stats, accepted), "cut");

typedef struct old_generation_step {
    size_t struct_size;
    const int32_t *tokens;
    size_t n_tokens;
} old_generation_step; /* before the text and the finish reason */
_Static_assert(sizeof(old_generation_step) == offsetof(specla_generation_step, text), "cut");

/* An old struct followed by guard bytes. */
#define GUARDED(type)                \
    struct {                         \
        type s;                      \
        unsigned char guard[64];     \
    }

static void fill_guard(unsigned char *guard, size_t n) { memset(guard, 0xFF, n); }
static int guard_intact(const unsigned char *guard, size_t n) {
    for (size_t i = 0; i < n; ++i)
        if (guard[i] != 0xFF) return 0;
    return 1;
}
static int error_names(const char *name) { return strstr(specla_last_error(), name) != NULL; }

enum { kMaxTokens = 12 };
static const int32_t kPrompt[] = {5, 17, 33, 5, 17, 33, 5, 17};
#define N_PROMPT (sizeof kPrompt / sizeof kPrompt[0])

/* Today's full-size call: greedy or sampled (temperature, seed), the rest default. */
static size_t generate_full(specla_model *model, float temperature, uint64_t seed, int32_t *out) {
    specla_session *s = NULL;
    CHECK(specla_session_create(model, NULL, &s) == SPECLA_OK);
    specla_sampling_params sp = specla_sampling_default_params();
    sp.temperature = temperature;
    sp.seed = seed;
    specla_generate_params gp = specla_generate_default_params();
    gp.sampling = &sp;
    gp.max_tokens = kMaxTokens;
    size_t n = 0;
    CHECK(specla_generate(s, kPrompt, N_PROMPT, &gp, out, kMaxTokens, &n) == SPECLA_OK);
    specla_session_free(s);
    return n;
}

static void test_version(void) {
    CHECK(specla_abi_version() == SPECLA_ABI_VERSION);
    CHECK(SPECLA_ABI_VERSION == 3);
}

static void test_init(void) {
    /* init writes the defaults that fit an old struct, nothing beyond it */
    GUARDED(old_sampling_params) g;
    fill_guard(g.guard, sizeof g.guard);
    CHECK(specla_sampling_params_init((specla_sampling_params *)&g.s, sizeof g.s) == SPECLA_OK);
    CHECK(guard_intact(g.guard, sizeof g.guard));
    CHECK(g.s.struct_size == sizeof g.s);
    CHECK(g.s.temperature == 0.f && g.s.top_k == 0 && g.s.top_p == 1.f && g.s.seed == 0);

    /* a newer program's struct: our defaults, then zeros */
    struct {
        specla_generate_params p;
        unsigned char newer[24];
    } big;
    memset(&big, 0xAB, sizeof big);
    CHECK(specla_generate_params_init(&big.p, sizeof big) == SPECLA_OK);
    CHECK(big.p.struct_size == sizeof big);
    CHECK(big.p.max_tokens == 128 && big.p.stop_at_eos && big.p.sampling == NULL);
    for (size_t i = 0; i < sizeof big.newer; ++i) CHECK(big.newer[i] == 0);

    specla_spec_params sp;
    CHECK(specla_spec_params_init(&sp, 0) == SPECLA_ERR_INVALID_ARGUMENT);
    CHECK(error_names("specla_spec_params"));
    CHECK(specla_spec_params_init(NULL, sizeof sp) == SPECLA_ERR_INVALID_ARGUMENT);
}

static void test_old_callers(specla_model *model) {
    int32_t greedy[kMaxTokens], sampled[kMaxTokens], got[kMaxTokens];
    const size_t n_greedy = generate_full(model, 0.f, 0, greedy);
    const size_t n_sampled = generate_full(model, 0.9f, 7, sampled);
    CHECK(n_greedy == kMaxTokens);  /* the fixture reaches no EOS this soon */
    CHECK(n_sampled > 0);

    GUARDED(old_sampling_params) sampling;
    GUARDED(old_generate_params) generate;
    fill_guard(sampling.guard, sizeof sampling.guard);
    fill_guard(generate.guard, sizeof generate.guard);
    CHECK(specla_sampling_params_init((specla_sampling_params *)&sampling.s, sizeof sampling.s) == SPECLA_OK);
    CHECK(specla_generate_params_init((specla_generate_params *)&generate.s, sizeof generate.s) == SPECLA_OK);
    generate.s.sampling = &sampling.s;
    generate.s.max_tokens = kMaxTokens;

    specla_session *s = NULL;
    CHECK(specla_session_create(model, NULL, &s) == SPECLA_OK);
    size_t n = 0;

    /* plain generation, greedy then sampled: the fields the old structs lack are the defaults */
    CHECK(specla_generate(s, kPrompt, N_PROMPT, (const specla_generate_params *)&generate.s, got, kMaxTokens,
                          &n) == SPECLA_OK);
    CHECK(n == n_greedy && memcmp(got, greedy, n * sizeof got[0]) == 0);
    sampling.s.temperature = 0.9f;
    sampling.s.seed = 7;
    CHECK(specla_session_reset(s) == SPECLA_OK);
    CHECK(specla_generate(s, kPrompt, N_PROMPT, (const specla_generate_params *)&generate.s, got, kMaxTokens,
                          &n) == SPECLA_OK);
    CHECK(n == n_sampled && memcmp(got, sampled, n * sizeof got[0]) == 0);
    sampling.s.temperature = 0.f;

    /* speculative generation (greedy: the plain tokens) with old spec params and old stats */
    GUARDED(old_spec_params) spec;
    GUARDED(old_spec_stats) stats;
    fill_guard(spec.guard, sizeof spec.guard);
    fill_guard(stats.guard, sizeof stats.guard);
    CHECK(specla_spec_params_init((specla_spec_params *)&spec.s, sizeof spec.s) == SPECLA_OK);
    spec.s.generate = &generate.s;
    stats.s.struct_size = sizeof stats.s;
    specla_drafter *d = NULL;
    CHECK(specla_drafter_create(model, NULL, &d) == SPECLA_OK);
    CHECK(specla_session_reset(s) == SPECLA_OK);
    CHECK(specla_generate_speculative(s, d, kPrompt, N_PROMPT, (const specla_spec_params *)&spec.s, got, kMaxTokens,
                                      &n, (specla_spec_stats *)&stats.s) == SPECLA_OK);
    CHECK(n == n_greedy && memcmp(got, greedy, n * sizeof got[0]) == 0);
    CHECK(stats.s.struct_size == sizeof stats.s);
    CHECK(stats.s.steps > 0 && stats.s.steps <= (int64_t)n);
    CHECK(guard_intact(stats.guard, sizeof stats.guard));

    /* pull generation with an old step struct */
    specla_generation *gen = NULL;
    CHECK(specla_session_reset(s) == SPECLA_OK);
    CHECK(specla_generation_begin(s, d, kPrompt, N_PROMPT, (const specla_spec_params *)&spec.s, &gen) == SPECLA_OK);
    size_t pulled = 0;
    GUARDED(old_generation_step) step;
    fill_guard(step.guard, sizeof step.guard);
    step.s.struct_size = sizeof step.s;
    while (gen && specla_generation_next(gen, (specla_generation_step *)&step.s) == SPECLA_OK) {
        CHECK(step.s.struct_size == sizeof step.s);
        CHECK(pulled + step.s.n_tokens <= kMaxTokens);
        if (pulled + step.s.n_tokens > kMaxTokens) break;
        if (step.s.n_tokens) memcpy(got + pulled, step.s.tokens, step.s.n_tokens * sizeof got[0]);
        pulled += step.s.n_tokens;
    }
    CHECK(guard_intact(step.guard, sizeof step.guard));
    CHECK(pulled == n_greedy && memcmp(got, greedy, pulled * sizeof got[0]) == 0);
    GUARDED(old_spec_stats) pull_stats;
    fill_guard(pull_stats.guard, sizeof pull_stats.guard);
    pull_stats.s.struct_size = sizeof pull_stats.s;
    CHECK(specla_generation_stats(gen, (specla_spec_stats *)&pull_stats.s) == SPECLA_OK);
    CHECK(pull_stats.s.struct_size == sizeof pull_stats.s && pull_stats.s.steps > 0);
    CHECK(guard_intact(pull_stats.guard, sizeof pull_stats.guard));
    specla_generation_free(gen);

    /* the verification primitive with old verify params: the greedy continuation is accepted */
    GUARDED(old_verify_params) verify;
    fill_guard(verify.guard, sizeof verify.guard);
    CHECK(specla_verify_params_init((specla_verify_params *)&verify.s, sizeof verify.s) == SPECLA_OK);
    verify.s.sampling = &sampling.s;
    CHECK(specla_session_reset(s) == SPECLA_OK);
    CHECK(specla_session_eval(s, kPrompt, N_PROMPT, SPECLA_LOGITS_NONE, NULL, 0) == SPECLA_OK);
    const int32_t parents[3] = {-1, 0, 1};
    int32_t accepted[3] = {-1, -1, -1};
    size_t n_accepted = 0;
    int32_t bonus = -1;
    CHECK(specla_session_verify_tree(s, greedy, parents, 3, NULL, (const specla_verify_params *)&verify.s,
                                     accepted, &n_accepted, &bonus, NULL) == SPECLA_OK);
    CHECK(n_accepted == 3 && accepted[2] == 2 && bonus == greedy[3]);

    specla_drafter_free(d);
    specla_session_free(s);
}

static void test_old_info(specla_model *model) {
    specla_model_info full = {.struct_size = sizeof(specla_model_info)};
    CHECK(specla_model_get_info(model, &full) == SPECLA_OK);
    CHECK(full.struct_size == sizeof full);

    GUARDED(old_model_info) info;
    memset(&info.s, 0, sizeof info.s);
    fill_guard(info.guard, sizeof info.guard);
    info.s.struct_size = sizeof info.s;
    CHECK(specla_model_get_info(model, (specla_model_info *)&info.s) == SPECLA_OK);
    CHECK(info.s.struct_size == sizeof info.s);
    CHECK(guard_intact(info.guard, sizeof info.guard));
    CHECK(info.s.vocab_size == full.vocab_size && info.s.hidden_size == full.hidden_size &&
          info.s.num_layers == full.num_layers && info.s.eos_token_id == full.eos_token_id &&
          info.s.intermediate_size == full.intermediate_size);

    /* struct_size not set: refused, nothing written */
    info.s.struct_size = 0;
    info.s.vocab_size = -7;
    CHECK(specla_model_get_info(model, (specla_model_info *)&info.s) == SPECLA_ERR_INVALID_ARGUMENT);
    CHECK(error_names("specla_model_info"));
    CHECK(info.s.vocab_size == -7 && guard_intact(info.guard, sizeof info.guard));
    info.s.struct_size = 4;
    CHECK(specla_model_get_info(model, (specla_model_info *)&info.s) == SPECLA_ERR_INVALID_ARGUMENT);

    /* a newer program's info struct: ours filled, its own fields beyond left alone */
    struct {
        specla_memory_stats m;
        unsigned char newer[16];
    } big;
    memset(&big, 0xCD, sizeof big);
    big.m.struct_size = sizeof big;
    CHECK(specla_model_memory_stats(model, &big.m) == SPECLA_OK);
    CHECK(big.m.struct_size == sizeof big);
    CHECK(big.m.weight_bytes > 0 && big.m.arena_blocks == 0);
    for (size_t i = 0; i < sizeof big.newer; ++i) CHECK(big.newer[i] == 0xCD);
}

static void test_newer_and_unset(specla_model *model) {
    int32_t greedy[kMaxTokens], got[kMaxTokens];
    const size_t n_greedy = generate_full(model, 0.f, 0, greedy);
    specla_session *s = NULL;
    CHECK(specla_session_create(model, NULL, &s) == SPECLA_OK);
    size_t n = 0;

    /* a newer header's struct: fields this library does not know left zero are accepted */
    struct {
        specla_generate_params p;
        unsigned char newer[32];
    } big;
    memset(&big, 0, sizeof big);
    CHECK(specla_generate_params_init(&big.p, sizeof big) == SPECLA_OK);
    big.p.max_tokens = kMaxTokens;
    CHECK(specla_generate(s, kPrompt, N_PROMPT, &big.p, got, kMaxTokens, &n) == SPECLA_OK);
    CHECK(n == n_greedy && memcmp(got, greedy, n * sizeof got[0]) == 0);
    /* ... set, they are refused: this library cannot honour them */
    big.newer[5] = 1;
    CHECK(specla_generate(s, kPrompt, N_PROMPT, &big.p, got, kMaxTokens, &n) == SPECLA_ERR_UNSUPPORTED);
    CHECK(error_names("specla_generate_params"));

    /* the same through a nested pointer */
    struct {
        specla_sampling_params p;
        unsigned char newer[8];
    } big_sampling;
    memset(&big_sampling, 0, sizeof big_sampling);
    CHECK(specla_sampling_params_init(&big_sampling.p, sizeof big_sampling) == SPECLA_OK);
    big_sampling.newer[7] = 9;
    specla_generate_params gp = specla_generate_default_params();
    gp.max_tokens = kMaxTokens;
    gp.sampling = &big_sampling.p;
    CHECK(specla_generate(s, kPrompt, N_PROMPT, &gp, got, kMaxTokens, &n) == SPECLA_ERR_UNSUPPORTED);
    CHECK(error_names("specla_sampling_params"));

    /* struct_size 0 (never set) is refused, naming the struct, top-level and nested */
    gp.sampling = NULL;
    gp.struct_size = 0;
    CHECK(specla_generate(s, kPrompt, N_PROMPT, &gp, got, kMaxTokens, &n) == SPECLA_ERR_INVALID_ARGUMENT);
    CHECK(error_names("specla_generate_params"));
    gp.struct_size = sizeof gp;
    specla_spec_params sp = specla_spec_default_params();
    sp.generate = &gp;
    specla_sampling_params unset;
    memset(&unset, 0, sizeof unset);
    gp.sampling = &unset;
    specla_drafter *d = NULL;
    CHECK(specla_drafter_create(model, NULL, &d) == SPECLA_OK);
    CHECK(specla_generate_speculative(s, d, kPrompt, N_PROMPT, &sp, got, kMaxTokens, &n, NULL) ==
          SPECLA_ERR_INVALID_ARGUMENT);
    CHECK(error_names("specla_sampling_params"));
    specla_verify_params vp = specla_verify_default_params();
    vp.struct_size = 0;
    size_t n_accepted = 0;
    int32_t bonus = -1;
    CHECK(specla_session_verify_tree(s, NULL, NULL, 0, NULL, &vp, NULL, &n_accepted, &bonus, NULL) ==
          SPECLA_ERR_INVALID_ARGUMENT);
    CHECK(error_names("specla_verify_params"));
    specla_session_params ssp = specla_session_default_params();
    ssp.struct_size = 0;
    specla_session *none = NULL;
    CHECK(specla_session_create(model, &ssp, &none) == SPECLA_ERR_INVALID_ARGUMENT && none == NULL);
    CHECK(error_names("specla_session_params"));

    specla_drafter_free(d);
    specla_session_free(s);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s MODEL_DIR\n", argv[0]);
        return 2;
    }
    test_version();
    test_init();

    /* an old program's model params: the callback and the rest beyond its struct are the defaults */
    GUARDED(old_model_params) mp;
    fill_guard(mp.guard, sizeof mp.guard);
    specla_model *model = NULL;
    if (specla_model_params_init((specla_model_params *)&mp.s, sizeof mp.s) != SPECLA_OK ||
        specla_model_load(argv[1], (const specla_model_params *)&mp.s, &model) != SPECLA_OK) {
        fprintf(stderr, "cannot load %s with old model params: %s\n", argv[1], specla_last_error());
        return 1;
    }
    CHECK(guard_intact(mp.guard, sizeof mp.guard));
    test_old_callers(model);
    test_old_info(model);
    test_newer_and_unset(model);
    specla_model_free(model);

    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("abi: all checks passed\n");
    return 0;
}
