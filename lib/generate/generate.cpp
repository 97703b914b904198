#include "generate/generate.h"

#include "generate/generation.h"

namespace specla {

std::vector<int32_t> generate(Session &session, const int32_t *prompt, size_t n_prompt, const GenerateOptions &opts) {
    SpecOptions so;
    so.gen = opts;
    return run_generation(session, nullptr, prompt, n_prompt, so).tokens;
}

std::vector<int32_t> generate_speculative(Session &session, Drafter &drafter, const int32_t *prompt, size_t n_prompt,
                                          const SpecOptions &opts, SpecStats &stats) {
    GenerationResult r = run_generation(session, &drafter, prompt, n_prompt, opts);
    stats = r.stats;
    return std::move(r.tokens);
}

}  // namespace specla
