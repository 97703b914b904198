// Generation over a session run to completion: plain (one token per step) and speculative (one
// verification pass per step); the options of both.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "session/session.h"
#include "spec/drafter.h"

namespace specla {

struct GenerateOptions {
    SamplingConfig sampling;
    uint64_t seed = 0;
    int32_t max_tokens = 128;
    int32_t eos_token = -1;  // -1: never stop on a token
    // Report each emitted token's log-probability under the model (lib/sampling/logprobs.h) and
    // that of the top_logprobs most likely candidates at its position (0..kMaxTopLogprobs). On
    // a GPU this copies each chosen token's logits row to the host (greedy decoding otherwise
    // copies one id per row).
    bool logprobs = false;
    int32_t top_logprobs = 0;
    // Called after each token is chosen with the text it released (TextStream); return false to
    // stop (the token is kept). After the last token, once more with token -1 and the text held
    // back until then, if any (its return value is ignored).
    std::function<bool(int32_t token, const std::string &piece)> on_token;
};

// Feeds the prompt (may be empty when the session already has context) and generates up to
// max_tokens tokens; returns them. The last token is left pending in the session. (A plain
// generation of lib/generate/generation.h run to completion, without text.)
std::vector<int32_t> generate(Session &session, const int32_t *prompt, size_t n_prompt, const GenerateOptions &opts);

struct SpecOptions {
    GenerateOptions gen;         // sampling, seed, token budget, EOS, per-token hook
    DraftBudget budget;          // per step
    bool deferred_commit = true;
    TreeAlgorithm algorithm = TreeAlgorithm::Auto;
    // Take plain steps while speculation's measured tokens per second are below this multiple
    // of plain decoding's (spec/spec_gate.h); 0: always speculate. 0 here, so that the engine's
    // own tests exercise speculation whatever the timings; the C API's default is 1.
    double speculation_min_gain = 0;
};

constexpr int kSpecMaxDepthStats = 32;
constexpr int32_t kMaxTopLogprobs = 20;  // OpenAI's bound

struct SpecStats {
    int64_t steps = 0;       // verification passes
    int64_t drafted = 0;     // draft nodes submitted
    int64_t accepted = 0;    // draft tokens accepted
    int64_t generated = 0;   // tokens emitted (accepted + bonus, after stop truncation), plain
                             // steps' included
    int64_t plain_steps = 0; // plain steps taken because speculation measured slower (one
                             // token each; not in steps)
    int64_t drafted_at_depth[kSpecMaxDepthStats] = {};   // nodes at depth d+1
    int64_t accepted_at_depth[kSpecMaxDepthStats] = {};  // steps that accepted a token at depth d+1
    uint64_t seed = 0;       // the generation's random stream (GenerateOptions::seed)
};

// Runs a speculative generation (lib/generate/generation.h) to completion, without text.
std::vector<int32_t> generate_speculative(Session &session, Drafter &drafter, const int32_t *prompt, size_t n_prompt,
                                          const SpecOptions &opts, SpecStats &stats);

}  // namespace specla
