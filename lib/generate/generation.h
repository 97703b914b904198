// One generation over a session as a resumable state machine: each next() runs one step (the
// first one feeds the prompt, in blocks, then picks the first token; later ones are one plain
// decoding step, or one speculative pass: draft, verify, accept, commit) and hands back the
// tokens and the final text of that step. Plain and speculative generation, the callback C API
// (specla_generate*, run to completion) and the pull C API (specla_generation_*) are all this
// loop, so they cannot disagree.
//
// Between steps the session is consistent: its context holds the prompt and every emitted
// token, the last one pending (fed at the next pass). An abort request (any thread) is checked
// before every prompt block and after every step.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "generate/generate.h"
#include "sampling/logprobs.h"
#include "sampling/rng.h"
#include "generate/text_stream.h"
#include "session/session.h"
#include "engine/draft_tree.h"
#include "spec/drafter.h"
#include "spec/spec_gate.h"
#include "spec/speculative.h"

namespace specla {

enum class FinishReason {
    None,        // not finished
    Eos,         // the model's EOS token (GenerateOptions::eos_token)
    StopString,  // a stop string completed in the text (stop_index())
    MaxTokens,   // the token budget
    Aborted,     // abort requested, or the per-token hook returned false
    Error        // a step threw; the exception reached the caller of next()
};

struct GenerationStep {
    std::vector<int32_t> tokens;  // emitted by this step
    std::string text;             // text released by this step (final)
    LogprobRows logprobs;         // one row per token, when GenerateOptions::logprobs
    void clear() {
        tokens.clear();
        text.clear();
        logprobs.clear();
    }
};

class Generation {
public:
    // drafter null: plain generation (opts.budget and the rest of SpecOptions unused). Checks the
    // options and the prompt (throws before anything is evaluated); evaluates nothing itself.
    // `abort` (may be null) is the caller's flag, read with relaxed order from any thread.
    Generation(Session &session, Drafter *drafter, const int32_t *prompt, size_t n_prompt, const SpecOptions &opts,
               TextOptions text, const std::atomic<bool> *abort = nullptr);
    ~Generation();
    Generation(const Generation &) = delete;
    Generation &operator=(const Generation &) = delete;

    // Runs one step and writes its tokens and text to `step` (cleared first). Call only while
    // !finished(). The step that finishes carries the last tokens and the rest of the text.
    // Throws what the engine throws; the generation is then finished with FinishReason::Error.
    void next(GenerationStep &step);
    // Stops now, as an abort between steps would (nothing when finished); text still held back
    // is dropped.
    void end();

    bool finished() const { return reason_ != FinishReason::None; }
    FinishReason reason() const { return reason_; }
    int32_t stop_index() const { return stop_index_; }
    const SpecStats &stats() const { return stats_; }
    const SpecOptions &options() const { return opts_; }
    int64_t n_generated() const { return n_generated_; }

private:
    bool abort_requested() const { return abort_ && abort_->load(std::memory_order_relaxed); }
    // The prompt in blocks (the last token is left pending); false when an abort stopped it.
    bool prefill();
    void plain_step(GenerationStep &step);
    // One speculative pass, or with draft false a plain step the gate chose (no draft: a
    // decoding step, which also returns the fed token's feature to a drafter that reads them).
    void speculative_pass(GenerationStep &step, bool draft);
    // Emits one token: text, hook, stop conditions, its logprobs from `row` (the logits it was
    // chosen from; read only when GenerateOptions::logprobs). Returns why it ends the
    // generation, or None.
    FinishReason emit(int32_t token, const float *row, GenerationStep &step);
    // The logits row the m-th token of a pass's emission was chosen from: the root's for the
    // first, then the row after each accepted node.
    const float *emitted_row(size_t m, const AcceptResult &acc) const;
    void finish(FinishReason reason, GenerationStep &step);

    Session &session_;
    Drafter *drafter_;
    std::vector<int32_t> prompt_;
    SpecOptions opts_;
    TextStream text_;
    const std::atomic<bool> *abort_;
    Rng rng_;
    SpecGate gate_;  // speculative generation: whether the next step drafts
    bool started_ = false;           // the prompt is in
    bool drafter_begun_ = false;     // drafter_->begin_generation was called
    bool wants_features_ = false;
    FinishReason reason_ = FinishReason::None;
    int32_t stop_index_ = -1;
    int64_t n_generated_ = 0;
    SpecStats stats_;
    // Where the drafting passes' time went, for the debug log at the end (finish()).
    struct PassSeconds {
        int64_t passes = 0;
        double draft = 0, verify = 0, rest = 0;  // rest: emission, commit, features to the drafter
    } pass_seconds_;
    // Speculative scratch, reused across passes.
    DraftTree tree_;
    std::vector<float> root_, node_logits_, features_;
    std::vector<int32_t> node_choice_, emit_, kept_path_;
};

// The prompt block a generation evaluates between two abort checks: the backend's choice
// (Backend::interruptible_block_tokens), within the session's max_batch_tokens.
int32_t prefill_block_tokens(const Session &session);

// A generation run to completion: what every step emitted.
struct GenerationResult {
    std::vector<int32_t> tokens;
    std::string text;
    LogprobRows logprobs;  // when GenerateOptions::logprobs
    FinishReason reason = FinishReason::None;
    SpecStats stats;
};
GenerationResult run_generation(Session &session, Drafter *drafter, const int32_t *prompt, size_t n_prompt,
                                const SpecOptions &opts, TextOptions text = {});

}  // namespace specla
