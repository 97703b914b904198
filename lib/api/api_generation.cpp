// C API: pull-style generation, one step per call, on the generation loop of
// lib/generate/generation.h (the one the callback API runs to completion).
#include <atomic>
#include <cstring>
#include <memory>

#include "api/caller_enum.h"
#include "api/guard.h"
#include "api/handles.h"
#include "api/params.h"
#include "api/struct_size.h"
#include "generate/generation.h"
#include "session/session.h"

using namespace specla;

// The handle outlives the engine object: abort() from another thread touches only the atomics,
// so the generation may end (impl reset) while it runs.
struct specla_generation {
    std::unique_ptr<Generation> impl;   // null once ended
    specla_session *session = nullptr;  // both null once ended
    specla_drafter *drafter = nullptr;
    std::atomic<bool> abort_requested{false};
    std::atomic<bool> ended{false};
    GenerationStep step;                // what the last specla_generation_step points into
    SpecStats final_stats;              // kept when it ends
};

namespace {

specla_finish_reason finish_reason_of(FinishReason r) {
    switch (r) {
        case FinishReason::None: return SPECLA_FINISH_NONE;
        case FinishReason::Eos: return SPECLA_FINISH_EOS;
        case FinishReason::StopString: return SPECLA_FINISH_STOP_STRING;
        case FinishReason::MaxTokens: return SPECLA_FINISH_MAX_TOKENS;
        case FinishReason::Aborted: return SPECLA_FINISH_ABORTED;
        case FinishReason::Error: return SPECLA_FINISH_ERROR;
    }
    return SPECLA_FINISH_ERROR;
}

specla_status begin(specla_session *session, specla_drafter *drafter, const int32_t *prompt, size_t n_prompt,
                    const char *text, size_t text_len, const specla_spec_params *caller_params,
                    specla_generation **out) {
    if (out) *out = nullptr;
    return guarded([&] {
        const SpecArgs params = read_spec_params(caller_params);
        require_arg(session, "session");
        require_arg(out, "out");
        require(n_prompt == 0 || prompt != nullptr, SPECLA_ERR_INVALID_ARGUMENT, "prompt must not be NULL");
        require_no_generation(session, drafter);
        require(params.generate.generate.on_token == nullptr, SPECLA_ERR_INVALID_ARGUMENT,
                "params->generate->on_token must be NULL: a pull generation hands its steps back from "
                "specla_generation_next");
        std::vector<int32_t> ids;
        if (text) {
            ids = encode_text_prompt(session, text, text_len);
            prompt = ids.data(), n_prompt = ids.size();
        }
        TextOptions text_opts = text_options(session, params.generate);
        SpecOptions opts;
        if (drafter) opts = spec_options(session, drafter, params);
        else opts.gen = generate_options(session, params.generate);
        auto gen = std::make_unique<specla_generation>();
        gen->impl = std::make_unique<Generation>(*session->impl, drafter ? drafter->impl.get() : nullptr, prompt,
                                                 n_prompt, opts, std::move(text_opts), &gen->abort_requested);
        gen->session = session;
        gen->drafter = drafter;
        session->generation = gen.get();
        if (drafter) drafter->generation = gen.get();
        *out = gen.release();
    });
}

void require_live(const specla_generation *gen) {
    require_arg(gen, "gen");
    require(!gen->ended.load(), SPECLA_ERR_STATE,
            "the generation has ended (specla_generation_end, or its session or drafter was freed)");
}

}  // namespace

namespace specla {

void end_generation(specla_generation *gen) noexcept {
    if (!gen || gen->ended.load()) return;
    if (gen->impl) {
        gen->final_stats = gen->impl->stats();
        try {
            gen->impl->end();  // only drops held-back text; cannot fail short of memory
        } catch (...) {
        }
        gen->impl.reset();  // ends the drafter's generation while the drafter is still there
    }
    if (gen->session) gen->session->generation = nullptr;
    if (gen->drafter) gen->drafter->generation = nullptr;
    gen->session = nullptr;
    gen->drafter = nullptr;
    gen->step.clear();
    gen->ended.store(true);
}

}  // namespace specla

extern "C" {

SPECLA_API const char *specla_finish_reason_string(specla_finish_reason reason) {
    switch (caller_enum(reason)) {
        case SPECLA_FINISH_NONE: return "SPECLA_FINISH_NONE: not finished";
        case SPECLA_FINISH_EOS: return "SPECLA_FINISH_EOS: end-of-sequence token";
        case SPECLA_FINISH_STOP_STRING: return "SPECLA_FINISH_STOP_STRING: stop string";
        case SPECLA_FINISH_MAX_TOKENS: return "SPECLA_FINISH_MAX_TOKENS: token budget reached";
        case SPECLA_FINISH_ABORTED: return "SPECLA_FINISH_ABORTED: aborted";
        case SPECLA_FINISH_ERROR: return "SPECLA_FINISH_ERROR: a step failed";
    }
    return "unknown finish reason";
}

SPECLA_API specla_status specla_generation_begin(specla_session *session, specla_drafter *drafter,
                                                 const int32_t *prompt, size_t n_prompt,
                                                 const specla_spec_params *params, specla_generation **out) {
    return begin(session, drafter, prompt, n_prompt, nullptr, 0, params, out);
}

SPECLA_API specla_status specla_generation_begin_text(specla_session *session, specla_drafter *drafter,
                                                      const char *prompt, size_t prompt_len,
                                                      const specla_spec_params *params, specla_generation **out) {
    if (!prompt) {  // begin() tells a text prompt by its pointer
        if (out) *out = nullptr;
        return guarded([] { require_arg(nullptr, "prompt"); });
    }
    return begin(session, drafter, nullptr, 0, prompt, prompt_len, params, out);
}

SPECLA_API specla_status specla_generation_next(specla_generation *gen, specla_generation_step *out) {
    return guarded([&] {
        require_arg(out, "out");
        specla_generation_step r{};  // what a failed step reports: nothing
        r.text = "";
        r.stop_index = -1;
        write_info(out, r, "specla_generation_step");
        require_live(gen);
        Generation &g = *gen->impl;
        require(!g.finished(), SPECLA_ERR_STATE, "the generation has finished (",
                specla_finish_reason_string(finish_reason_of(g.reason())),
                "): end it with specla_generation_end");
        g.next(gen->step);
        const GenerationStep &s = gen->step;
        r.tokens = s.tokens.empty() ? nullptr : s.tokens.data();
        r.n_tokens = s.tokens.size();
        r.text = s.text.c_str();
        r.text_len = s.text.size();
        r.finish_reason = finish_reason_of(g.reason());
        r.stop_index = g.reason() == FinishReason::StopString ? g.stop_index() : -1;
        if (g.options().gen.logprobs) {
            const LogprobRows &l = s.logprobs;
            r.logprobs = l.logprobs.empty() ? nullptr : l.logprobs.data();
            r.n_top = g.options().gen.top_logprobs;
            r.top_ids = l.top_ids.empty() ? nullptr : l.top_ids.data();
            r.top_logprobs = l.top_logprobs.empty() ? nullptr : l.top_logprobs.data();
        }
        write_info(out, r, "specla_generation_step");
    });
}

SPECLA_API specla_status specla_generation_abort(specla_generation *gen) {
    return guarded([&] {
        require_live(gen);
        gen->abort_requested.store(true, std::memory_order_relaxed);
    });
}

SPECLA_API specla_status specla_generation_end(specla_generation *gen) {
    return guarded([&] {
        require_arg(gen, "gen");
        end_generation(gen);
    });
}

SPECLA_API specla_status specla_generation_stats(const specla_generation *gen, specla_spec_stats *out) {
    return guarded([&] {
        require_arg(gen, "gen");
        require_arg(out, "out");
        fill_stats(gen->impl ? gen->impl->stats() : gen->final_stats, out);
    });
}

SPECLA_API void specla_generation_free(specla_generation *gen) {
    end_generation(gen);
    delete gen;
}

}  // extern "C"
