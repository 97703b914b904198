/*
 * SpecLA: speculative decoding runtime for linear-attention language models.
 *
 * The public C API. Valid C99 and C++. Everything the library exports is declared here and
 * carries the `specla_` prefix; nothing else leaves the shared object.
 *
 * Conventions (read once, they hold for every function below):
 *  - Every fallible call returns a `specla_status`. SPECLA_OK is 0. On failure a message that
 *    says what went wrong is available from `specla_last_error()` on the same thread.
 *  - Constructors hand the new handle back through an out-parameter (`*out` is set to NULL on
 *    failure); every handle has exactly one matching `*_free`, and `*_free(NULL)` is a no-op.
 *  - Structs grow: every params and info struct begins with `size_t struct_size`, the sizeof the
 *    program was compiled with, so a program keeps working with a later library whose structs
 *    have more fields (fields are only ever appended, each at or after the end of the previous
 *    version's struct). Obtain params from `*_default_params()` (or `*_params_init(&p, sizeof p)`)
 *    and change only the fields you need; params are passed by `const` pointer, and NULL means
 *    the defaults. A struct_size below sizeof(size_t) (0: not set) is SPECLA_ERR_INVALID_ARGUMENT;
 *    a struct larger than the library's is accepted when the fields the library does not know are
 *    all zero, else SPECLA_ERR_UNSUPPORTED. Fields an older program does not pass keep their
 *    defaults. Before asking the library to fill an info struct, set its struct_size
 *    (`specla_model_info info = {.struct_size = sizeof(specla_model_info)};`): the library
 *    writes at most struct_size bytes and keeps struct_size as it was (bytes beyond its own
 *    struct are left alone). Nested params are pointers (NULL: the defaults), each with its own
 *    struct_size. specla_logit_bias, an array element, has no struct_size and never changes.
 *  - Buffers passed in are borrowed for the duration of the call only, unless a comment says
 *    otherwise. Strings are UTF-8 and NUL-terminated unless a length is given.
 *  - Threads: a model is immutable after loading and may be shared by any number of threads.
 *    Sessions of one model may run on different threads at once; one session (and one drafter)
 *    is used by one thread at a time.
 */
#ifndef SPECLA_SPECLA_H
#define SPECLA_SPECLA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32) && !defined(SPECLA_STATIC)
#  if defined(SPECLA_BUILDING_LIBRARY)
#    define SPECLA_API __declspec(dllexport)
#  else
#    define SPECLA_API __declspec(dllimport)
#  endif
#elif defined(__GNUC__) || defined(__clang__)
#  define SPECLA_API __attribute__((visibility("default")))
#else
#  define SPECLA_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------------------------ */
/* Version                                                                                     */
/* ------------------------------------------------------------------------------------------ */

#define SPECLA_VERSION_MAJOR 0
#define SPECLA_VERSION_MINOR 1
#define SPECLA_VERSION_PATCH 0
/* Bumped whenever a struct layout or a signature in this header changes incompatibly; it is the
 * SONAME suffix of the shared library (libspecla.so.<SPECLA_ABI_VERSION>). Appending fields to a
 * size-prefixed struct (see the conventions above) is compatible and does not bump it.
 * Version 3: size-prefixed structs passed by pointer. */
#define SPECLA_ABI_VERSION 3

/* "major.minor.patch" of the library actually loaded (may differ from the header's macros). */
SPECLA_API const char *specla_version(void);
/* The same as numbers; any pointer may be NULL. */
SPECLA_API void specla_version_numbers(int *major, int *minor, int *patch);
/* SPECLA_ABI_VERSION of the library actually loaded: a program compares it with the header's macro
 * to detect a library whose struct layouts differ from the ones it was compiled against. */
SPECLA_API int specla_abi_version(void);
/* Whether this build of the library contains the CUDA backend. It is a module the library loads
 * (libspecla_cuda.so.<SPECLA_ABI_VERSION>, beside libspecla) when a model asks for SPECLA_BACKEND_CUDA; true here says
 * nothing about whether the module, the CUDA libraries or a GPU are present: specla_model_load
 * reports those as SPECLA_ERR_BACKEND_UNAVAILABLE with a message naming what is missing. */
SPECLA_API bool specla_has_cuda(void);

/* ------------------------------------------------------------------------------------------ */
/* Limits                                                                                      */
/* ------------------------------------------------------------------------------------------ */

/* Largest specla_model_params.n_threads; more is SPECLA_ERR_INVALID_ARGUMENT. */
#define SPECLA_LIMIT_THREADS 256
/* Largest JSON file read: config.json, tokenizer.json, its side files, the shard index. */
#define SPECLA_LIMIT_JSON_FILE_BYTES (64 * 1024 * 1024)
/* Largest safetensors header: the format's own limit (as in the reference implementation). */
#define SPECLA_LIMIT_SAFETENSORS_HEADER_BYTES 100000000
/* Largest vocab_size of a model's config.json. */
#define SPECLA_LIMIT_MODEL_VOCAB (1 << 24)
/* Largest num_hidden_layers. */
#define SPECLA_LIMIT_MODEL_LAYERS 4096
/* Largest size of one dimension: hidden_size, intermediate_size, head sizes, and every width
 * derived from them (heads x head size, conv channels, fused projection rows, 2 x intermediate). */
#define SPECLA_LIMIT_MODEL_DIM (1 << 18)
/* Largest conv_size (short convolution taps). */
#define SPECLA_LIMIT_MODEL_CONV_SIZE 64
/* Largest recurrent state plus conv cache of one sequence, all layers, in fp32 bytes. */
#define SPECLA_LIMIT_SESSION_STATE_BYTES ((uint64_t)8 << 30)
/* Largest working memory one token of a batch or draft tree needs (its activations plus the
 * per-layer factors kept for verification), in fp32 bytes. */
#define SPECLA_LIMIT_SESSION_TOKEN_BYTES ((uint64_t)256 << 20)
/* Smallest temperature that samples (FLT_MIN); a positive one below it is greedy, as 0 is. */
#define SPECLA_LIMIT_MIN_TEMPERATURE 1.17549435e-38f
/* Largest specla_spec_params.tree_top_k (an EAGLE drafter's pass has up to top_k x depth rows). */
#define SPECLA_LIMIT_DRAFT_TOP_K 64
/* Most stop strings one generation call takes (specla_generate_params.n_stop_strings). */
#define SPECLA_LIMIT_STOP_STRINGS 1024
/* Most logit bias entries one sampling configuration takes (specla_sampling_params.n_logit_bias). */
#define SPECLA_LIMIT_LOGIT_BIAS 65536
/* Most alternatives reported per generated token (specla_generate_params.top_logprobs). */
#define SPECLA_LIMIT_TOP_LOGPROBS 20
/* Token ids of a tokenizer lie in [0, this); vocabulary entries and added tokens are at most this many. */
#define SPECLA_LIMIT_TOKENIZER_VOCAB 4194304
/* BPE merges in a tokenizer.json at most. */
#define SPECLA_LIMIT_TOKENIZER_MERGES 4194304
/* Sequence normalizers, pre-tokenizers, decoders and post-processors nest at most this deep. */
#define SPECLA_LIMIT_TOKENIZER_NESTING 16
/* Arrays and objects in tokenizer.json and its side files nest at most this deep. */
#define SPECLA_LIMIT_TOKENIZER_JSON_DEPTH 128
/* Backtracking steps one tokenizer regex match may take; more is a SPECLA_ERR_FORMAT. */
#define SPECLA_LIMIT_TOKENIZER_REGEX_STEPS 10000000
/* Backtracking stack one tokenizer regex match may use (per thread); more is a SPECLA_ERR_FORMAT. */
#define SPECLA_LIMIT_TOKENIZER_REGEX_STACK_BYTES (8 << 20)

/* ------------------------------------------------------------------------------------------ */
/* Status codes and errors                                                                     */
/* ------------------------------------------------------------------------------------------ */

typedef enum specla_status {
    SPECLA_OK = 0,
    SPECLA_ERR_INVALID_ARGUMENT = 1,   /* a NULL handle/pointer, a zero length, a bad parameter */
    SPECLA_ERR_IO = 2,                 /* a file or folder is missing or cannot be read */
    SPECLA_ERR_FORMAT = 3,             /* a file is malformed: JSON, safetensors header, tensor data */
    SPECLA_ERR_UNSUPPORTED = 4,        /* well-formed but not something this engine runs */
    SPECLA_ERR_SHAPE = 5,              /* a tensor is missing or has the wrong shape or dtype */
    SPECLA_ERR_TOKEN_OUT_OF_RANGE = 6, /* a token id outside [0, vocab_size) */
    SPECLA_ERR_OUT_OF_MEMORY = 7,      /* host or device memory exhausted; nothing was changed */
    SPECLA_ERR_BACKEND_UNAVAILABLE = 8,/* the requested backend is not built in or no device found */
    SPECLA_ERR_DEVICE = 9,             /* the GPU runtime reported an error */
    SPECLA_ERR_ABORTED = 10,           /* a callback asked to stop */
    SPECLA_ERR_CAPACITY = 11,          /* an output buffer is too small; see the *_needed outputs */
    SPECLA_ERR_STATE = 12,             /* the call is not valid in the handle's current state */
    SPECLA_ERR_INTERNAL = 13           /* a bug: please report it with the message */
} specla_status;

/* A short constant English name for a status ("SPECLA_ERR_IO: input/output error"). */
SPECLA_API const char *specla_status_string(specla_status status);

/* The message of the last failed call made on this thread (thread-local storage). The pointer is
 * valid until the next failing call on this thread. Returns "" if no call has failed yet.
 * Successful calls do not clear it. */
SPECLA_API const char *specla_last_error(void);

/* ------------------------------------------------------------------------------------------ */
/* Logging                                                                                     */
/* ------------------------------------------------------------------------------------------ */

typedef enum specla_log_level {
    SPECLA_LOG_DEBUG = 0,
    SPECLA_LOG_INFO = 1,
    SPECLA_LOG_WARN = 2,
    SPECLA_LOG_ERROR = 3
} specla_log_level;

/* Receives one complete message (no trailing newline). May be called from any thread that uses
 * the library; it must be thread-safe. It is called with no library lock held, so it may call
 * back into the library (log, load a model, replace or remove the sink). */
typedef void (*specla_log_callback)(specla_log_level level, const char *message, void *user_data);

/* Install a process-wide log sink; NULL restores the default (warnings and errors to stderr).
 * Messages below `min_level` are dropped before formatting. Messages logged after the call go to
 * the new sink. Called outside a log callback, it returns only once every call to the replaced
 * sink running on other threads has returned: the old callback is not running and will not run
 * again, so its user_data may be released (do not hold a lock your callback takes while calling
 * this). Called from inside a log callback it does not wait (that would wait for itself): calls
 * to the replaced sink already running on other threads may still be in progress when it returns. */
SPECLA_API void specla_set_log_callback(specla_log_callback callback, void *user_data,
                                        specla_log_level min_level);

/* ------------------------------------------------------------------------------------------ */
/* Model                                                                                       */
/* ------------------------------------------------------------------------------------------ */

/* Opaque handles. */
typedef struct specla_model specla_model;
typedef struct specla_session specla_session;
typedef struct specla_drafter specla_drafter;

typedef enum specla_backend {
    SPECLA_BACKEND_CPU = 0,
    SPECLA_BACKEND_CUDA = 1
} specla_backend;

/* Called during loading with progress in [0, 1]. Return false to abort the load, which then
 * fails with SPECLA_ERR_ABORTED. */
typedef bool (*specla_progress_callback)(float progress, void *user_data);

typedef struct specla_model_params {
    size_t struct_size;                /* sizeof(this struct) as the caller was compiled */
    specla_backend backend;            /* default SPECLA_BACKEND_CPU */
    int32_t device;                    /* CUDA device ordinal (CUDA backend only); default 0 */
    int32_t n_threads;                 /* CPU threads per session call (the caller + n - 1
                                          workers), 1..SPECLA_LIMIT_THREADS; 0 = the CPUs this
                                          process may use: its affinity mask, capped by its
                                          cgroup's CPU quota (cgroup v2 cpu.max, v1 cfs quota,
                                          rounded up). More than that is accepted (results do
                                          not depend on it) with a warning through the log:
                                          threads beyond the usable CPUs only slow decoding. */
    size_t arena_block_bytes;          /* CUDA: device memory taken per arena block; 0 = default
                                          (256 MiB). States, conv caches, factors and scratch are
                                          sub-allocated from these blocks. */
    specla_progress_callback progress_callback; /* may be NULL */
    void *progress_user_data;
    bool load_tokenizer;               /* load tokenizer.json if present (default true); a model
                                          without one still runs on token ids */
} specla_model_params;

/* Fill *params with the defaults for a struct of struct_size bytes (sizeof(*params)); NULL or a
 * struct_size below sizeof(size_t) is SPECLA_ERR_INVALID_ARGUMENT. */
SPECLA_API specla_status specla_model_params_init(specla_model_params *params, size_t struct_size);
/* The defaults by value (a convenience over specla_model_params_init). */
static inline specla_model_params specla_model_default_params(void) {
    specla_model_params params;
    specla_model_params_init(&params, sizeof params);
    return params;
}

/* Load a Hugging Face checkpoint folder (config.json + model.safetensors, or shards with
 * model.safetensors.index.json; F32/BF16/F16 tensors). On success *out owns the model; release it
 * with specla_model_free() after every session and drafter of it has been freed. */
SPECLA_API specla_status specla_model_load(const char *folder, const specla_model_params *params,
                                           specla_model **out);
SPECLA_API void specla_model_free(specla_model *model);

/* What the loaded model is. Sizes are element counts. */
typedef struct specla_model_info {
    size_t struct_size;       /* sizeof(this struct) as the caller was compiled */
    int32_t vocab_size;
    int32_t hidden_size;
    int32_t num_layers;
    int32_t num_heads;        /* query/key heads */
    int32_t num_v_heads;      /* value heads (>= num_heads, a multiple of it) */
    int32_t head_k_dim;       /* key/query head size K */
    int32_t head_v_dim;       /* value head size V */
    int32_t conv_size;        /* short-conv window W (0 when use_short_conv is false) */
    int32_t intermediate_size;
    int32_t bos_token_id;     /* -1 when the model has none */
    int32_t eos_token_id;     /* -1 when the model has none */
    int64_t num_parameters;
    size_t state_bytes;       /* recurrent state + conv cache of one session: only part of what a
                                 session holds (its scratch and factors: specla_session_get_memory) */
    specla_backend backend;
    bool has_tokenizer;
} specla_model_info;

SPECLA_API specla_status specla_model_get_info(const specla_model *model, specla_model_info *out);

/* Memory the model's backend holds. On CUDA, session states, conv caches, factor buffers and
 * scratch are sub-allocated from arena blocks of device memory; on the CPU the arena fields are 0. */
typedef struct specla_memory_stats {
    size_t struct_size;           /* sizeof(this struct) as the caller was compiled */
    size_t weight_bytes;          /* weights resident on the backend */
    size_t arena_reserved_bytes;  /* device memory taken from the driver in blocks */
    size_t arena_used_bytes;      /* bytes sub-allocated and live */
    size_t arena_peak_bytes;      /* high-water mark of arena_used_bytes */
    int32_t arena_blocks;
    int32_t live_allocations;
} specla_memory_stats;

SPECLA_API specla_status specla_model_memory_stats(const specla_model *model,
                                                   specla_memory_stats *out);

/* ------------------------------------------------------------------------------------------ */
/* Session: one sequence and its recurrent state                                               */
/* ------------------------------------------------------------------------------------------ */

typedef struct specla_session_params {
    size_t struct_size;       /* sizeof(this struct) as the caller was compiled */
    int32_t max_tree_nodes;   /* largest draft tree / chain this session will verify; bounds
                                 the factor buffers reserved at creation (default 64) */
    int32_t max_batch_tokens; /* largest block of tokens evaluated in one pass; longer prompts are
                                 split internally (default 512) */
} specla_session_params;  /* whether accepted factors are applied inside the next pass is a
                             parameter of each speculative call (specla_spec_params,
                             specla_session_verify_tree) */

/* Fill *params with the defaults for a struct of struct_size bytes (sizeof(*params)); NULL or a
 * struct_size below sizeof(size_t) is SPECLA_ERR_INVALID_ARGUMENT. */
SPECLA_API specla_status specla_session_params_init(specla_session_params *params, size_t struct_size);
/* The defaults by value (a convenience over specla_session_params_init). */
static inline specla_session_params specla_session_default_params(void) {
    specla_session_params params;
    specla_session_params_init(&params, sizeof params);
    return params;
}

/* Create a session with an empty context. Fails with SPECLA_ERR_OUT_OF_MEMORY (nothing else
 * disturbed) when the state cannot be allocated. Free with specla_session_free(). */
SPECLA_API specla_status specla_session_create(specla_model *model, const specla_session_params *params,
                                               specla_session **out);
SPECLA_API void specla_session_free(specla_session *session);

/* Forget the context: zero state and conv cache. */
SPECLA_API specla_status specla_session_reset(specla_session *session);

/* Number of tokens the session's state has consumed. */
SPECLA_API specla_status specla_session_n_past(const specla_session *session, int64_t *out);

typedef enum specla_logits_mode {
    SPECLA_LOGITS_NONE = 0,   /* compute no logits (pure prefill) */
    SPECLA_LOGITS_LAST = 1,   /* logits of the last position: vocab_size floats */
    SPECLA_LOGITS_ALL = 2     /* logits of every position: n_tokens * vocab_size floats, row-major */
} specla_logits_mode;

/* Feed `n_tokens` tokens (n_tokens >= 1) through the model, advancing the session's state.
 * Logits are written to `logits` (fp32) according to `mode`; `logits_capacity` is its size in
 * floats and must be large enough (else SPECLA_ERR_CAPACITY, nothing evaluated; an n_tokens whose
 * n_tokens x vocab_size does not fit a size_t is SPECLA_ERR_INVALID_ARGUMENT). `logits` may be
 * NULL with SPECLA_LOGITS_NONE. On any error the session is left as it was. */
SPECLA_API specla_status specla_session_eval(specla_session *session, const int32_t *tokens,
                                             size_t n_tokens, specla_logits_mode mode,
                                             float *logits, size_t logits_capacity);

/* Copy the recurrent state of one layer into `out`, laid out [num_v_heads, V, K] fp32 (the layout
 * of flash-linear-attention's state), `capacity` floats. Pending deferred factors are applied
 * first. */
SPECLA_API specla_status specla_session_get_state(specla_session *session, int32_t layer,
                                                  float *out, size_t capacity);

/* ------------------------------------------------------------------------------------------ */
/* Session state: save, restore, fork; a session's memory                                      */
/* ------------------------------------------------------------------------------------------ */

/* A session's state is everything a continued generation depends on: the committed recurrent
 * state and conv cache of every layer, the context ids (n_past, and the history prompt lookup
 * drafts from), the token generation chose last and has not fed yet, and the logits of the last
 * evaluated token when no token is pending. A session that restores it (or receives a copy)
 * continues exactly as the saved one would have: the same greedy tokens, the same sampled tokens
 * for the same seed (on one backend; the CPU and CUDA backends round differently).
 *
 * The saved form is a versioned binary format, one layout for every backend: a state saved from a
 * CUDA session loads into a CPU session of the same model and back. It is tied to the model (its
 * configuration and a fingerprint of its weights), not to the backend, the thread count or the
 * session's params. It carries a checksum. Specification: lib/session/session_state.md.
 * Not part of it: a drafter's own bookkeeping (prompt lookup re-indexes a context it has not
 * seen; give an EAGLE drafter a fresh start with a new drafter), and a verification of
 * specla_session_verify_tree not followed by generation.
 *
 * Loading checks everything before changing anything. A refused state leaves the session as it
 * was, usable, and says what does not fit: SPECLA_ERR_FORMAT (not a state, truncated, trailing
 * bytes, checksum mismatch, impossible values), SPECLA_ERR_UNSUPPORTED (a format version other
 * than SPECLA_SESSION_STATE_VERSION), SPECLA_ERR_SHAPE (a state of another model: the message
 * names the field, the configuration or the weights that differ). */

/* The format version this library writes and reads. */
#define SPECLA_SESSION_STATE_VERSION 1

/* Save into a caller-owned buffer of `capacity` bytes. `*n_needed` (may be NULL) receives the
 * state's exact size; when `capacity` is smaller the call writes nothing and returns
 * SPECLA_ERR_CAPACITY, so call once with NULL and 0 to size the buffer. The size holds until the
 * session changes (eval, generation, reset, a restore). Deferred factors of a speculative commit
 * are applied on the way, which changes no later result. */
SPECLA_API specla_status specla_session_save_state(specla_session *session, void *buf, size_t capacity,
                                                   size_t *n_needed);
/* Restore from `size` bytes written by specla_session_save_state (or read from a state file);
 * the buffer is only read during the call. */
SPECLA_API specla_status specla_session_load_state(specla_session *session, const void *buf, size_t size);
/* The same through a file. Saving writes `path`.part and renames it over `path`, so a failed save
 * leaves no partial file under the name; I/O failures are SPECLA_ERR_IO naming the path. */
SPECLA_API specla_status specla_session_save_state_file(specla_session *session, const char *path);
SPECLA_API specla_status specla_session_load_state_file(specla_session *session, const char *path);
/* Fork: `dst` receives `src`'s state and continues exactly as `src` would; `src` is unchanged.
 * Both must be sessions of one model (the same handle, or two loads of one checkpoint, also on
 * different backends); another model is SPECLA_ERR_SHAPE. dst == src does nothing. */
SPECLA_API specla_status specla_session_copy_state(specla_session *dst, specla_session *src);

/* Every buffer a session owns, in bytes as allocated. Buffers sized by a pass (verification
 * outputs, tree snapshots) grow to the largest tree seen, so the numbers may rise after the first
 * speculative call. Not counted: driver objects (CUDA streams, graphs, the cuBLAS handle) and the
 * stacks of the session's worker threads. */
typedef struct specla_session_memory {
    size_t struct_size;    /* sizeof(this struct) as the caller was compiled */
    size_t state_bytes;    /* recurrent state + conv cache (specla_model_info.state_bytes) */
    size_t factor_bytes;   /* per-node factors kept for committing verified tokens (max_tree_nodes) */
    size_t scratch_bytes;  /* activations and logits of a pass (max_batch_tokens rows), tree
                              snapshots, sampling buffers, pinned staging, the session's logits */
    size_t context_bytes;  /* the token history */
    size_t host_bytes;     /* of all of the above, in host memory */
    size_t device_bytes;   /* in GPU memory (CUDA: arena allocations, part of arena_used_bytes) */
    size_t total_bytes;    /* host_bytes + device_bytes */
} specla_session_memory;

SPECLA_API specla_status specla_session_get_memory(const specla_session *session, specla_session_memory *out);

/* ------------------------------------------------------------------------------------------ */
/* Sampling and plain generation                                                               */
/* ------------------------------------------------------------------------------------------ */

/* Parameters that are not finite or out of range (a negative or NaN temperature, top_p outside
 * (0, 1], a negative top_k, a repetition_penalty <= 0, min_p outside [0, 1], penalty_last_n
 * below -1, a logit_bias token outside the vocabulary or a bias that is not finite, more than
 * SPECLA_LIMIT_LOGIT_BIAS entries) are SPECLA_ERR_INVALID_ARGUMENT naming the field.
 *
 * Padded vocabularies: when the model has a tokenizer with fewer ids than the model's vocab_size
 * (checkpoints often round the embedding and output head up, e.g. 8256 rows for 8192 tokens),
 * the ids in [tokenizer vocab_size, model vocab_size) are not tokens. Generation never produces
 * them: plain and speculative, greedy and sampled (and specla_session_verify_tree) give them
 * probability 0, as if their logits were -inf, so sampled output stays distributed exactly as
 * sampling over the tokens. specla_session_eval still returns their logits; a model loaded
 * without its tokenizer treats every id below its vocab_size as a candidate. */
/* One entry of specla_sampling_params.logit_bias. An array element, so it has no struct_size:
 * its layout is fixed for good (a later need gets a new struct). */
typedef struct specla_logit_bias {
    int32_t token;            /* in [0, the model's vocab_size) */
    float bias;               /* added to the token's logit; finite (a large negative value, e.g.
                                 -100, practically bans the token) */
} specla_logit_bias;

/* specla_sampling_params.seed asking for a random seed (drawn from the operating system's
 * entropy source at the start of each generation). The seed drawn is reported in
 * specla_spec_stats.seed (specla_generation_stats, specla_generate_speculative*); pass it back
 * to repeat the generation. */
#define SPECLA_SEED_RANDOM UINT64_MAX

/* The target distribution, in this order (plain sampling and speculative acceptance both use it,
 * so sampled speculative output stays distributed exactly as plain sampling with the same
 * settings; greedy picks the largest logit after steps 1-2):
 *   1. logit bias added; 2. penalties, for each token seen c > 0 times in the last
 *   penalty_last_n tokens of the context (prompt included; when verifying a draft, followed by
 *   the draft tokens before the position): l <- l > 0 ? l / repetition_penalty :
 *   l * repetition_penalty, then l <- l - c * frequency_penalty - presence_penalty;
 *   3. greedy (argmax) or temperature; 4. top-k; 5. top-p; 6. min-p; renormalised.
 * Any of bias, penalties or min-p makes a GPU session copy each step's logits to the host and
 * choose there (a vocab-wide copy per token, where greedy decoding otherwise copies one id). */
typedef struct specla_sampling_params {
    size_t struct_size;       /* sizeof(this struct) as the caller was compiled */
    float temperature;        /* 0 = greedy (argmax; default); finite and >= 0; a positive value
                                 below SPECLA_LIMIT_MIN_TEMPERATURE is greedy as well */
    int32_t top_k;            /* keep the k most likely tokens; 0 = off */
    float top_p;              /* nucleus mass in (0, 1]; 1 = off */
    uint64_t seed;            /* RNG seed; the same seed and inputs give the same output;
                                 SPECLA_SEED_RANDOM = a random one (default 0) */
    /* Appended in ABI version 2: */
    float repetition_penalty; /* > 0 and finite; 1 = off (default); > 1 discourages repeats */
    float presence_penalty;   /* finite; 0 = off (default); subtracted once from a seen token */
    float frequency_penalty;  /* finite; 0 = off (default); subtracted per occurrence */
    int32_t penalty_last_n;   /* how many of the last tokens the penalties count (default 64);
                                 -1 = the whole context; 0 = none (penalties off) */
    float min_p;              /* in [0, 1]: keep tokens whose probability is at least min_p x the
                                 top token's (after temperature, top-k, top-p); 0 = off (default) */
    const specla_logit_bias *logit_bias; /* n_logit_bias entries (may be NULL when 0); a token
                                 listed twice gets both biases; copied, not kept */
    size_t n_logit_bias;      /* at most SPECLA_LIMIT_LOGIT_BIAS (default 0) */
} specla_sampling_params;

/* Fill *params with the defaults for a struct of struct_size bytes (sizeof(*params)); NULL or a
 * struct_size below sizeof(size_t) is SPECLA_ERR_INVALID_ARGUMENT. */
SPECLA_API specla_status specla_sampling_params_init(specla_sampling_params *params, size_t struct_size);
/* The defaults by value (a convenience over specla_sampling_params_init). */
static inline specla_sampling_params specla_sampling_default_params(void) {
    specla_sampling_params params;
    specla_sampling_params_init(&params, sizeof params);
    return params;
}

/* Streaming callback: one call per generated token. `piece` is the text this token made final
 * (UTF-8, never taken back later): possibly "" while a multi-byte character is incomplete, while
 * the text may still be the start of a stop string (held back until it is not), for a special
 * token left out of the text, or when the model has no tokenizer; it may also carry text held
 * back at earlier tokens. Return false to stop generation early (not an error). After the last
 * token, one more call with token -1 delivers text held back until then, if any (its return value
 * is ignored). The pieces concatenate to the generated text. */
typedef bool (*specla_token_callback)(int32_t token, const char *piece, void *user_data);

typedef struct specla_generate_params {
    size_t struct_size;                     /* sizeof(this struct) as the caller was compiled */
    const specla_sampling_params *sampling; /* NULL = the defaults; read during the call only */
    int32_t max_tokens;               /* token budget (default 128) */
    specla_token_callback on_token;   /* may be NULL */
    void *user_data;
    const char *const *stop_strings;  /* generation stops after the token that completes one of
                                         these in the generated text (needs a tokenizer); the
                                         text ends where the stop string begins (see
                                         include_stop_string); may be NULL when n_stop_strings
                                         is 0; no entry may be NULL, empty or invalid UTF-8.
                                         When several complete, the one that ends first in the
                                         text wins (then the one that starts first, then the
                                         lowest index). Copied by the call. */
    size_t n_stop_strings;            /* at most SPECLA_LIMIT_STOP_STRINGS */
    bool stop_at_eos;                 /* stop after the model's EOS token (default true) */
    /* What the text holds (appended fields): */
    bool include_special_tokens;      /* special tokens (EOS, BOS...) appear in the generated
                                         text; default false: left out of the text (the token
                                         ids still include them) */
    bool include_stop_string;         /* the text keeps the stop string that ended generation,
                                         then ends (the rest of the token that completed it is
                                         cut off either way); default false: the text ends
                                         where the stop string begins, and streamed text holds
                                         back what may still become one */
    /* Log-probabilities, reported per step by specla_generation_next (the calls that run to
     * completion, specla_generate*, refuse them: SPECLA_ERR_INVALID_ARGUMENT). They are the
     * model's: log-softmax of the target's logits over the tokenizer's ids, the same whatever
     * the temperature, top-k/top-p/min-p, penalties or bias chose. On a GPU, asking for them
     * copies each emitted token's logits row to the host. */
    bool logprobs;                    /* report each generated token's log-probability
                                         (default false) */
    int32_t top_logprobs;             /* with logprobs: also the most likely candidates at each
                                         position, 0..SPECLA_LIMIT_TOP_LOGPROBS (default 0) */
} specla_generate_params;

/* Fill *params with the defaults for a struct of struct_size bytes (sizeof(*params)); NULL or a
 * struct_size below sizeof(size_t) is SPECLA_ERR_INVALID_ARGUMENT. */
SPECLA_API specla_status specla_generate_params_init(specla_generate_params *params, size_t struct_size);
/* The defaults by value (a convenience over specla_generate_params_init). */
static inline specla_generate_params specla_generate_default_params(void) {
    specla_generate_params params;
    specla_generate_params_init(&params, sizeof params);
    return params;
}

/* Evaluate the prompt (which may be empty if the session already has context) and generate.
 * Generated token ids are written to `out_tokens`, whose capacity `out_capacity` must be at least
 * max_tokens (else SPECLA_ERR_CAPACITY); or pass NULL and 0 to receive the ids through on_token
 * only (no buffer sized by the budget). `*n_out` receives how many were generated. The session's
 * state then holds prompt and output. To generate from text that may contain NUL bytes,
 * tokenize it with specla_tokenize (which takes a length) and call this with the ids:
 * on_token still streams the text. */
SPECLA_API specla_status specla_generate(specla_session *session, const int32_t *prompt,
                                         size_t n_prompt, const specla_generate_params *params,
                                         int32_t *out_tokens, size_t out_capacity,
                                         size_t *n_out);


/* ------------------------------------------------------------------------------------------ */
/* Tokenizer (Hugging Face tokenizer.json: byte-level BPE and SentencePiece-style BPE)         */
/* ------------------------------------------------------------------------------------------ */

/* A tokenizer comes either with a model (borrowed from it: specla_model_tokenizer) or alone
 * (specla_tokenizer_load, owned by the caller). Output matches the Hugging Face `tokenizers`
 * library for the same tokenizer.json. A tokenizer is immutable: any number of threads may use one
 * at once. Functions that fill a caller buffer take its `capacity`; when it is too small they return
 * SPECLA_ERR_CAPACITY and still set `*n_needed` (which may be NULL), so a caller can size the
 * buffer and call again; the buffer may be NULL when `capacity` is 0. */
typedef struct specla_tokenizer specla_tokenizer;

/* Load tokenizer.json (plus tokenizer_config.json, special_tokens_map.json, generation_config.json
 * and config.json where present, for BOS/EOS and BOS prepending) from a folder. Supported: BPE
 * models (byte-level, or with byte fallback), the normalizers Sequence, Prepend, Append, Replace,
 * Strip and ByteLevel, the pre-tokenizers ByteLevel, Split, Sequence, Metaspace, Digits, Whitespace,
 * WhitespaceSplit and CharDelimiterSplit, the decoders ByteLevel, Replace, ByteFallback, Fuse,
 * Strip, Metaspace and Sequence. Anything else fails with SPECLA_ERR_UNSUPPORTED naming it; a
 * missing file is SPECLA_ERR_IO, malformed JSON SPECLA_ERR_FORMAT.
 * Free with specla_tokenizer_free(). */
SPECLA_API specla_status specla_tokenizer_load(const char *folder, specla_tokenizer **out);
/* Frees a tokenizer from specla_tokenizer_load(); a model's own tokenizer is freed with the
 * model, and passing it here is a no-op. */
SPECLA_API void specla_tokenizer_free(specla_tokenizer *tokenizer);

/* The model's tokenizer, owned by the model (valid until specla_model_free). SPECLA_ERR_STATE when
 * the model folder had no tokenizer.json or it was not loaded. */
SPECLA_API specla_status specla_model_tokenizer(const specla_model *model,
                                                const specla_tokenizer **out);

typedef struct specla_tokenizer_info {
    size_t struct_size;       /* sizeof(this struct) as the caller was compiled */
    int32_t vocab_size;       /* ids are in [0, vocab_size) */
    int32_t bos_token_id;     /* -1 when none */
    int32_t eos_token_id;     /* -1 when none */
    bool add_bos_default;     /* whether the checkpoint's tokenizer prepends BOS by default */
} specla_tokenizer_info;

SPECLA_API specla_status specla_tokenizer_get_info(const specla_tokenizer *tokenizer,
                                                   specla_tokenizer_info *out);

/* Text (UTF-8, `text_len` bytes, need not be NUL-terminated) to token ids. `add_bos` prepends
 * the BOS token (nothing when the tokenizer has none); `parse_special` matches special tokens
 * written in the text (otherwise they are tokenized as ordinary text; added tokens that are not
 * special are always matched, as in the reference library). `*n_needed` receives the number of
 * ids. Text that is not valid UTF-8 is SPECLA_ERR_INVALID_ARGUMENT. */
SPECLA_API specla_status specla_tokenize(const specla_tokenizer *tokenizer, const char *text,
                                         size_t text_len, bool add_bos, bool parse_special,
                                         int32_t *out, size_t capacity, size_t *n_needed);

/* Token ids to text. Writes a NUL-terminated string; `*n_needed` receives its length in bytes
 * without the NUL (so capacity must be at least *n_needed + 1; the text itself contains a NUL
 * byte only where a token decodes to U+0000). `skip_special` drops special tokens from the text.
 * Invalid UTF-8 produced by byte tokens is replaced by U+FFFD, as the reference tokenizers do.
 * An id outside [0, vocab_size) is SPECLA_ERR_TOKEN_OUT_OF_RANGE. */
SPECLA_API specla_status specla_detokenize(const specla_tokenizer *tokenizer, const int32_t *tokens,
                                           size_t n_tokens, bool skip_special, char *out,
                                           size_t capacity, size_t *n_needed);

/* The vocabulary entry of a token, as stored in tokenizer.json (byte-level BPE entries keep their
 * byte-to-unicode form, e.g. "\xc4\xa0the"). Same buffer rules as specla_detokenize.
 * SPECLA_ERR_TOKEN_OUT_OF_RANGE outside [0, vocab_size); SPECLA_ERR_INVALID_ARGUMENT for an id in
 * range that no entry uses. */
SPECLA_API specla_status specla_token_to_string(const specla_tokenizer *tokenizer, int32_t token,
                                                char *out, size_t capacity, size_t *n_needed);

/* The id of a vocabulary entry or added token written exactly as stored;
 * SPECLA_ERR_INVALID_ARGUMENT when there is none. */
SPECLA_API specla_status specla_token_from_string(const specla_tokenizer *tokenizer,
                                                  const char *piece, int32_t *out);

/* Incremental detokenizer for streaming: each push returns only text that is final, never a
 * partial UTF-8 sequence, and the concatenation of all pieces plus the final flush equals
 * specla_detokenize() of all pushed tokens. (Pieces are NUL-terminated, so a decoded U+0000 ends a
 * piece early; use specla_detokenize where such text matters.) The tokenizer must outlive the
 * decoder. */
typedef struct specla_stream_decoder specla_stream_decoder;

SPECLA_API specla_status specla_stream_decoder_create(const specla_tokenizer *tokenizer,
                                                      bool skip_special,
                                                      specla_stream_decoder **out);
/* `*piece` points into the decoder and stays valid until the next call on it. An id outside
 * [0, vocab_size) is SPECLA_ERR_TOKEN_OUT_OF_RANGE and leaves the decoder as it was. */
SPECLA_API specla_status specla_stream_decoder_push(specla_stream_decoder *decoder, int32_t token,
                                                    const char **piece);
/* Emit whatever is still held back (an incomplete sequence becomes U+FFFD) and start over. */
SPECLA_API specla_status specla_stream_decoder_flush(specla_stream_decoder *decoder,
                                                     const char **piece);
SPECLA_API void specla_stream_decoder_free(specla_stream_decoder *decoder);

/* Tokenize `prompt` (NUL-terminated; BOS per the tokenizer's default, special tokens parsed),
 * then generate as specla_generate does, streaming text through params->on_token. When `out_text` is not NULL it
 * receives the whole generated text, allocated by the library: release it with
 * specla_string_free(). `n_generated` (may be NULL) receives the number of generated tokens. */
SPECLA_API specla_status specla_generate_text(specla_session *session, const char *prompt,
                                              const specla_generate_params *params, char **out_text,
                                              size_t *n_generated);

/* Release a string the library allocated. NULL is a no-op. */
SPECLA_API void specla_string_free(char *text);

/* ------------------------------------------------------------------------------------------ */
/* Speculative decoding                                                                        */
/* ------------------------------------------------------------------------------------------ */

/* A drafter proposes candidate tokens (a chain or a tree) after a session's context; the target
 * model verifies all of them in one pass and keeps the longest path it agrees with plus one token
 * of its own. Output is exactly what plain decoding gives: token for token when greedy, and
 * distributed exactly as the target's sampling distribution otherwise. */

typedef enum specla_drafter_type {
    SPECLA_DRAFTER_PROMPT_LOOKUP = 0, /* n-gram match against the session's own context; no
                                         training, strong on code and on text that repeats */
    SPECLA_DRAFTER_EAGLE = 1          /* a learned one-layer drafter that reads the target's own
                                         features (EAGLE style), loaded from a drafter folder
                                         trained for this model (`path`); CPU models only for
                                         now (a CUDA model: SPECLA_ERR_UNSUPPORTED) */
} specla_drafter_type;

typedef struct specla_drafter_params {
    size_t struct_size;         /* sizeof(this struct) as the caller was compiled */
    specla_drafter_type type;   /* default SPECLA_DRAFTER_PROMPT_LOOKUP */
    int32_t min_ngram;          /* prompt lookup: shortest suffix matched (default 2) */
    int32_t max_ngram;          /* prompt lookup: longest suffix matched, tried first (default 4) */
    int32_t max_draft_len;      /* prompt lookup: longest proposed continuation (default 8) */
    int32_t max_branches;       /* prompt lookup: distinct continuations kept as tree branches
                                   (default 2) */
    const char *path;           /* EAGLE: the drafter folder (config.json with a specla_drafter
                                   block, model.safetensors), read during specla_drafter_create
                                   only; default NULL. It is checked against the model: hidden
                                   size, vocabulary, layer count (SPECLA_ERR_SHAPE), kind and
                                   format (SPECLA_ERR_UNSUPPORTED), tensors (SPECLA_ERR_SHAPE),
                                   missing files (SPECLA_ERR_IO). */
} specla_drafter_params;

/* Fill *params with the defaults for a struct of struct_size bytes (sizeof(*params)); NULL or a
 * struct_size below sizeof(size_t) is SPECLA_ERR_INVALID_ARGUMENT. */
SPECLA_API specla_status specla_drafter_params_init(specla_drafter_params *params, size_t struct_size);
/* The defaults by value (a convenience over specla_drafter_params_init). */
static inline specla_drafter_params specla_drafter_default_params(void) {
    specla_drafter_params params;
    specla_drafter_params_init(&params, sizeof params);
    return params;
}

/* Create a drafter for a model's sessions. A drafter keeps per-sequence bookkeeping: use one
 * drafter per session (one thread at a time). Free with specla_drafter_free(). */
SPECLA_API specla_status specla_drafter_create(const specla_model *model, const specla_drafter_params *params,
                                               specla_drafter **out);
SPECLA_API void specla_drafter_free(specla_drafter *drafter);

typedef enum specla_tree_algorithm {
    SPECLA_TREE_AUTO = 0,        /* the backend picks per tree shape */
    SPECLA_TREE_HYBRID = 1,      /* heavy-light chains, state resident inside each chain */
    SPECLA_TREE_PARALLEL_WY = 2  /* tree-masked chunk (WY) form */
} specla_tree_algorithm;

/* How an EAGLE drafter grows a tree level by level (prompt lookup ignores it). */
typedef enum specla_tree_shape {
    SPECLA_TREE_SHAPE_AUTO = 0,       /* the library's choice per backend: FIXED_WIDTH for
                                         greedy generations where the backend drafts it in
                                         one device call, else DYNAMIC */
    SPECLA_TREE_SHAPE_DYNAMIC = 1,    /* best-first levels cut by tree_prune_margin, the node
                                         budget and, with tree_size_from_cost, the measured
                                         cost of each further drafter pass */
    SPECLA_TREE_SHAPE_FIXED_WIDTH = 2 /* greedy generations: every level expands the
                                         tree_top_k best nodes of the deepest depth so far,
                                         down to max_draft_depth, with no cut while drafting
                                         (the final tree is cut as DYNAMIC's is); where the
                                         backend can, all levels are drafted in one device
                                         call (CUDA, one-layer drafters, tree_top_k <= 32).
                                         Sampled generations build DYNAMIC trees */
} specla_tree_shape;

typedef struct specla_spec_params {
    size_t struct_size;                     /* sizeof(this struct) as the caller was compiled */
    const specla_generate_params *generate; /* sampling, budget, streaming, stop conditions;
                                         NULL = the defaults; read during the call only */
    int32_t max_draft_nodes;          /* nodes per verification (default 4: best measured with
                                         prompt lookup on gdn-pycode-22m; at most the
                                         session's max_tree_nodes; an EAGLE drafter's trees
                                         are sized within it) */
    int32_t max_draft_depth;          /* deepest draft position (default 8) */
    specla_tree_algorithm tree_algorithm;
    bool deferred_commit;             /* apply accepted factors inside the next verification
                                         pass (default true) */
    /* How an EAGLE drafter builds its trees (best-first by the drafter's path log-probability;
     * prompt lookup ignores these): */
    int32_t tree_top_k;               /* children per expanded node and nodes expanded per
                                         depth, 1..SPECLA_LIMIT_DRAFT_TOP_K (default 4) */
    float tree_prune_margin;          /* keep nodes whose path log-probability is within this
                                         many nats of the best path's; <= 0: no margin pruning
                                         (default 8); not NaN */
    bool tree_size_from_cost;         /* choose the node count, within max_draft_nodes, from the
                                         measured costs of verification and drafting passes on
                                         this backend (default true); false: fill the budget */
    double speculation_min_gain;      /* greedy generations speculate only while it pays: the
                                         generation measures seconds per emitted token of its
                                         speculative passes and of plain decoding steps as it
                                         runs, takes plain steps while speculation's rate is
                                         below this multiple of plain decoding's, and probes
                                         speculation again after a back-off that doubles each
                                         time it loses and carries over to the session's next
                                         generation with the same drafter (default 1.0; 0:
                                         always speculate; finite, >= 0). The output is the same
                                         either way. Sampled generations always speculate: which
                                         steps speculate changes the tokens a seed gives (the
                                         distribution stays the target's), and a seeded run must
                                         repeat token for token */
    specla_tree_shape tree_shape;     /* default SPECLA_TREE_SHAPE_AUTO */
} specla_spec_params;

/* Fill *params with the defaults for a struct of struct_size bytes (sizeof(*params)); NULL or a
 * struct_size below sizeof(size_t) is SPECLA_ERR_INVALID_ARGUMENT. */
SPECLA_API specla_status specla_spec_params_init(specla_spec_params *params, size_t struct_size);
/* The defaults by value (a convenience over specla_spec_params_init). */
static inline specla_spec_params specla_spec_default_params(void) {
    specla_spec_params params;
    specla_spec_params_init(&params, sizeof params);
    return params;
}

#define SPECLA_SPEC_MAX_DEPTH_STATS 32

typedef struct specla_spec_stats {
    size_t struct_size;            /* sizeof(this struct) as the caller was compiled */
    int64_t steps;                 /* verification passes */
    int64_t drafted;               /* draft tokens submitted */
    int64_t accepted;              /* draft tokens accepted */
    int64_t generated;             /* tokens emitted (accepted + the target's own), plain
                                      steps' included */
    double mean_accepted_length;   /* (generated - plain_steps) / steps: tokens per
                                      verification pass */
    double acceptance_rate;        /* accepted / drafted */
    int64_t drafted_at_depth[SPECLA_SPEC_MAX_DEPTH_STATS];  /* draft nodes at depth d+1 */
    int64_t accepted_at_depth[SPECLA_SPEC_MAX_DEPTH_STATS]; /* passes that accepted depth d+1 */
    uint64_t seed;                 /* the seed of the generation's random stream: params'
                                      sampling.seed, or the one drawn for SPECLA_SEED_RANDOM */
    int64_t plain_steps;           /* plain decoding steps taken because speculation measured
                                      slower (speculation_min_gain); one token each, not in steps */
} specla_spec_stats;

/* Speculative counterpart of specla_generate: same arguments plus the drafter; `stats` (may be
 * NULL) receives what the drafter and the verifier did. */
SPECLA_API specla_status specla_generate_speculative(specla_session *session, specla_drafter *drafter,
                                                     const int32_t *prompt, size_t n_prompt,
                                                     const specla_spec_params *params, int32_t *out_tokens,
                                                     size_t out_capacity, size_t *n_out,
                                                     specla_spec_stats *stats);

/* Speculative counterpart of specla_generate_text. */
SPECLA_API specla_status specla_generate_speculative_text(specla_session *session, specla_drafter *drafter,
                                                          const char *prompt, const specla_spec_params *params,
                                                          char **out_text, size_t *n_generated,
                                                          specla_spec_stats *stats);

/* How specla_session_verify_tree verifies. */
typedef struct specla_verify_params {
    size_t struct_size;                      /* sizeof(this struct) as the caller was compiled */
    const specla_sampling_params *sampling;  /* acceptance; NULL = the defaults (greedy) */
    bool deferred_commit;                    /* apply accepted factors inside the next pass
                                                (default true) */
    specla_tree_algorithm tree_algorithm;    /* how the tree pass runs (default SPECLA_TREE_AUTO) */
} specla_verify_params;

/* Fill *params with the defaults for a struct of struct_size bytes (sizeof(*params)); NULL or a
 * struct_size below sizeof(size_t) is SPECLA_ERR_INVALID_ARGUMENT. */
SPECLA_API specla_status specla_verify_params_init(specla_verify_params *params, size_t struct_size);
/* The defaults by value (a convenience over specla_verify_params_init). */
static inline specla_verify_params specla_verify_default_params(void) {
    specla_verify_params params;
    specla_verify_params_init(&params, sizeof params);
    return params;
}

/* The verification primitive, for callers that bring their own drafter. The tree has n_nodes
 * (>= 0, at most the session's max_tree_nodes) in topological order: `parents[i]` < i is the
 * index of node i's parent, or -1 for a candidate of the first position after the context (a
 * chain: -1, 0, 1, ...). `draft_dists` (may be NULL) holds n_nodes x vocab_size floats: row i is
 * the drafter distribution node i's token was drawn from (siblings share their parent's row);
 * NULL means the candidates were chosen deterministically. The target verifies every node
 * against its own ancestors, acceptance follows `params->sampling` (seed: the random stream of this
 * call; SPECLA_SEED_RANDOM is not reported back here; penalties count the session's context
 * followed by each node's ancestors), and the session's context then holds the accepted tokens followed by the target's next
 * token `*bonus_token` (fed at the next call). `accepted_nodes` (capacity n_nodes, may be NULL
 * when n_nodes is 0) receives the accepted node indices root to leaf, `*n_accepted` their count.
 * `node_logits` (may be NULL) receives the target logits after every node, n_nodes x vocab_size.
 * `params` may be NULL (the defaults). */
SPECLA_API specla_status specla_session_verify_tree(specla_session *session, const int32_t *tokens,
                                                    const int32_t *parents, size_t n_nodes,
                                                    const float *draft_dists,
                                                    const specla_verify_params *params,
                                                    int32_t *accepted_nodes,
                                                    size_t *n_accepted, int32_t *bonus_token,
                                                    float *node_logits);

/* ------------------------------------------------------------------------------------------ */
/* Pull-style generation                                                                       */
/* ------------------------------------------------------------------------------------------ */

/* The generation of specla_generate / specla_generate_speculative, driven by the caller one step
 * at a time (both are one implementation: with the same arguments they give the same tokens and
 * the same text). A step is one decoding step, or with a drafter one verification pass, so
 * speculative output arrives as soon as it is verified. Any thread may ask it to stop.
 *
 *     specla_generation *gen = NULL;
 *     specla_generate_params g = specla_generate_default_params();  (budget, stops...)
 *     specla_spec_params p = specla_spec_default_params();
 *     p.generate = &g;
 *     if (specla_generation_begin_text(session, NULL, "def f(", 6, &p, &gen) == SPECLA_OK) {
 *         specla_generation_step step = {.struct_size = sizeof(specla_generation_step)};
 *         while (specla_generation_next(gen, &step) == SPECLA_OK) {
 *             fwrite(step.text, 1, step.text_len, stdout);
 *             if (step.finish_reason != SPECLA_FINISH_NONE) break;
 *         }
 *         specla_generation_free(gen);
 *     }
 *
 * While a generation has not ended, its session and drafter belong to it: other calls on them
 * (generation, evaluation, reset, verification, another begin) return SPECLA_ERR_STATE. Freeing
 * the session or the drafter ends it (its handle must still be freed). */
typedef struct specla_generation specla_generation;

typedef enum specla_finish_reason {
    SPECLA_FINISH_NONE = 0,        /* not finished: more steps follow */
    SPECLA_FINISH_EOS = 1,         /* the model's EOS token (params->generate->stop_at_eos) */
    SPECLA_FINISH_STOP_STRING = 2, /* a stop string completed; specla_generation_step.stop_index */
    SPECLA_FINISH_MAX_TOKENS = 3,  /* params->generate->max_tokens tokens were generated */
    SPECLA_FINISH_ABORTED = 4,     /* specla_generation_abort */
    SPECLA_FINISH_ERROR = 5        /* a step failed: specla_generation_next returned its status */
} specla_finish_reason;

/* A short constant English name ("SPECLA_FINISH_EOS: end-of-sequence token"). */
SPECLA_API const char *specla_finish_reason_string(specla_finish_reason reason);

/* One step's output. The pointers point into the generation, which owns the buffers: they stay
 * valid until the next call on it (specla_generation_next, _end or _free); copy what you keep. */
typedef struct specla_generation_step {
    size_t struct_size;                  /* sizeof(this struct) as the caller was compiled */
    const int32_t *tokens;               /* the tokens of this step (n_tokens; NULL when 0) */
    size_t n_tokens;
    const char *text;                    /* the text this step made final, text_len bytes plus a
                                            NUL (a NUL inside only where the model decoded
                                            U+0000); never taken back later; "" when there is
                                            none yet (an incomplete character, a possible stop
                                            string held back, a special token, no tokenizer) */
    size_t text_len;
    specla_finish_reason finish_reason;  /* SPECLA_FINISH_NONE unless this step was the last */
    int32_t stop_index;                  /* SPECLA_FINISH_STOP_STRING: which of
                                            params->generate->stop_strings; otherwise -1 */
    /* With params->generate->logprobs (otherwise NULL and 0): */
    const float *logprobs;               /* n_tokens values: each token's log-probability */
    const int32_t *top_ids;              /* n_tokens x n_top ids, row-major: the most likely
                                            candidates at each token's position, most likely
                                            first (ties: lower id first); NULL when n_top is 0 */
    const float *top_logprobs;           /* their log-probabilities, the same layout */
    int32_t n_top;                       /* params->generate->top_logprobs */
} specla_generation_step;

/* Begin a generation on `session` after `prompt` (n_prompt ids; 0 continues the session's
 * context), speculative when `drafter` is not NULL (every field of params applies; without a
 * drafter only params->generate). params->generate->on_token must be NULL: the steps come from
 * specla_generation_next. Stop strings are copied; nothing passed in is kept. Everything is
 * checked here (SPECLA_ERR_INVALID_ARGUMENT naming the parameter, SPECLA_ERR_TOKEN_OUT_OF_RANGE,
 * SPECLA_ERR_STATE when the session or the drafter is in use by a generation that has not
 * ended), but nothing is evaluated: the first specla_generation_next feeds the prompt. `*out`
 * owns the generation: release it with specla_generation_free (before or after its session). */
SPECLA_API specla_status specla_generation_begin(specla_session *session, specla_drafter *drafter,
                                                 const int32_t *prompt, size_t n_prompt,
                                                 const specla_spec_params *params, specla_generation **out);

/* The same from UTF-8 text (`prompt_len` bytes; NUL bytes are text), tokenized as
 * specla_generate_text does (BOS per the tokenizer's default, special tokens parsed);
 * SPECLA_ERR_STATE when the model has no tokenizer. */
SPECLA_API specla_status specla_generation_begin_text(specla_session *session, specla_drafter *drafter,
                                                      const char *prompt, size_t prompt_len,
                                                      const specla_spec_params *params,
                                                      specla_generation **out);

/* Run one step and describe it in `*out`. The first call feeds the prompt, in blocks (the
 * backend's interruptible block: 8 tokens on the CPU), checking for an abort before each, then
 * picks the first token; every later call is one decoding step or one verification pass. The
 * step whose finish_reason is not SPECLA_FINISH_NONE is the last and carries the rest of the
 * text; a next call after it returns SPECLA_ERR_STATE. A failing step returns its status and
 * finishes the generation with SPECLA_FINISH_ERROR. The session holds, between steps and after
 * the end, the prompt (or the blocks of it fed before an abort) and every token of the steps
 * returned, exactly as after specla_generate. */
SPECLA_API specla_status specla_generation_next(specla_generation *gen, specla_generation_step *out);

/* Ask the generation to stop. Callable from any thread, also while specla_generation_next runs
 * on another: that call returns within one prompt block or one step, with SPECLA_FINISH_ABORTED
 * (the tokens of a step that was running are kept and returned); if none runs, the next one
 * does so at once. Nothing happens when the generation has finished already; SPECLA_ERR_STATE
 * once it has ended (specla_generation_end, or its session or drafter freed). Never call it at
 * the same time as specla_generation_free of the same handle. */
SPECLA_API specla_status specla_generation_abort(specla_generation *gen);

/* End the generation (finished or not): the session and the drafter are free for other calls;
 * text still held back is dropped. Calling it again does nothing. */
SPECLA_API specla_status specla_generation_end(specla_generation *gen);

/* What the generation did so far (also after it ended); for a plain generation, each token is
 * one step and nothing is drafted. */
SPECLA_API specla_status specla_generation_stats(const specla_generation *gen, specla_spec_stats *out);

/* End the generation if needed and release the handle. NULL is a no-op. */
SPECLA_API void specla_generation_free(specla_generation *gen);

#ifdef __cplusplus
}
#endif

#endif /* SPECLA_SPECLA_H */
