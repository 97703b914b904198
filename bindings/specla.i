/* SWIG interface of SpecLA for Java, C# and Go.
 *
 * One module over include/specla/specla.h. The C API's conventions (status codes with a per-thread
 * message, handles returned through out-parameters, caller-sized buffers) do not map directly onto
 * managed languages, so this file puts a thin C layer between the header and SWIG:
 *
 *  - Handles are boxed: Model, Session, Drafter, Generation and StreamDecoder wrap a library
 *    handle in a small struct, which becomes a class (Java, C#) or type (Go) with an explicit
 *    close. A model box is reference counted by the boxes that need it, so the library's rule
 *    "free the model last" holds whatever order a program (or a garbage collector) closes them in.
 *  - The one call of specla_session_verify_tree is specla_binding_call_verify_tree, so that a
 *    change of its C signature touches one function here.
 *  - The header passes nested params by pointer (specla_generate_params.sampling,
 *    specla_spec_params.generate). A GenerateParams or SpecParams of the bindings owns what it
 *    points to: one allocation holds the struct and its nested structs, the getters return views
 *    into it and the setters copy into it, so the languages handle them as values. A sampling
 *    struct of the bindings owns its logit bias entries and a GenerateParams its stop strings the
 *    same way (freed with it, copied by the setters).
 *  - Info structs (and the step of a generation) are allocated with their struct_size set.
 *  - Log messages reach each language through a trampoline in its own .swg (Go: log.go), not
 *    through SWIG: see there for why.
 *  - Every helper leaves the status of its call in a per-thread record next to the library's own
 *    message. Java and C# turn a failure into a SpeclaException inside the same wrapper call; the
 *    Go package reads the record right after the call, on the same OS thread.
 *  - Buffers the library fills (generated tokens, logits, text) are allocated by the helper at the
 *    size the call needs and handed to the language as one of the specla_binding_* buffer structs;
 *    the language's typemap copies it into a native array or string and frees it.
 *
 * Per-language typemaps (arrays, strings, exceptions) live next to each language's sources and are
 * included below. Nothing here is C++: the wrappers compile as C11.
 */

#if defined(SWIGGO)
%module specla
#else
%module Specla
#endif

%include <stdint.i>

/* ==== The C layer ======================================================================== */

%{
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "specla/specla.h"

/* ---- Per-thread record of the last helper call ----------------------------------------------
 * The library keeps its message per thread, so the status belongs there too. A failure the
 * binding detects itself (a closed handle, an allocation of its own) carries a static message;
 * otherwise the message is the library's specla_last_error(). */
static _Thread_local specla_status specla_binding_status = SPECLA_OK;
static _Thread_local const char *specla_binding_message = NULL;

static void specla_binding_begin(void) {
    specla_binding_status = SPECLA_OK;
    specla_binding_message = NULL;
}

/* Records a library status; true when the call succeeded. */
static bool specla_binding_check(specla_status status) {
    if (status != SPECLA_OK) {
        specla_binding_status = status;
        specla_binding_message = NULL;
    }
    return status == SPECLA_OK;
}

static void specla_binding_fail(specla_status status, const char *static_message) {
    specla_binding_status = status;
    specla_binding_message = static_message;
}

static specla_status specla_binding_last_status(void) { return specla_binding_status; }

static const char *specla_binding_last_message(void) {
    if (specla_binding_status == SPECLA_OK) return "";
    return specla_binding_message ? specla_binding_message : specla_last_error();
}

/* ---- Buffers handed to the language ----------------------------------------------------------
 * Allocated here with malloc, released with free by the language's typemap once copied. A failed
 * call hands back {NULL, 0}. */
typedef struct specla_binding_tokens { int32_t *data; size_t size; } specla_binding_tokens;
typedef struct specla_binding_floats { float *data; size_t size; } specla_binding_floats;
typedef struct specla_binding_text { char *data; size_t size; } specla_binding_text;

static void *specla_binding_alloc(size_t count, size_t element_size) {
    if (count == 0) return NULL;
    if (count > SIZE_MAX / element_size) {
        specla_binding_fail(SPECLA_ERR_OUT_OF_MEMORY, "the requested buffer is too large");
        return NULL;
    }
    void *p = malloc(count * element_size);
    if (!p) specla_binding_fail(SPECLA_ERR_OUT_OF_MEMORY, "out of host memory in the language binding");
    return p;
}

/* One size-prefixed struct for the library to fill: zeroed, struct_size (its first field) set. */
static void *specla_binding_alloc_info(size_t struct_size) {
    void *p = specla_binding_alloc(1, struct_size);
    if (p) {
        memset(p, 0, struct_size);
        memcpy(p, &struct_size, sizeof struct_size);
    }
    return p;
}

/* Exported so that languages which copy buffers on their own side (C#) release them here, with
 * the allocator that made them. */
#if defined(_WIN32)
__declspec(dllexport)
#elif defined(__GNUC__)
__attribute__((visibility("default")))
#endif
void specla_binding_free(void *buffer) { free(buffer); }

/* ---- Handle boxes ---------------------------------------------------------------------------- */
typedef struct specla_binding_model {
    specla_model *model;
    atomic_int references; /* the user's handle plus one per open session and drafter */
} specla_binding_model;

typedef struct specla_binding_session {
    specla_session *session;
    specla_binding_model *model; /* holds a reference: the library frees a model after its sessions */
} specla_binding_session;

typedef struct specla_binding_drafter {
    specla_drafter *drafter;
    specla_binding_model *model; /* holds a reference, as a session does */
} specla_binding_drafter;

static void specla_binding_retain_model(specla_binding_model *box) {
    atomic_fetch_add(&box->references, 1);
}

static void specla_binding_release_model(specla_binding_model *box) {
    if (box && atomic_fetch_sub(&box->references, 1) == 1) {
        specla_model_free(box->model);
        free(box);
    }
}

/* A closed handle reaches C as NULL (Java and C# zero their pointer on close, Go passes 0). */
static specla_model *specla_binding_open_model(const specla_binding_model *box) {
    if (!box) specla_binding_fail(SPECLA_ERR_INVALID_ARGUMENT, "the model is closed (or null)");
    return box ? box->model : NULL;
}

static specla_session *specla_binding_open_session(const specla_binding_session *box) {
    if (!box) specla_binding_fail(SPECLA_ERR_INVALID_ARGUMENT, "the session is closed (or null)");
    return box ? box->session : NULL;
}

static specla_drafter *specla_binding_open_drafter(const specla_binding_drafter *box) {
    if (!box) specla_binding_fail(SPECLA_ERR_INVALID_ARGUMENT, "the drafter is closed (or null)");
    return box ? box->drafter : NULL;
}

/* ---- Model ------------------------------------------------------------------------------------ */
static specla_binding_model *specla_binding_load_model(const char *folder, const specla_model_params *params) {
    specla_binding_begin();
    specla_model *model = NULL;
    if (!specla_binding_check(specla_model_load(folder, params, &model)))
        return NULL;
    specla_binding_model *box = specla_binding_alloc(1, sizeof *box);
    if (!box) {
        specla_model_free(model);
        return NULL;
    }
    box->model = model;
    atomic_init(&box->references, 1);
    return box;
}

/* Information queries hand back a malloc'd copy (NULL on failure); the language's proxy owns it
 * and frees it, so a failed query leaves nothing behind. */
static specla_model_info *specla_binding_get_model_info(const specla_binding_model *box) {
    specla_binding_begin();
    specla_model *model = specla_binding_open_model(box);
    specla_model_info *info = model ? specla_binding_alloc_info(sizeof *info) : NULL;
    if (info && !specla_binding_check(specla_model_get_info(model, info))) {
        free(info);
        info = NULL;
    }
    return info;
}

static specla_memory_stats *specla_binding_get_memory_stats(const specla_binding_model *box) {
    specla_binding_begin();
    specla_model *model = specla_binding_open_model(box);
    specla_memory_stats *stats = model ? specla_binding_alloc_info(sizeof *stats) : NULL;
    if (stats && !specla_binding_check(specla_model_memory_stats(model, stats))) {
        free(stats);
        stats = NULL;
    }
    return stats;
}

static const specla_tokenizer *specla_binding_tokenizer_of(const specla_binding_model *box) {
    const specla_model *model = specla_binding_open_model(box);
    const specla_tokenizer *tokenizer = NULL;
    if (model) specla_binding_check(specla_model_tokenizer(model, &tokenizer));
    return tokenizer;
}

static specla_tokenizer_info *specla_binding_get_tokenizer_info(const specla_binding_model *box) {
    specla_binding_begin();
    const specla_tokenizer *tokenizer = specla_binding_tokenizer_of(box);
    specla_tokenizer_info *info = tokenizer ? specla_binding_alloc_info(sizeof *info) : NULL;
    if (info && !specla_binding_check(specla_tokenizer_get_info(tokenizer, info))) {
        free(info);
        info = NULL;
    }
    return info;
}

/* add_bos < 0: the tokenizer's own default, as specla_generate_text uses. */
static specla_binding_tokens specla_binding_tokenize(const specla_binding_model *box, const char *text,
                                                           int add_bos, bool parse_special) {
    specla_binding_begin();
    specla_binding_tokens out = {NULL, 0};
    const specla_tokenizer *tokenizer = specla_binding_tokenizer_of(box);
    if (!tokenizer) return out;
    if (!text) {
        specla_binding_fail(SPECLA_ERR_INVALID_ARGUMENT, "the text to tokenize is null");
        return out;
    }
    if (add_bos < 0) {
        specla_tokenizer_info info = {.struct_size = sizeof(specla_tokenizer_info)};
        if (!specla_binding_check(specla_tokenizer_get_info(tokenizer, &info))) return out;
        add_bos = info.add_bos_default;
    }
    /* One id per byte plus BOS covers byte-level BPE; the sized second call covers the rest. */
    const size_t text_len = strlen(text);
    size_t capacity = text_len + 2, needed = 0;
    for (int attempt = 0; attempt < 2; ++attempt) {
        int32_t *ids = specla_binding_alloc(capacity, sizeof *ids);
        if (!ids) return out;
        const specla_status st =
            specla_tokenize(tokenizer, text, text_len, add_bos != 0, parse_special, ids, capacity, &needed);
        if (st == SPECLA_OK) {
            out.data = ids;
            out.size = needed;
            return out;
        }
        free(ids);
        if (st != SPECLA_ERR_CAPACITY || attempt == 1) {
            specla_binding_check(st);
            return out;
        }
        capacity = needed;
    }
    return out;
}

static specla_binding_text specla_binding_detokenize(const specla_binding_model *box, const int32_t *tokens,
                                                           size_t n_tokens, bool skip_special) {
    specla_binding_begin();
    specla_binding_text out = {NULL, 0};
    const specla_tokenizer *tokenizer = specla_binding_tokenizer_of(box);
    if (!tokenizer) return out;
    size_t capacity = 16 * n_tokens + 1, needed = 0;
    for (int attempt = 0; attempt < 2; ++attempt) {
        char *text = specla_binding_alloc(capacity, 1);
        if (!text) return out;
        const specla_status st =
            specla_detokenize(tokenizer, tokens, n_tokens, skip_special, text, capacity, &needed);
        if (st == SPECLA_OK) {
            out.data = text;
            out.size = needed;
            return out;
        }
        free(text);
        if (st != SPECLA_ERR_CAPACITY || attempt == 1) {
            specla_binding_check(st);
            return out;
        }
        capacity = needed + 1;
    }
    return out;
}

/* ---- Session and drafter ---------------------------------------------------------------------- */
static specla_binding_session *specla_binding_create_session(specla_binding_model *model_box,
                                                             const specla_session_params *params) {
    specla_binding_begin();
    specla_model *model = specla_binding_open_model(model_box);
    if (!model) return NULL;
    specla_session *session = NULL;
    if (!specla_binding_check(
            specla_session_create(model, params, &session)))
        return NULL;
    specla_binding_session *box = specla_binding_alloc(1, sizeof *box);
    if (!box) {
        specla_session_free(session);
        return NULL;
    }
    box->session = session;
    box->model = model_box;
    specla_binding_retain_model(model_box);
    return box;
}

static void specla_binding_close_session(specla_binding_session *box) {
    if (!box) return;
    specla_session_free(box->session);
    specla_binding_release_model(box->model);
    free(box);
}

static specla_binding_drafter *specla_binding_create_drafter(specla_binding_model *model_box,
                                                             const specla_drafter_params *params) {
    specla_binding_begin();
    specla_model *model = specla_binding_open_model(model_box);
    if (!model) return NULL;
    specla_drafter *drafter = NULL;
    if (!specla_binding_check(
            specla_drafter_create(model, params, &drafter)))
        return NULL;
    specla_binding_drafter *box = specla_binding_alloc(1, sizeof *box);
    if (!box) {
        specla_drafter_free(drafter);
        return NULL;
    }
    box->drafter = drafter;
    box->model = model_box;
    specla_binding_retain_model(model_box);
    return box;
}

static void specla_binding_close_drafter(specla_binding_drafter *box) {
    if (!box) return;
    specla_drafter_free(box->drafter);
    specla_binding_release_model(box->model);
    free(box);
}

static void specla_binding_reset(specla_binding_session *box) {
    specla_binding_begin();
    specla_session *session = specla_binding_open_session(box);
    if (session) specla_binding_check(specla_session_reset(session));
}

static int64_t specla_binding_n_past(const specla_binding_session *box) {
    specla_binding_begin();
    int64_t n = 0;
    specla_session *session = specla_binding_open_session(box);
    if (session) specla_binding_check(specla_session_n_past(session, &n));
    return n;
}

static specla_binding_floats specla_binding_eval(specla_binding_session *box, const int32_t *tokens,
                                                         size_t n_tokens, specla_logits_mode mode) {
    specla_binding_begin();
    specla_binding_floats out = {NULL, 0};
    specla_session *session = specla_binding_open_session(box);
    if (!session) return out;
    specla_model_info info = {.struct_size = sizeof(specla_model_info)};
    if (!specla_binding_check(specla_model_get_info(box->model->model, &info))) return out;
    size_t rows = mode == SPECLA_LOGITS_ALL ? n_tokens : mode == SPECLA_LOGITS_LAST ? 1 : 0;
    if (rows > 0 && (size_t)info.vocab_size > SIZE_MAX / rows) {
        specla_binding_fail(SPECLA_ERR_OUT_OF_MEMORY, "the requested logits do not fit in memory");
        return out;
    }
    const size_t capacity = rows * (size_t)info.vocab_size;
    float *logits = specla_binding_alloc(capacity, sizeof *logits);
    if (capacity > 0 && !logits) return out;
    if (!specla_binding_check(specla_session_eval(session, tokens, n_tokens, mode, logits, capacity))) {
        free(logits);
        return out;
    }
    out.data = logits;
    out.size = capacity;
    return out;
}

/* The token budget of generation params (NULL: the default one). */
static int32_t specla_binding_max_tokens(const specla_generate_params *params) {
    return params ? params->max_tokens : specla_generate_default_params().max_tokens;
}

/* Room for the whole budget: the C API requires out_capacity >= max_tokens. */
static int32_t *specla_binding_token_budget(int32_t max_tokens, size_t *capacity) {
    *capacity = max_tokens > 0 ? (size_t)max_tokens : 0;
    return specla_binding_alloc(*capacity, sizeof(int32_t));
}

static specla_binding_tokens specla_binding_generate(specla_binding_session *box, const int32_t *prompt,
                                                             size_t n_prompt, const specla_generate_params *params) {
    specla_binding_begin();
    specla_binding_tokens out = {NULL, 0};
    specla_session *session = specla_binding_open_session(box);
    if (!session) return out;
    size_t capacity = 0, n = 0;
    int32_t *tokens = specla_binding_token_budget(specla_binding_max_tokens(params), &capacity);
    if (capacity > 0 && !tokens) return out;
    if (!specla_binding_check(specla_generate(session, prompt, n_prompt, params, tokens, capacity, &n))) {
        free(tokens);
        return out;
    }
    out.data = tokens;
    out.size = n;
    return out;
}

static specla_binding_tokens specla_binding_generate_speculative(
    specla_binding_session *box, specla_binding_drafter *drafter_box, const int32_t *prompt, size_t n_prompt,
    const specla_spec_params *params, specla_spec_stats *stats) {
    specla_binding_begin();
    specla_binding_tokens out = {NULL, 0};
    specla_session *session = specla_binding_open_session(box);
    if (!session) return out;
    specla_drafter *drafter = specla_binding_open_drafter(drafter_box);
    if (!drafter) return out;
    size_t capacity = 0, n = 0;
    const int32_t max_tokens = specla_binding_max_tokens(params ? params->generate : NULL);
    int32_t *tokens = specla_binding_token_budget(max_tokens, &capacity);
    if (capacity > 0 && !tokens) return out;
    if (!specla_binding_check(
            specla_generate_speculative(session, drafter, prompt, n_prompt, params, tokens, capacity, &n, stats))) {
        free(tokens);
        return out;
    }
    out.data = tokens;
    out.size = n;
    return out;
}

/* Moves a library string into a binding buffer, so that every buffer a language receives is
 * released the same way (free), whoever allocated its contents. */
static specla_binding_text specla_binding_take_library_text(char *library_text) {
    specla_binding_text out = {NULL, 0};
    if (!library_text) return out;
    const size_t size = strlen(library_text);
    out.data = specla_binding_alloc(size + 1, 1);
    if (out.data) {
        memcpy(out.data, library_text, size + 1);
        out.size = size;
    }
    specla_string_free(library_text);
    return out;
}

static specla_binding_text specla_binding_generate_text(specla_binding_session *box, const char *prompt,
                                                                const specla_generate_params *params) {
    specla_binding_begin();
    specla_binding_text out = {NULL, 0};
    specla_session *session = specla_binding_open_session(box);
    if (!session) return out;
    char *text = NULL;
    if (!specla_binding_check(specla_generate_text(
            session, prompt, params, &text, NULL)))
        return out;
    return specla_binding_take_library_text(text);
}

static specla_binding_text specla_binding_generate_speculative_text(
    specla_binding_session *box, specla_binding_drafter *drafter_box, const char *prompt,
    const specla_spec_params *params, specla_spec_stats *stats) {
    specla_binding_begin();
    specla_binding_text out = {NULL, 0};
    specla_session *session = specla_binding_open_session(box);
    if (!session) return out;
    specla_drafter *drafter = specla_binding_open_drafter(drafter_box);
    if (!drafter) return out;
    char *text = NULL;
    if (!specla_binding_check(specla_generate_speculative_text(
            session, drafter, prompt, params, &text, NULL, stats)))
        return out;
    return specla_binding_take_library_text(text);
}

/* ---- Session state ---------------------------------------------------------------------------- */
typedef struct specla_binding_bytes { uint8_t *data; size_t size; } specla_binding_bytes;

static specla_binding_bytes specla_binding_save_state(specla_binding_session *box) {
    specla_binding_begin();
    specla_binding_bytes out = {NULL, 0};
    specla_session *session = specla_binding_open_session(box);
    size_t needed = 0;
    if (!session) return out;
    /* The sizing call answers CAPACITY with the size. */
    const specla_status sized = specla_session_save_state(session, NULL, 0, &needed);
    if (sized != SPECLA_ERR_CAPACITY && !specla_binding_check(sized)) return out;
    uint8_t *bytes = specla_binding_alloc(needed, 1);
    if (!bytes) return out;
    if (!specla_binding_check(specla_session_save_state(session, bytes, needed, &needed))) {
        free(bytes);
        return out;
    }
    out.data = bytes;
    out.size = needed;
    return out;
}

static specla_session_memory *specla_binding_get_session_memory(const specla_binding_session *box) {
    specla_binding_begin();
    specla_session *session = specla_binding_open_session(box);
    specla_session_memory *memory = session ? specla_binding_alloc_info(sizeof *memory) : NULL;
    if (memory && !specla_binding_check(specla_session_get_memory(session, memory))) {
        free(memory);
        memory = NULL;
    }
    return memory;
}

/* ---- Pull-style generation --------------------------------------------------------------------
 * The box keeps the last step, whose buffers the generation owns until the next call on it, and
 * a reference to the model, so that the generation is released before the model whatever order
 * a garbage collector closes things in. specla_generation_abort may run on any thread while
 * specla_generation_next runs on another; the languages keep it from racing with the free. */
typedef struct specla_binding_generation {
    specla_generation *generation;
    specla_binding_model *model;
    specla_generation_step step;
} specla_binding_generation;

static specla_binding_generation *specla_binding_begin_generation(
    specla_binding_session *box, specla_binding_drafter *drafter_box, const char *prompt_text,
    const int32_t *prompt, size_t n_prompt, const specla_spec_params *params) {
    specla_binding_begin();
    specla_session *session = specla_binding_open_session(box);
    if (!session) return NULL;
    specla_drafter *drafter = drafter_box ? drafter_box->drafter : NULL;
    specla_generation *generation = NULL;
    const specla_status st =
        prompt_text
            ? specla_generation_begin_text(session, drafter, prompt_text, strlen(prompt_text), params, &generation)
            : specla_generation_begin(session, drafter, prompt, n_prompt, params, &generation);
    if (!specla_binding_check(st)) return NULL;
    specla_binding_generation *gen = specla_binding_alloc(1, sizeof *gen);
    if (!gen) {
        specla_generation_free(generation);
        return NULL;
    }
    memset(gen, 0, sizeof *gen);
    gen->generation = generation;
    gen->model = box->model;
    gen->step.struct_size = sizeof gen->step;
    gen->step.stop_index = -1;
    specla_binding_retain_model(box->model);
    return gen;
}

/* Plain generation takes only the generate part of the speculative parameters (pointed to, not
 * copied: valid while `params` is). */
static specla_spec_params specla_binding_plain_params(const specla_generate_params *params) {
    specla_spec_params p = specla_spec_default_params();
    p.generate = params;
    return p;
}

static specla_binding_generation *specla_binding_open_generation(specla_binding_generation *gen) {
    if (!gen) specla_binding_fail(SPECLA_ERR_INVALID_ARGUMENT, "the generation is closed (or null)");
    return gen;
}

/* One step; its text is copied with its explicit length (it may hold a NUL the model decoded). */
static specla_binding_text specla_binding_generation_next(specla_binding_generation *gen) {
    specla_binding_begin();
    specla_binding_text out = {NULL, 0};
    if (!specla_binding_open_generation(gen)) return out;
    const specla_status st = specla_generation_next(gen->generation, &gen->step);
    if (st != SPECLA_OK) {
        /* A refused call (after the end) leaves no step; a failed one finished with ERROR. */
        gen->step.n_tokens = 0;
        gen->step.text_len = 0;
        if (st != SPECLA_ERR_STATE) gen->step.finish_reason = SPECLA_FINISH_ERROR;
        specla_binding_check(st);
        return out;
    }
    out.data = specla_binding_alloc(gen->step.text_len + 1, 1);
    if (!out.data) return out;
    memcpy(out.data, gen->step.text, gen->step.text_len);
    out.data[gen->step.text_len] = '\0';
    out.size = gen->step.text_len;
    return out;
}

static specla_binding_tokens specla_binding_generation_tokens(specla_binding_generation *gen) {
    specla_binding_begin();
    specla_binding_tokens out = {NULL, 0};
    if (!specla_binding_open_generation(gen) || gen->step.n_tokens == 0) return out;
    out.data = specla_binding_alloc(gen->step.n_tokens, sizeof *out.data);
    if (!out.data) return out;
    memcpy(out.data, gen->step.tokens, gen->step.n_tokens * sizeof *out.data);
    out.size = gen->step.n_tokens;
    return out;
}

static specla_spec_stats *specla_binding_stats_of_generation(const specla_binding_generation *gen) {
    specla_binding_begin();
    if (!gen) {
        specla_binding_fail(SPECLA_ERR_INVALID_ARGUMENT, "the generation is closed (or null)");
        return NULL;
    }
    specla_spec_stats *stats = specla_binding_alloc_info(sizeof *stats);
    if (stats && !specla_binding_check(specla_generation_stats(gen->generation, stats))) {
        free(stats);
        stats = NULL;
    }
    return stats;
}

static void specla_binding_close_generation(specla_binding_generation *gen) {
    if (!gen) return;
    specla_generation_free(gen->generation);
    specla_binding_release_model(gen->model);
    free(gen);
}
%}

/* ==== The C layer: stop strings, tree verification, stream decoding ========================== */

%{
/* ---- Stop strings -----------------------------------------------------------------------------
 * Each GenerateParams of the bindings owns its stop strings, as each sampling struct owns its logit
 * bias entries (below, which says why ownership can be tied to the struct): one allocation, the
 * pointer array followed by the strings, freed with the struct or when replaced. Every copy of a
 * GenerateParams a language can make is made in this file (SpecParams.setGenerate, through
 * specla_spec_params_owned_generate_set), which copies the strings too; a view
 * (SpecParams.getGenerate) aliases its parent's, as it aliases the rest of its parent. The library
 * copies the strings when a generation starts, so a generation never depends on them, and a server
 * building a stop list per request frees each with its params. */

/* One allocation holding `n_strings` pointers and then the strings they point to, copied from
 * `packed` (n_bytes bytes, each string NUL-terminated); NULL when out of memory (recorded). */
static const char **specla_binding_stop_block(const char *packed, size_t n_bytes, size_t n_strings) {
    char **strings = specla_binding_alloc(1, n_strings * sizeof(char *) + n_bytes);
    if (!strings) return NULL;
    char *bytes = (char *)(strings + n_strings);
    memcpy(bytes, packed, n_bytes);
    for (size_t i = 0, at = 0; i < n_strings; ++i) {
        strings[i] = bytes + at;
        at += strlen(bytes + at) + 1;
    }
    return (const char **)strings;
}

/* Params' stop strings packed the same way (each NUL-terminated), for the languages to split. */
static specla_binding_bytes specla_binding_get_stop_strings(const specla_generate_params *params) {
    specla_binding_bytes out = {NULL, 0};
    size_t n_bytes = 0;
    for (size_t i = 0; i < params->n_stop_strings; ++i) n_bytes += strlen(params->stop_strings[i]) + 1;
    out.data = specla_binding_alloc(n_bytes, 1);
    if (!out.data) return out;
    for (size_t i = 0, at = 0; i < params->n_stop_strings; ++i) {
        const size_t n = strlen(params->stop_strings[i]) + 1;
        memcpy(out.data + at, params->stop_strings[i], n);
        at += n;
    }
    out.size = n_bytes;
    return out;
}

/* A copy of params' stop strings in a block of its own (NULL for none, or when out of memory:
 * *ok false, recorded). */
static const char **specla_binding_copy_stop_strings(const specla_generate_params *params, bool *ok) {
    *ok = true;
    if (params->n_stop_strings == 0) return NULL;
    specla_binding_bytes packed = specla_binding_get_stop_strings(params);
    const char **copy =
        packed.data ? specla_binding_stop_block((const char *)packed.data, packed.size, params->n_stop_strings) : NULL;
    free(packed.data);
    *ok = copy != NULL;
    return copy;
}

static void specla_binding_free_stop_strings(specla_generate_params *params) {
    free((void *)params->stop_strings);
    params->stop_strings = NULL;
    params->n_stop_strings = 0;
}

/* Sets params' stop strings from the packed list (n_strings 0: none); unchanged on failure. */
static void specla_binding_set_stop_strings(specla_generate_params *params, const void *packed, size_t n_bytes,
                                            size_t n_strings) {
    specla_binding_begin(); /* Go reads the record after the call (Java and C# begin in %exception) */
    if (n_strings == 0) {
        specla_binding_free_stop_strings(params);
        return;
    }
    const char *bytes = packed;
    size_t terminators = 0;
    for (size_t i = 0; i < n_bytes; ++i) terminators += bytes[i] == '\0';
    if (terminators != n_strings || (n_bytes > 0 && bytes[n_bytes - 1] != '\0')) {
        specla_binding_fail(SPECLA_ERR_INVALID_ARGUMENT, "a stop string contains a NUL character");
        return;
    }
    const char **strings = specla_binding_stop_block(bytes, n_bytes, n_strings);
    if (!strings) return;
    specla_binding_free_stop_strings(params);
    params->stop_strings = strings;
    params->n_stop_strings = n_strings;
}

/* ---- Logit bias entries -------------------------------------------------------------------------
 * Each sampling struct of the bindings owns its logit bias entries: a copy, freed with the
 * struct (bias lists are typically built per request: a server biasing each request's own tokens).
 * Ownership can be tied to the struct because every copy of a sampling struct a language can make
 * is made in this file (GenerateParams.setSampling, SpecParams.setGenerate), through
 * specla_binding_copy_sampling, which copies the entries too, and every sampling struct a
 * language holds lives in memory the binding allocated and frees (a SamplingParams, or the
 * block of a GenerateParams or SpecParams), whose destructors free the entries. A view
 * (getSampling) aliases its parent's entries, as it aliases the rest of its parent. */
static void specla_binding_free_sampling_entries(specla_sampling_params *sampling) {
    free((void *)sampling->logit_bias);
    sampling->logit_bias = NULL;
    sampling->n_logit_bias = 0;
}

/* *to = *from with a copy of from's entries (to's own are freed); false, and `to` unchanged, when
 * out of memory (recorded). */
static bool specla_binding_copy_sampling(specla_sampling_params *to, const specla_sampling_params *from) {
    if (to == from) return true;
    specla_logit_bias *entries = NULL;
    if (from->n_logit_bias > 0) {
        entries = specla_binding_alloc(from->n_logit_bias, sizeof *entries);
        if (!entries) return false;
        memcpy(entries, from->logit_bias, from->n_logit_bias * sizeof *entries);
    }
    specla_binding_free_sampling_entries(to);
    *to = *from;
    to->logit_bias = entries;
    return true;
}

/* Replaces the entries with tokens[i] -> biases[i]; n_tokens 0: none. The library checks the ids
 * and values when the struct is used, naming the entry. */
static void specla_binding_set_logit_bias(specla_sampling_params *sampling, const int32_t *tokens,
                                          size_t n_tokens, const float *biases, size_t n_biases) {
    specla_binding_begin(); /* Go reads the record after the call (Java and C# begin in %exception) */
    if (n_tokens != n_biases) {
        specla_binding_fail(SPECLA_ERR_INVALID_ARGUMENT, "logit_bias: one bias per token is needed");
        return;
    }
    specla_logit_bias *entries = NULL;
    if (n_tokens > 0) {
        entries = specla_binding_alloc(n_tokens, sizeof *entries);
        if (!entries) return;
        for (size_t i = 0; i < n_tokens; ++i) entries[i] = (specla_logit_bias){tokens[i], biases[i]};
    }
    specla_binding_free_sampling_entries(sampling);
    sampling->logit_bias = entries;
    sampling->n_logit_bias = n_tokens;
}

static specla_binding_tokens specla_binding_logit_bias_tokens(const specla_sampling_params *sampling) {
    specla_binding_tokens out = {specla_binding_alloc(sampling->n_logit_bias, sizeof(int32_t)), 0};
    if (!out.data) return out;
    for (size_t i = 0; i < sampling->n_logit_bias; ++i) out.data[i] = sampling->logit_bias[i].token;
    out.size = sampling->n_logit_bias;
    return out;
}

static specla_binding_floats specla_binding_logit_bias_values(const specla_sampling_params *sampling) {
    specla_binding_floats out = {specla_binding_alloc(sampling->n_logit_bias, sizeof(float)), 0};
    if (!out.data) return out;
    for (size_t i = 0; i < sampling->n_logit_bias; ++i) out.data[i] = sampling->logit_bias[i].bias;
    out.size = sampling->n_logit_bias;
    return out;
}

static specla_sampling_params *specla_binding_new_sampling_params(void) {
    specla_sampling_params *p = specla_binding_alloc(1, sizeof *p);
    if (p) *p = specla_sampling_default_params();
    return p;
}

static void specla_binding_free_sampling_params(specla_sampling_params *sampling) {
    if (!sampling) return;
    specla_binding_free_sampling_entries(sampling);
    free(sampling);
}

/* ---- Parameter structs that own what they point to ---------------------------------------------
 * One allocation per GenerateParams (the struct, then the sampling params it points to) and per
 * SpecParams (the struct, then a whole generate block); the struct comes first, so the
 * allocation's address is the struct's and the proxy's free releases all of it. */
typedef struct specla_binding_generate_block {
    specla_generate_params params;
    specla_sampling_params sampling;
} specla_binding_generate_block;

typedef struct specla_binding_spec_block {
    specla_spec_params params;
    specla_binding_generate_block generate;
} specla_binding_spec_block;

static void specla_binding_init_generate_block(specla_binding_generate_block *block) {
    block->params = specla_generate_default_params();
    block->sampling = specla_sampling_default_params();
    block->params.sampling = &block->sampling;
}

static specla_generate_params *specla_binding_new_generate_params(void) {
    specla_binding_generate_block *block = specla_binding_alloc(1, sizeof *block);
    if (block) specla_binding_init_generate_block(block);
    return block ? &block->params : NULL;
}

static specla_spec_params *specla_binding_new_spec_params(void) {
    specla_binding_spec_block *block = specla_binding_alloc(1, sizeof *block);
    if (!block) return NULL;
    block->params = specla_spec_default_params();
    specla_binding_init_generate_block(&block->generate);
    block->params.generate = &block->generate.params;
    return &block->params;
}

/* The accessors SWIG calls for the owned members (declared in the %extend blocks below). Every
 * GenerateParams and SpecParams a language holds was made by the constructors above (or is a
 * view into one), so the pointers lead into its own block, which it may write. */
static specla_sampling_params *specla_generate_params_owned_sampling_get(specla_generate_params *params) {
    return (specla_sampling_params *)params->sampling;
}

static void specla_generate_params_owned_sampling_set(specla_generate_params *params,
                                                      specla_sampling_params *value) {
    if (value) specla_binding_copy_sampling((specla_sampling_params *)params->sampling, value);
}

static specla_generate_params *specla_spec_params_owned_generate_get(specla_spec_params *params) {
    return (specla_generate_params *)params->generate;
}

/* Copies `value`, the sampling params it points to and its stop strings; the copy keeps pointing
 * into its own block. Unchanged when they cannot be copied (out of memory, recorded). */
static void specla_spec_params_owned_generate_set(specla_spec_params *params, specla_generate_params *value) {
    specla_generate_params *own = (specla_generate_params *)params->generate;
    if (!value || value == own) return;
    bool ok;
    const char **stops = specla_binding_copy_stop_strings(value, &ok);
    if (!ok) return;
    specla_sampling_params *own_sampling = (specla_sampling_params *)own->sampling;
    const specla_sampling_params defaults = specla_sampling_default_params();
    if (!specla_binding_copy_sampling(own_sampling, value->sampling ? value->sampling : &defaults)) {
        free((void *)stops);
        return;
    }
    specla_binding_free_stop_strings(own);
    *own = *value;
    own->sampling = own_sampling;
    own->stop_strings = stops;
}

/* The destructors of the blocks: what the structs inside own (bias entries, stop strings), then
 * the block. */
static void specla_binding_free_generate_params(specla_generate_params *params) {
    if (!params) return;
    specla_binding_free_sampling_entries((specla_sampling_params *)params->sampling);
    specla_binding_free_stop_strings(params);
    free(params);
}

static void specla_binding_free_spec_params(specla_spec_params *params) {
    if (!params) return;
    specla_generate_params *generate = (specla_generate_params *)params->generate;
    specla_binding_free_sampling_entries((specla_sampling_params *)generate->sampling);
    specla_binding_free_stop_strings(generate);
    free(params);
}

/* ---- Tree verification (bring your own drafter) ----------------------------------------------
 * specla_binding_call_verify_tree is the only place that calls specla_session_verify_tree, so
 * that a change of that C signature touches this one function. */
static specla_status specla_binding_call_verify_tree(specla_session *session, const int32_t *tokens,
                                                     const int32_t *parents, size_t n_nodes,
                                                     const float *draft_dists,
                                                     const specla_sampling_params *sampling,
                                                     bool deferred_commit,
                                                     specla_tree_algorithm tree_algorithm,
                                                     int32_t *accepted_nodes, size_t *n_accepted,
                                                     int32_t *bonus_token, float *node_logits) {
    specla_verify_params params = specla_verify_default_params();
    params.sampling = sampling;  /* NULL: the defaults (greedy) */
    params.deferred_commit = deferred_commit;
    params.tree_algorithm = tree_algorithm;
    return specla_session_verify_tree(session, tokens, parents, n_nodes, draft_dists, &params, accepted_nodes,
                                      n_accepted, bonus_token, node_logits);
}

/* What one verification gave: the accepted node indices root to leaf, the target's next token,
 * and (when asked for) the target's logits after every node, n_nodes x vocab_size. */
typedef struct specla_binding_verification {
    specla_binding_tokens accepted;
    int32_t bonus_token;
    specla_binding_floats node_logits;
} specla_binding_verification;

static void specla_binding_free_verification(specla_binding_verification *v) {
    if (!v) return;
    free(v->accepted.data);
    free(v->node_logits.data);
    free(v);
}

static specla_binding_verification *specla_binding_verify_tree(
    specla_binding_session *box, const int32_t *tokens, size_t n_tokens, const int32_t *parents, size_t n_parents,
    const float *draft_dists, size_t n_draft_dists, const specla_sampling_params *sampling, bool deferred_commit,
    specla_tree_algorithm tree_algorithm, bool want_node_logits) {
    specla_binding_begin();
    specla_session *session = specla_binding_open_session(box);
    if (!session) return NULL;
    if (n_parents != n_tokens) {
        specla_binding_fail(SPECLA_ERR_INVALID_ARGUMENT, "the tree needs one parent per token");
        return NULL;
    }
    specla_model_info info = {.struct_size = sizeof(specla_model_info)};
    if (!specla_binding_check(specla_model_get_info(box->model->model, &info))) return NULL;
    const size_t vocab = (size_t)info.vocab_size;
    if (n_tokens > 0 && vocab > SIZE_MAX / n_tokens) {
        specla_binding_fail(SPECLA_ERR_INVALID_ARGUMENT, "the tree is too large");
        return NULL;
    }
    if (n_draft_dists == 0) draft_dists = NULL; /* an empty array: chosen deterministically */
    if (draft_dists && n_draft_dists != n_tokens * vocab) {
        specla_binding_fail(SPECLA_ERR_INVALID_ARGUMENT,
                            "the draft distributions need vocab_size floats per token (or none)");
        return NULL;
    }
    specla_binding_verification *v = specla_binding_alloc(1, sizeof *v);
    if (!v) return NULL;
    memset(v, 0, sizeof *v);
    v->accepted.data = specla_binding_alloc(n_tokens, sizeof(int32_t));
    if (want_node_logits) v->node_logits.data = specla_binding_alloc(n_tokens * vocab, sizeof(float));
    if ((n_tokens > 0 && !v->accepted.data) || (want_node_logits && n_tokens > 0 && !v->node_logits.data) ||
        !specla_binding_check(specla_binding_call_verify_tree(session, tokens, parents, n_tokens, draft_dists,
                                                              sampling, deferred_commit, tree_algorithm,
                                                              v->accepted.data,
                                                              &v->accepted.size, &v->bonus_token,
                                                              v->node_logits.data))) {
        specla_binding_free_verification(v);
        return NULL;
    }
    if (want_node_logits) v->node_logits.size = n_tokens * vocab;
    return v;
}

/* Buffers handed to the language are released by it: these hand over a copy. */
static specla_binding_tokens specla_binding_copy_tokens(const specla_binding_tokens *from) {
    specla_binding_tokens out = {specla_binding_alloc(from->size, sizeof(int32_t)), 0};
    if (out.data) {
        memcpy(out.data, from->data, from->size * sizeof(int32_t));
        out.size = from->size;
    }
    return out;
}

static specla_binding_floats specla_binding_copy_floats(const specla_binding_floats *from) {
    specla_binding_floats out = {specla_binding_alloc(from->size, sizeof(float)), 0};
    if (out.data) {
        memcpy(out.data, from->data, from->size * sizeof(float));
        out.size = from->size;
    }
    return out;
}

/* ---- Stream decoder ----------------------------------------------------------------------------
 * Holds a reference to the model, whose tokenizer the decoder reads: the library's rule "the
 * tokenizer outlives the decoder" then holds whatever order things are closed in. */
typedef struct specla_binding_stream_decoder {
    specla_stream_decoder *decoder;
    specla_binding_model *model;
} specla_binding_stream_decoder;

static specla_binding_stream_decoder *specla_binding_create_stream_decoder(specla_binding_model *model_box,
                                                                           bool skip_special) {
    specla_binding_begin();
    const specla_tokenizer *tokenizer = specla_binding_tokenizer_of(model_box);
    if (!tokenizer) return NULL;
    specla_stream_decoder *decoder = NULL;
    if (!specla_binding_check(specla_stream_decoder_create(tokenizer, skip_special, &decoder))) return NULL;
    specla_binding_stream_decoder *box = specla_binding_alloc(1, sizeof *box);
    if (!box) {
        specla_stream_decoder_free(decoder);
        return NULL;
    }
    box->decoder = decoder;
    box->model = model_box;
    specla_binding_retain_model(model_box);
    return box;
}

static void specla_binding_close_stream_decoder(specla_binding_stream_decoder *box) {
    if (!box) return;
    specla_stream_decoder_free(box->decoder);
    specla_binding_release_model(box->model);
    free(box);
}

/* flush when token < 0: the piece the call made final, copied. */
static specla_binding_text specla_binding_stream_decode(specla_binding_stream_decoder *box, int32_t token,
                                                        bool flush) {
    specla_binding_begin();
    specla_binding_text out = {NULL, 0};
    if (!box) {
        specla_binding_fail(SPECLA_ERR_INVALID_ARGUMENT, "the stream decoder is closed (or null)");
        return out;
    }
    const char *piece = NULL;
    if (!specla_binding_check(flush ? specla_stream_decoder_flush(box->decoder, &piece)
                                    : specla_stream_decoder_push(box->decoder, token, &piece)))
        return out;
    const size_t n = piece ? strlen(piece) : 0;
    out.data = specla_binding_alloc(n + 1, 1);
    if (!out.data) return out;
    memcpy(out.data, piece ? piece : "", n + 1);
    out.size = n;
    return out;
}
%}

/* ==== Names ================================================================================== */

/* Functions of the header are reached through the classes below; only a few stay module-level. */
%rename("$ignore", regextarget=1, %$isfunction) "^specla_";

/* Callbacks and borrowed pointer arrays have no safe managed counterpart in this binding
 * (progress is C-only for now; streaming is the Generation class below; stop strings go through
 * GenerateParams' packed setter, logging through each language's trampoline); per-depth
 * statistics are C arrays. */
%ignore specla_model_params::progress_callback;
%ignore specla_model_params::progress_user_data;
%ignore specla_generate_params::on_token;
%ignore specla_generate_params::user_data;
%ignore specla_generate_params::stop_strings;
%ignore specla_generate_params::n_stop_strings;
%ignore specla_spec_stats::drafted_at_depth;
%ignore specla_spec_stats::accepted_at_depth;
%ignore specla_log_level;
%ignore SPECLA_LOG_DEBUG;
%ignore SPECLA_LOG_INFO;
%ignore SPECLA_LOG_WARN;
%ignore SPECLA_LOG_ERROR;
/* The pull generation's step points into buffers the generation owns until its next call: the
 * Generation class below copies what it holds (the text with its length) instead. */
%ignore specla_generation_step;
/* Its items would collide with LOGITS_NONE and ERR_ABORTED once their prefixes are stripped (C
 * enum items share one scope): each language declares FinishReason itself, from the values. */
%ignore specla_finish_reason;
%ignore SPECLA_FINISH_NONE;
%ignore SPECLA_FINISH_EOS;
%ignore SPECLA_FINISH_STOP_STRING;
%ignore SPECLA_FINISH_MAX_TOKENS;
%ignore SPECLA_FINISH_ABORTED;
%ignore SPECLA_FINISH_ERROR;
/* 64-bit limits written with C casts, which the target languages cannot spell as constants. */
%ignore SPECLA_LIMIT_SESSION_STATE_BYTES;
%ignore SPECLA_LIMIT_SESSION_TOKEN_BYTES;

%rename(Status) specla_status;
%rename(Backend) specla_backend;
%rename(LogitsMode) specla_logits_mode;
%rename(DrafterType) specla_drafter_type;
%rename(TreeAlgorithm) specla_tree_algorithm;
%rename(ModelParams) specla_model_params;
%rename(ModelInfo) specla_model_info;
%rename(MemoryStats) specla_memory_stats;
%rename(SessionParams) specla_session_params;
%rename(SamplingParams) specla_sampling_params;
%rename(GenerateParams) specla_generate_params;
%rename(TokenizerInfo) specla_tokenizer_info;
%rename(DrafterParams) specla_drafter_params;
%rename(SpecParams) specla_spec_params;
%rename(SpecStats) specla_spec_stats;
%rename(SessionMemory) specla_session_memory;
%rename(Generation) specla_binding_generation;
%rename(Model) specla_binding_model;
%rename(Session) specla_binding_session;
%rename(Drafter) specla_binding_drafter;

/* SPECLA_ERR_IO -> IO, SPECLA_BACKEND_CPU -> CPU, ... (C# renames them once more, to PascalCase). */
%rename("%(regex:/^SPECLA_(ERR_|BACKEND_|LOGITS_|DRAFTER_|TREE_)?(.*)$/\\2/)s", %$isenumitem) "";
%rename("%(strip:[SPECLA_])s", %$isconstant) "";

/* Fields and methods follow each language's case; Go capitalises whatever it gets. */
#if defined(SWIGCSHARP)
%rename("%(camelcase)s", %$ismember) "";
%rename(Version) specla_version;
%rename(HasCuda) specla_has_cuda;
%rename(StatusString) specla_status_string;
#else
%rename("%(lowercamelcase)s", %$ismember) "";
%rename(version) specla_version;
%rename(hasCuda) specla_has_cuda;
%rename(statusString) specla_status_string;
#endif

/* ==== Per-language typemaps ================================================================== */

#if defined(SWIGJAVA)
%include "java/specla_java.swg"
#elif defined(SWIGCSHARP)
%include "csharp/specla_csharp.swg"
#elif defined(SWIGGO)
%include "go/specla_go.swg"
#else
#error "bindings/specla.i supports Java, C# and Go"
#endif

/* Token arrays in: one language array becomes the C (pointer, count) pair. */
%apply (const int32_t *TOKENS, size_t N_TOKENS) {
    (const int32_t *tokens, size_t n_tokens),
    (const int32_t *prompt, size_t n_prompt)
};
/* Session state in: one language byte array becomes the C (pointer, size) pair. */
%apply (const void *BYTES, size_t N_BYTES) { (const void *state, size_t state_size) };
/* Added arrays: packed stop strings, a tree's parents, draft distributions, logit biases (the
 * sections below). */
%apply (const void *BYTES, size_t N_BYTES) { (const void *packed, size_t n_bytes) };
%apply (const int32_t *TOKENS, size_t N_TOKENS) { (const int32_t *parents, size_t n_parents) };
%apply (const float *FLOATS, size_t N_FLOATS) { (const float *draft_dists, size_t n_draft_dists) };
%apply (const float *FLOATS, size_t N_FLOATS) { (const float *biases, size_t n_biases) };

/* ==== Parameter and information structs, straight from the header ========================== */

/* What the library reports is read-only (getters only). */
%immutable specla_model_info::vocab_size;        %immutable specla_model_info::hidden_size;
%immutable specla_model_info::num_layers;        %immutable specla_model_info::num_heads;
%immutable specla_model_info::num_v_heads;       %immutable specla_model_info::head_k_dim;
%immutable specla_model_info::head_v_dim;        %immutable specla_model_info::conv_size;
%immutable specla_model_info::intermediate_size; %immutable specla_model_info::bos_token_id;
%immutable specla_model_info::eos_token_id;      %immutable specla_model_info::num_parameters;
%immutable specla_model_info::state_bytes;       %immutable specla_model_info::backend;
%immutable specla_model_info::has_tokenizer;
%immutable specla_memory_stats::weight_bytes;    %immutable specla_memory_stats::arena_reserved_bytes;
%immutable specla_memory_stats::arena_used_bytes; %immutable specla_memory_stats::arena_peak_bytes;
%immutable specla_memory_stats::arena_blocks;    %immutable specla_memory_stats::live_allocations;
%immutable specla_tokenizer_info::vocab_size;    %immutable specla_tokenizer_info::bos_token_id;
%immutable specla_tokenizer_info::eos_token_id;  %immutable specla_tokenizer_info::add_bos_default;
%immutable specla_spec_stats::steps;             %immutable specla_spec_stats::drafted;
%immutable specla_spec_stats::accepted;          %immutable specla_spec_stats::generated;
%immutable specla_spec_stats::mean_accepted_length; %immutable specla_spec_stats::acceptance_rate;
%immutable specla_spec_stats::plain_steps;
%immutable specla_session_memory::state_bytes;  %immutable specla_session_memory::factor_bytes;
%immutable specla_session_memory::scratch_bytes; %immutable specla_session_memory::context_bytes;
%immutable specla_session_memory::host_bytes;    %immutable specla_session_memory::device_bytes;
%immutable specla_session_memory::total_bytes;
%immutable specla_drafter_params::path;  /* set with setPath, below */
/* struct_size is set by the constructors (and kept by the library): readable, not writable. */
%immutable specla_model_params::struct_size;    %immutable specla_model_info::struct_size;
%immutable specla_memory_stats::struct_size;    %immutable specla_session_params::struct_size;
%immutable specla_session_memory::struct_size;  %immutable specla_sampling_params::struct_size;
%immutable specla_generate_params::struct_size; %immutable specla_tokenizer_info::struct_size;
%immutable specla_drafter_params::struct_size;  %immutable specla_spec_params::struct_size;
%immutable specla_spec_stats::struct_size;
/* The nested params pointers are replaced by owned members (the %extend blocks below). */
%ignore specla_generate_params::sampling;
%ignore specla_spec_params::generate;
/* The logit bias entries are owned by the struct: set and read through the methods below. */
%ignore specla_sampling_params::logit_bias;
%ignore specla_sampling_params::n_logit_bias;
%ignore specla_logit_bias;
/* Verification params are built inside specla_binding_call_verify_tree. */
%ignore specla_verify_params;
#if defined(SWIGCSHARP)
%rename(Sampling) specla_generate_params::owned_sampling;
%rename(Generate) specla_spec_params::owned_generate;
#else
%rename(sampling) specla_generate_params::owned_sampling;
%rename(generate) specla_spec_params::owned_generate;
#endif

%include "specla/specla.h"

/* `new XParams()` starts from the library's defaults, as the header asks callers to do. */
%define SPECLA_DEFAULTED_PARAMS(TYPE, DEFAULTS)
%extend TYPE {
    TYPE() {
        TYPE *p = (TYPE *)malloc(sizeof(TYPE));
        if (p) *p = DEFAULTS();
        return p;
    }
    ~TYPE() { free($self); }
}
%enddef
SPECLA_DEFAULTED_PARAMS(specla_model_params, specla_model_default_params)
SPECLA_DEFAULTED_PARAMS(specla_session_params, specla_session_default_params)
/* SamplingParams owns its logit bias entries; GenerateParams and SpecParams own the structs they
 * point to (the C layer's blocks), and so the entries of the sampling struct inside. */
%extend specla_sampling_params {
    specla_sampling_params() { return specla_binding_new_sampling_params(); }
    ~specla_sampling_params() { specla_binding_free_sampling_params($self); }
}
%extend specla_generate_params {
    specla_generate_params() { return specla_binding_new_generate_params(); }
    ~specla_generate_params() { specla_binding_free_generate_params($self); }
    specla_sampling_params *owned_sampling;  /* a view into this object; setting copies */
}
/* The drafter folder (EAGLE) is a string the parameters object owns: set with setPath (a copy,
 * freed with the object or by the next setPath), read as a property. SWIG's own setter for a
 * `const char *` member would copy without ever freeing. */
%extend specla_drafter_params {
    specla_drafter_params() {
        specla_drafter_params *p = (specla_drafter_params *)malloc(sizeof(specla_drafter_params));
        if (p) *p = specla_drafter_default_params();
        return p;
    }
    ~specla_drafter_params() {
        free((char *)$self->path);
        free($self);
    }
    void set_path(const char *folder) {
        char *copy = NULL;
        if (folder) {
            const size_t n = strlen(folder) + 1;
            copy = (char *)malloc(n);
            if (!copy) {
                specla_binding_fail(SPECLA_ERR_OUT_OF_MEMORY, "out of memory copying the drafter path");
                return;
            }
            memcpy(copy, folder, n);
        }
        free((char *)$self->path);
        $self->path = copy;
    }
}
%extend specla_spec_params {
    specla_spec_params() { return specla_binding_new_spec_params(); }
    ~specla_spec_params() { specla_binding_free_spec_params($self); }
    specla_generate_params *owned_generate;  /* a view into this object; setting copies */
}

/* Info structs a language creates (SpecStats for the speculative calls) carry their struct_size. */
%define SPECLA_SIZED_INFO(TYPE)
%extend TYPE {
    TYPE() { return (TYPE *)specla_binding_alloc_info(sizeof(TYPE)); }
    ~TYPE() { free($self); }
}
%enddef
SPECLA_SIZED_INFO(specla_model_info)
SPECLA_SIZED_INFO(specla_memory_stats)
SPECLA_SIZED_INFO(specla_tokenizer_info)
SPECLA_SIZED_INFO(specla_spec_stats)
SPECLA_SIZED_INFO(specla_session_memory)

/* ==== Handles ================================================================================ */

/* Buffer types the typemaps above convert; SWIG needs only their names. */
typedef struct specla_binding_tokens specla_binding_tokens;
typedef struct specla_binding_floats specla_binding_floats;
typedef struct specla_binding_text specla_binding_text;
typedef struct specla_binding_bytes specla_binding_bytes;

/* From here on every wrapper checks the per-thread record and raises what it holds. */
SPECLA_RAISE_ON_FAILURE

%newobject specla_binding_model::info;
%newobject specla_binding_model::memory_stats;
%newobject specla_binding_model::tokenizer_info;
%newobject specla_binding_session::memory;
%newobject specla_binding_session::stream;
%newobject specla_binding_session::stream_text;
%newobject specla_binding_session::stream_speculative;
%newobject specla_binding_session::stream_speculative_text;
%newobject specla_binding_generation::stats;
%nodefaultctor specla_binding_generation;
%nodefaultctor specla_binding_model;
%nodefaultctor specla_binding_session;
%nodefaultctor specla_binding_drafter;

/* A loaded model; immutable, may be shared by threads. Closing it while sessions or drafters of
 * it are open is allowed: the library's model is freed when the last of them closes. */
struct specla_binding_model {};
%extend specla_binding_model {
    specla_binding_model(const char *folder, const specla_model_params *parameters) {
        return specla_binding_load_model(folder, parameters);
    }
    ~specla_binding_model() { specla_binding_release_model($self); }
    specla_model_info *info() const { return specla_binding_get_model_info($self); }
    specla_memory_stats *memory_stats() const { return specla_binding_get_memory_stats($self); }
    specla_tokenizer_info *tokenizer_info() const { return specla_binding_get_tokenizer_info($self); }
    specla_binding_tokens tokenize(const char *text, bool addBos, bool parseSpecial) const {
        return specla_binding_tokenize($self, text, addBos, parseSpecial);
    }
    specla_binding_text detokenize(const int32_t *tokens, size_t n_tokens, bool skipSpecial) const {
        return specla_binding_detokenize($self, tokens, n_tokens, skipSpecial);
    }
#if !defined(SWIGGO)
    /* Shorter forms; Go spells every argument out in its own package. */
    specla_binding_model(const char *folder) { return specla_binding_load_model(folder, NULL); }
    /* As the text generation functions do: BOS per the tokenizer's default, special tokens parsed. */
    specla_binding_tokens tokenize(const char *text) const {
        return specla_binding_tokenize($self, text, -1, true);
    }
    specla_binding_text detokenize(const int32_t *tokens, size_t n_tokens) const {
        return specla_binding_detokenize($self, tokens, n_tokens, false);
    }
#else
    /* Go's form of the default-BOS overload. */
    specla_binding_tokens tokenize_default(const char *text) const {
        return specla_binding_tokenize($self, text, -1, true);
    }
#endif
}

/* Speculative decoding keeps per-sequence state: one drafter per session. */
struct specla_binding_drafter {};
%extend specla_binding_drafter {
    specla_binding_drafter(specla_binding_model *model, const specla_drafter_params *parameters) {
        return specla_binding_create_drafter(model, parameters);
    }
    ~specla_binding_drafter() { specla_binding_close_drafter($self); }
#if !defined(SWIGGO)
    specla_binding_drafter(specla_binding_model *model) { return specla_binding_create_drafter(model, NULL); }
#endif
}

/* One sequence; used by one thread at a time. Wherever a parameters object is taken, null means
 * the library's defaults. */
struct specla_binding_session {};
%extend specla_binding_session {
    specla_binding_session(specla_binding_model *model, const specla_session_params *parameters) {
        return specla_binding_create_session(model, parameters);
    }
    ~specla_binding_session() { specla_binding_close_session($self); }
    void reset() { specla_binding_reset($self); }
    int64_t n_past() const { return specla_binding_n_past($self); }
    specla_binding_floats eval(const int32_t *tokens, size_t n_tokens, specla_logits_mode mode) {
        return specla_binding_eval($self, tokens, n_tokens, mode);
    }
    specla_binding_tokens generate(const int32_t *prompt, size_t n_prompt, const specla_generate_params *parameters) {
        return specla_binding_generate($self, prompt, n_prompt, parameters);
    }
    specla_binding_text generate_text(const char *prompt, const specla_generate_params *parameters) {
        return specla_binding_generate_text($self, prompt, parameters);
    }
    /* `stats` may be null; when given, it receives what the drafter and the verifier did. */
    specla_binding_tokens generate_speculative(specla_binding_drafter *drafter, const int32_t *prompt,
                                               size_t n_prompt, const specla_spec_params *parameters,
                                               specla_spec_stats *stats) {
        return specla_binding_generate_speculative($self, drafter, prompt, n_prompt, parameters, stats);
    }
    specla_binding_text generate_speculative_text(specla_binding_drafter *drafter, const char *prompt,
                                                  const specla_spec_params *parameters, specla_spec_stats *stats) {
        return specla_binding_generate_speculative_text($self, drafter, prompt, parameters, stats);
    }

    /* Pull-style generation: a Generation the language iterates one step at a time (the
     * languages wrap it in their own iterator). `drafter` null: plain decoding. */
    specla_binding_generation *stream(const int32_t *prompt, size_t n_prompt,
                                      const specla_generate_params *parameters) {
        const specla_spec_params p = specla_binding_plain_params(parameters);
        return specla_binding_begin_generation($self, NULL, NULL, prompt, n_prompt, &p);
    }
    specla_binding_generation *stream_text(const char *prompt, const specla_generate_params *parameters) {
        const specla_spec_params p = specla_binding_plain_params(parameters);
        return specla_binding_begin_generation($self, NULL, prompt ? prompt : "", NULL, 0, &p);
    }
    specla_binding_generation *stream_speculative(specla_binding_drafter *drafter, const int32_t *prompt,
                                                  size_t n_prompt, const specla_spec_params *parameters) {
        return specla_binding_begin_generation($self, drafter, NULL, prompt, n_prompt, parameters);
    }
    specla_binding_generation *stream_speculative_text(specla_binding_drafter *drafter, const char *prompt,
                                                       const specla_spec_params *parameters) {
        return specla_binding_begin_generation($self, drafter, prompt ? prompt : "", NULL, 0, parameters);
    }

    /* Session state (format: lib/session/session_state.md). A refused state leaves the session
     * as it was and raises the library's status (FORMAT, UNSUPPORTED, SHAPE) and message. */
    specla_binding_bytes save_state() { return specla_binding_save_state($self); }
    void load_state(const void *state, size_t state_size) {
        specla_session *session = specla_binding_open_session($self);
        if (session) specla_binding_check(specla_session_load_state(session, state, state_size));
    }
    void save_state_file(const char *state_path) {
        specla_session *session = specla_binding_open_session($self);
        if (session) specla_binding_check(specla_session_save_state_file(session, state_path));
    }
    void load_state_file(const char *state_path) {
        specla_session *session = specla_binding_open_session($self);
        if (session) specla_binding_check(specla_session_load_state_file(session, state_path));
    }
    /* Fork: this session receives `source`'s state and continues exactly as it would. */
    void copy_state_from(specla_binding_session *source) {
        specla_session *session = specla_binding_open_session($self);
        specla_session *from = session ? specla_binding_open_session(source) : NULL;
        if (from) specla_binding_check(specla_session_copy_state(session, from));
    }
    specla_session_memory *memory() const { return specla_binding_get_session_memory($self); }
#if !defined(SWIGGO)
    specla_binding_session(specla_binding_model *model) { return specla_binding_create_session(model, NULL); }
    specla_binding_floats eval(const int32_t *tokens, size_t n_tokens) {
        return specla_binding_eval($self, tokens, n_tokens, SPECLA_LOGITS_LAST);
    }
    specla_binding_tokens generate(const int32_t *prompt, size_t n_prompt) {
        return specla_binding_generate($self, prompt, n_prompt, NULL);
    }
    specla_binding_text generate_text(const char *prompt) {
        return specla_binding_generate_text($self, prompt, NULL);
    }
    specla_binding_tokens generate_speculative(specla_binding_drafter *drafter, const int32_t *prompt,
                                               size_t n_prompt, const specla_spec_params *parameters) {
        return specla_binding_generate_speculative($self, drafter, prompt, n_prompt, parameters, NULL);
    }
    specla_binding_text generate_speculative_text(specla_binding_drafter *drafter, const char *prompt,
                                                  const specla_spec_params *parameters) {
        return specla_binding_generate_speculative_text($self, drafter, prompt, parameters, NULL);
    }
    specla_binding_generation *stream_text(const char *prompt) {
        const specla_spec_params p = specla_binding_plain_params(NULL);
        return specla_binding_begin_generation($self, NULL, prompt ? prompt : "", NULL, 0, &p);
    }
#endif
}

/* One pull-style generation (specla_generation). next() runs one step (one decoding step, or one
 * verification pass with a drafter) and returns the text it made final; finishReason() is NONE
 * until the last step. abort() may be called from any thread, also while next() runs on another;
 * each language keeps it from racing with the close. While not ended, the session (and drafter)
 * belong to it; end() or closing frees them. */
struct specla_binding_generation {};
%extend specla_binding_generation {
    ~specla_binding_generation() { specla_binding_close_generation($self); }
    /* Runs one step; the text it made final (may be empty: held back, or a special token). */
    specla_binding_text step_text() { return specla_binding_generation_next($self); }
    /* The token ids of the last step. */
    specla_binding_tokens step_tokens() { return specla_binding_generation_tokens($self); }
    /* A specla_finish_reason value (the languages' FinishReason). */
    int finish_reason_value() {
        return specla_binding_open_generation($self) ? (int)$self->step.finish_reason : (int)SPECLA_FINISH_NONE;
    }
    /* Which stop string ended it (FinishReason STOP_STRING), otherwise -1. */
    int32_t stop_index() { return specla_binding_open_generation($self) ? $self->step.stop_index : -1; }
    void abort() {
        if (specla_binding_open_generation($self)) specla_binding_check(specla_generation_abort($self->generation));
    }
    void end() {
        if (specla_binding_open_generation($self)) specla_binding_check(specla_generation_end($self->generation));
    }
    specla_spec_stats *stats() const { return specla_binding_stats_of_generation($self); }
}

/* ==== Stop strings, tree verification, stream decoding ====================================== */

/* Stop strings cross as one byte array (the typemaps above), each string UTF-8 and
 * NUL-terminated, plus their count; each language packs and splits in its own code
 * (GenerateParams.setStopStrings / getStopStrings; Go's options). */
%extend specla_generate_params {
    void set_stop_strings_packed(const void *packed, size_t n_bytes, size_t n_strings) {
        specla_binding_set_stop_strings($self, packed, n_bytes, n_strings);
    }
    specla_binding_bytes stop_strings_packed() const { return specla_binding_get_stop_strings($self); }
}

/* Logit bias entries cross as two arrays of one length, token ids and biases; each language
 * builds them from its own map (SamplingParams.setLogitBias; Go's options). */
%extend specla_sampling_params {
    void set_logit_bias_raw(const int32_t *tokens, size_t n_tokens, const float *biases, size_t n_biases) {
        specla_binding_set_logit_bias($self, tokens, n_tokens, biases, n_biases);
    }
    specla_binding_tokens logit_bias_tokens() const { return specla_binding_logit_bias_tokens($self); }
    specla_binding_floats logit_bias_values() const { return specla_binding_logit_bias_values($self); }
}

/* The raw result of Session.verify_tree; each language copies it into its own value type. */
%newobject specla_binding_session::verify_tree_raw;
%nodefaultctor specla_binding_verification;
%rename(Verification) specla_binding_verification;
struct specla_binding_verification {};
%extend specla_binding_verification {
    ~specla_binding_verification() { specla_binding_free_verification($self); }
    specla_binding_tokens accepted_nodes() const { return specla_binding_copy_tokens(&$self->accepted); }
    int32_t bonus_token() const { return $self->bonus_token; }
    specla_binding_floats node_logits() const { return specla_binding_copy_floats(&$self->node_logits); }
}

%extend specla_binding_session {
    /* Bring-your-own-drafter verification (specla_session_verify_tree): parents[i] < i or -1,
     * draft_dists empty or n_nodes x vocab_size floats, sampling null for greedy defaults,
     * tree_algorithm how the tree pass runs (an unknown value is the library's refusal). */
    specla_binding_verification *verify_tree_raw(const int32_t *tokens, size_t n_tokens, const int32_t *parents,
                                                 size_t n_parents, const float *draft_dists, size_t n_draft_dists,
                                                 const specla_sampling_params *sampling, bool deferred_commit,
                                                 specla_tree_algorithm tree_algorithm, bool want_node_logits) {
        return specla_binding_verify_tree($self, tokens, n_tokens, parents, n_parents, draft_dists, n_draft_dists,
                                          sampling, deferred_commit, tree_algorithm, want_node_logits);
    }
}

/* Incremental detokenizer: push ids one at a time, each call returns the text it made final. */
%nodefaultctor specla_binding_stream_decoder;
%rename(StreamDecoder) specla_binding_stream_decoder;
struct specla_binding_stream_decoder {};
%extend specla_binding_stream_decoder {
    specla_binding_stream_decoder(specla_binding_model *model, bool skip_special) {
        return specla_binding_create_stream_decoder(model, skip_special);
    }
    ~specla_binding_stream_decoder() { specla_binding_close_stream_decoder($self); }
    specla_binding_text push_piece(int32_t token) { return specla_binding_stream_decode($self, token, false); }
    specla_binding_text flush_piece() { return specla_binding_stream_decode($self, -1, true); }
}

%noexception;

#if defined(SWIGGO)
/* Go reads the record itself (go/errors.go); Java and C# raise from it in C. */
specla_status specla_binding_last_status(void);
const char *specla_binding_last_message(void);
#endif
