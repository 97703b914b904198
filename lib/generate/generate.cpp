#include "generate/generate.h"

#include "generate/rng.h"
#include "util/error.h"

namespace specla {

std::vector<int32_t> generate(Session &session, const int32_t *prompt, size_t n_prompt, const GenerateOptions &opts) {
    require(opts.max_tokens >= 0, SPECLA_ERR_INVALID_ARGUMENT, "max_tokens must not be negative");
    validate_tokens(session.config(), prompt, n_prompt);
    std::vector<int32_t> out;
    if (opts.max_tokens == 0) {
        if (n_prompt) session.eval(prompt, n_prompt, LogitsRows::None, nullptr);
        return out;
    }
    Rng rng(opts.seed);
    int32_t next;
    if (n_prompt > 0) {
        // All but the last prompt token as one block, the last one as a decode step.
        if (n_prompt > 1) session.eval(prompt, n_prompt - 1, LogitsRows::None, nullptr);
        next = session.decode_and_sample(prompt[n_prompt - 1], opts.sampling, rng.uniform());
    } else {
        next = session.sample_next(opts.sampling, rng.uniform());
    }
    for (;;) {
        out.push_back(next);
        const bool keep_going = !opts.on_token || opts.on_token(next);
        const bool done = !keep_going || next == opts.eos_token || int32_t(out.size()) >= opts.max_tokens;
        if (done) break;
        next = session.decode_and_sample(next, opts.sampling, rng.uniform());
    }
    session.set_pending(out.back());
    return out;
}

}  // namespace specla
