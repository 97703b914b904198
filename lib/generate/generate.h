// Plain autoregressive generation over a session: one token per step.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "session/session.h"

namespace specla {

struct GenerateOptions {
    SamplingConfig sampling;
    uint64_t seed = 0;
    int32_t max_tokens = 128;
    int32_t eos_token = -1;  // -1: never stop on a token
    // Called after each token is chosen with the text it released (TextStream); return false to
    // stop (the token is kept). After the last token, once more with token -1 and the text held
    // back until then, if any (its return value is ignored).
    std::function<bool(int32_t token, const std::string &piece)> on_token;
};

// Feeds the prompt (may be empty when the session already has context) and generates up to
// max_tokens tokens; returns them. The last token is left pending in the session. (A plain
// generation of lib/generate/generation.h run to completion, without text.)
std::vector<int32_t> generate(Session &session, const int32_t *prompt, size_t n_prompt, const GenerateOptions &opts);

}  // namespace specla
