// C API: sessions and block evaluation.
#include "api/caller_enum.h"
#include "api/checked_size.h"
#include "api/guard.h"
#include "api/handles.h"
#include "api/params.h"
#include "api/struct_size.h"
#include "session/session.h"

using namespace specla;

namespace {
Session &session_of(specla_session *s) {
    require_arg(s, "session");
    return *s->impl;
}
// A session that a pull generation is using (lib/api/api_generation.cpp) refuses other calls.
Session &idle_session_of(specla_session *s) {
    Session &session = session_of(s);
    require_no_generation(s);
    return session;
}
specla_session_params session_defaults() {
    specla_session_params p{};
    p.struct_size = sizeof p;
    p.max_tree_nodes = 64;
    p.max_batch_tokens = 512;
    return p;
}
}  // namespace

extern "C" {

SPECLA_API specla_status specla_session_params_init(specla_session_params *params, size_t struct_size) {
    return guarded([&] { init_params(params, struct_size, session_defaults(), "specla_session_params"); });
}

SPECLA_API specla_status specla_session_create(specla_model *model, const specla_session_params *caller_params,
                                               specla_session **out) {
    if (out) *out = nullptr;
    return guarded([&] {
        require_arg(model, "model");
        require_arg(out, "out");
        const specla_session_params params = read_params(caller_params, session_defaults(), "specla_session_params");
        require(params.max_tree_nodes >= 1 && params.max_tree_nodes <= 4096, SPECLA_ERR_INVALID_ARGUMENT,
                "max_tree_nodes must be in [1, 4096], got ", params.max_tree_nodes);
        require(params.max_batch_tokens >= 1 && params.max_batch_tokens <= 65536, SPECLA_ERR_INVALID_ARGUMENT,
                "max_batch_tokens must be in [1, 65536], got ", params.max_batch_tokens);
        SessionLimits limits;
        limits.max_tree_nodes = params.max_tree_nodes;
        limits.max_batch_tokens = params.max_batch_tokens;
        auto handle = std::make_unique<specla_session>();
        handle->impl = std::make_unique<Session>(model->impl, limits);
        handle->model = model;
        *out = handle.release();
    });
}

SPECLA_API void specla_session_free(specla_session *session) {
    if (session) end_generation(session->generation);  // a generation still using it lets go first
    delete session;
}

SPECLA_API specla_status specla_session_reset(specla_session *session) {
    return guarded([&] { idle_session_of(session).reset(); });
}

SPECLA_API specla_status specla_session_n_past(const specla_session *session, int64_t *out) {
    return guarded([&] {
        require_arg(session, "session");
        require_arg(out, "out");
        *out = session->impl->n_past();
    });
}

SPECLA_API specla_status specla_session_eval(specla_session *session, const int32_t *tokens, size_t n_tokens,
                                             specla_logits_mode mode, float *logits, size_t logits_capacity) {
    return guarded([&] {
        Session &s = idle_session_of(session);
        require_arg(tokens, "tokens");
        require(n_tokens > 0, SPECLA_ERR_INVALID_ARGUMENT, "n_tokens must be at least 1");
        const size_t vocab = size_t(s.config().vocab_size);
        LogitsRows rows;
        size_t needed;
        switch (caller_enum(mode)) {
            case SPECLA_LOGITS_NONE: rows = LogitsRows::None, needed = 0; break;
            case SPECLA_LOGITS_LAST: rows = LogitsRows::Last, needed = vocab; break;
            case SPECLA_LOGITS_ALL:
                rows = LogitsRows::All, needed = checked_product(n_tokens, vocab, "n_tokens x vocab_size");
                break;
            default: fail(SPECLA_ERR_INVALID_ARGUMENT, "unknown logits mode ", caller_enum(mode));
        }
        if (needed) {
            require_arg(logits, "logits");
            require(logits_capacity >= needed, SPECLA_ERR_CAPACITY, "logits buffer holds ", logits_capacity,
                    " floats but ", needed, " are needed");
        }
        s.eval(tokens, n_tokens, rows, logits);
    });
}

SPECLA_API specla_status specla_session_get_state(specla_session *session, int32_t layer, float *out,
                                                  size_t capacity) {
    return guarded([&] {
        Session &s = idle_session_of(session);
        require_arg(out, "out");
        const size_t needed = size_t(s.config().recurrent_state_floats_per_layer());
        require(capacity >= needed, SPECLA_ERR_CAPACITY, "state buffer holds ", capacity, " floats but ", needed,
                " are needed");
        s.read_state(layer, out);
    });
}

}  // extern "C"
