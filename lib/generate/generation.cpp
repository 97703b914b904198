#include "generate/generation.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "util/error.h"
#include "util/log.h"
#include "util/seconds_since.h"

namespace specla {

int32_t prefill_block_tokens(const Session &session) {
    const int32_t limit = session.limits().max_batch_tokens;
    const int32_t hint = session.model().backend().interruptible_block_tokens();
    return hint > 0 ? std::min(hint, limit) : limit;
}

Generation::Generation(Session &session, Drafter *drafter, const int32_t *prompt, size_t n_prompt,
                       const SpecOptions &opts, TextOptions text, const std::atomic<bool> *abort)
    : session_(session),
      drafter_(drafter),
      prompt_(prompt, prompt + n_prompt),
      opts_(opts),
      text_(std::move(text)),
      abort_(abort),
      rng_(opts.gen.seed),
      // Greedy generations only: their tokens are the same whichever steps speculate. A sampled
      // generation's tokens depend on which steps speculate (a pass and a plain step draw from
      // the random stream differently), and a seeded run must repeat token for token.
      gate_(drafter && opts.gen.sampling.greedy() ? opts.speculation_min_gain : 0.0) {
    const GenerateOptions &g = opts_.gen;
    require(g.max_tokens >= 0, SPECLA_ERR_INVALID_ARGUMENT, "max_tokens must not be negative, got ", g.max_tokens);
    if (drafter_)
        require(opts_.budget.max_nodes >= 0 && opts_.budget.max_depth >= 0, SPECLA_ERR_INVALID_ARGUMENT,
                "draft budget must not be negative");
    validate_tokens(session_.config(), prompt_.data(), prompt_.size());
    require(prompt_.size() > 0 || g.max_tokens == 0 || session_.can_continue(), SPECLA_ERR_STATE,
            "the session has no logits for its last token: pass a non-empty prompt");
    require(g.top_logprobs >= 0 && g.top_logprobs <= kMaxTopLogprobs, SPECLA_ERR_INVALID_ARGUMENT,
            "top_logprobs must be in [0, ", kMaxTopLogprobs, "], got ", g.top_logprobs);
    require(g.logprobs || g.top_logprobs == 0, SPECLA_ERR_INVALID_ARGUMENT,
            "top_logprobs needs logprobs (set logprobs to report them)");
    require(g.top_logprobs <= g.sampling.candidates(session_.config().vocab_size), SPECLA_ERR_INVALID_ARGUMENT,
            "top_logprobs (", g.top_logprobs, ") exceeds the vocabulary");
    wants_features_ = drafter_ && drafter_->wants_features();
    stats_.seed = g.seed;
    const Session::SpeculationRecord &record = session_.speculation_record(wants_features_);
    gate_.assume_plain_rate(record.plain_seconds_per_token);
    if (drafter_ && record.drafter == drafter_) gate_.resume_backoff(record.plain_tokens_left, record.backoff_tokens);
}

Generation::~Generation() {
    if (drafter_begun_) drafter_->end_generation();
}

void Generation::next(GenerationStep &step) {
    step.clear();
    require(!finished(), SPECLA_ERR_STATE, "the generation has finished");
    try {
        if (!started_) {
            started_ = true;
            if (!prefill()) return finish(FinishReason::Aborted, step);
            if (opts_.gen.max_tokens == 0) return finish(FinishReason::MaxTokens, step);
            if (drafter_) {
                drafter_->begin_generation(opts_.gen.sampling, &rng_);
                drafter_begun_ = true;
            }
        }
        if (drafter_) speculative_pass(step, gate_.speculate());
        else plain_step(step);
        if (!finished() && abort_requested()) finish(FinishReason::Aborted, step);
    } catch (...) {
        reason_ = FinishReason::Error;
        if (drafter_begun_) drafter_->end_generation();
        drafter_begun_ = false;
        throw;
    }
}

void Generation::end() {
    if (finished()) return;
    GenerationStep discarded;
    finish(FinishReason::Aborted, discarded);
}

bool Generation::prefill() {
    if (prompt_.empty()) return true;
    // A plain generation with no budget consumes the whole prompt; otherwise its last token is
    // left pending and leads the first step (as a decoding step or the root of a verification).
    const bool last_pending = opts_.gen.max_tokens > 0 || drafter_;
    const size_t n = prompt_.size() - (last_pending ? 1 : 0);
    const size_t block = size_t(prefill_block_tokens(session_));
    const size_t D = size_t(session_.config().hidden_size);
    // A drafter that reads the target's features gets the feature of every token the target
    // consumes, in order (spec/eagle_drafter.md): the prompt's rows, then each verification's
    // root (the pending token) and accepted path.
    if (wants_features_) features_.resize(std::min(block, n) * D);
    for (size_t off = 0; off < n; off += block) {
        if (abort_requested()) return false;
        const size_t m = std::min(block, n - off);
        // A pending token of an earlier call is fed first, without a feature: the prompt's rows
        // start at the current end of the context.
        const int64_t first = session_.n_past();
        session_.eval(prompt_.data() + off, m, LogitsRows::None, nullptr, wants_features_ ? features_.data() : nullptr);
        if (wants_features_) drafter_->observe_features(first, features_.data(), int32_t(m));
    }
    if (last_pending) session_.set_pending(prompt_.back());
    return true;
}

void Generation::plain_step(GenerationStep &step) {
    const float *row = nullptr;
    const int32_t t = session_.sample_next(opts_.gen.sampling, rng_.uniform(), opts_.gen.logprobs ? &row : nullptr);
    session_.set_pending(t);  // fed by the next step's sample_next, as one decoding step (the
                              // row stays valid: nothing is evaluated before the next step)
    ++stats_.steps;
    const FinishReason r = emit(t, row, step);
    ++stats_.generated;
    if (r != FinishReason::None) finish(r, step);
}

void Generation::speculative_pass(GenerationStep &step, bool draft) {
    const GenerateOptions &g = opts_.gen;
    const auto t_start = std::chrono::steady_clock::now();
    Drafter &drafter = *drafter_;
    const int32_t remaining = int32_t(int64_t(g.max_tokens) - n_generated_);
    DraftBudget budget = opts_.budget;
    budget.max_nodes = std::min(budget.max_nodes, session_.limits().max_tree_nodes);
    budget.max_depth = std::min(budget.max_depth, remaining - 1);  // path + bonus fit the budget
    tree_.clear();
    if (draft && budget.max_nodes > 0 && budget.max_depth > 0) drafter.propose(session_.context(), budget, tree_);
    const double draft_seconds = seconds_since(t_start);

    // Nothing drafted: the pass is a plain decoding step of the pending token, through the
    // backend's decoding path (on the GPU a captured graph; prompt lookup on gdn-pycode-22m,
    // H200: 0.84-0.90x -> 0.95-1.05x plain decoding,
    // bench/journal/2026-11-30-empty-draft-as-decode-step.md), giving the same token: greedy,
    // the same logits (bitwise on the GPU, where verified rows equal decoding steps); sampled,
    // a draw from the target's own distribution, which is what acceptance of an empty draft
    // draws from.
    // A drafter that reads features gets the pending token's feature from the decoding step too
    // (a gated plain step of the learned drafter on the H200: a decoding step, 1 plain step,
    // instead of a root-only verification, 1.35).
    const bool plain = tree_.size() == 0 && session_.has_pending();
    AcceptResult acc;
    double verify_seconds = 0;
    emit_.clear();
    const bool root_feature = session_.has_pending();
    const int64_t first_feature_position = session_.n_past() - (root_feature ? 1 : 0);
    const float *plain_row = nullptr;
    if (plain) {
        if (wants_features_) features_.resize(size_t(session_.config().hidden_size));
        emit_.push_back(session_.sample_next(g.sampling, rng_.uniform(), g.logprobs ? &plain_row : nullptr,
                                             wants_features_ ? features_.data() : nullptr));
    } else {
        const auto t0 = std::chrono::steady_clock::now();
        // Logprobs read the rows the emitted tokens were chosen from: the logits come to the
        // host even for greedy acceptance.
        verify_and_accept(session_, tree_, g.sampling, rng_, opts_.algorithm, g.logprobs, root_, node_logits_,
                          node_choice_, acc, wants_features_ ? &features_ : nullptr);
        verify_seconds = seconds_since(t0);
        drafter.observe_verify_pass(tree_.size(), verify_seconds);
        for (int32_t node : acc.path) emit_.push_back(tree_.tokens[size_t(node)]);
        emit_.push_back(acc.bonus);
    }
    // The step's cost for the gate: drafting, verification and commit, not the caller's
    // per-token hooks run by emit().
    double step_seconds = seconds_since(t_start);
    // Emit path tokens then the bonus, stopping at the first stop condition; the state keeps
    // exactly what was emitted (the last emitted token becomes the pending one).
    size_t m = 0;
    FinishReason r = FinishReason::None;
    while (m < emit_.size() && r == FinishReason::None) {
        const float *row = !g.logprobs ? nullptr : plain ? plain_row : emitted_row(m, acc);
        r = emit(emit_[m++], row, step);
    }
    kept_path_.assign(acc.path.begin(), acc.path.begin() + long(m - 1));
    const auto t_commit = std::chrono::steady_clock::now();
    if (plain) session_.set_pending(emit_[0]);
    else session_.commit(kept_path_, emit_[m - 1], opts_.deferred_commit);
    if (wants_features_) {
        // The committed rows: the root (the pending token, when it led the pass) and the kept
        // path, compacted in place (path nodes increase, so every source lies at or after its
        // destination).
        const size_t D = size_t(session_.config().hidden_size);
        std::vector<float> &f = features_;
        size_t rows = 0;
        if (root_feature) ++rows;  // row 0 is the root's already
        for (int32_t node : kept_path_) {
            std::memmove(f.data() + rows * D, f.data() + (size_t(node) + 1) * D, D * sizeof(float));
            ++rows;
        }
        drafter.observe_features(first_feature_position, f.data(), int32_t(rows));
    }
    drafter.observe_accepted(session_.context());
    step_seconds += seconds_since(t_commit);

    if (!draft) {
        // A step the gate took plain: not a verification pass of a draft.
        ++stats_.plain_steps;
        stats_.generated += int64_t(m);
        if (r == FinishReason::None) gate_.record_plain(step_seconds, int64_t(m));
        else finish(r, step);
        return;
    }
    // A pass cut short by a stop condition emitted fewer tokens than it paid for: not a sample
    // of what speculation gives.
    if (r == FinishReason::None) gate_.record_speculative(step_seconds, int64_t(m));
    ++stats_.steps;
    ++pass_seconds_.passes;
    pass_seconds_.draft += draft_seconds;
    pass_seconds_.verify += verify_seconds;
    pass_seconds_.rest += std::max(0.0, step_seconds - draft_seconds - verify_seconds);
    stats_.drafted += tree_.size();
    stats_.accepted += int64_t(kept_path_.size());
    stats_.generated += int64_t(m);
    const std::vector<int32_t> depth = node_depths(tree_.parents.data(), tree_.size());
    for (int32_t d : depth)
        if (d - 1 < kSpecMaxDepthStats) ++stats_.drafted_at_depth[d - 1];
    for (size_t d = 0; d < kept_path_.size() && d < size_t(kSpecMaxDepthStats); ++d) ++stats_.accepted_at_depth[d];
    if (r != FinishReason::None) finish(r, step);
}

const float *Generation::emitted_row(size_t m, const AcceptResult &acc) const {
    if (m == 0) return root_.data();
    const size_t vocab = size_t(session_.config().vocab_size);
    return node_logits_.data() + size_t(acc.path[m - 1]) * vocab;
}

FinishReason Generation::emit(int32_t token, const float *row, GenerationStep &step) {
    const GenerateOptions &g = opts_.gen;
    step.tokens.push_back(token);
    if (g.logprobs)
        step.logprobs.append(row, g.sampling.candidates(session_.config().vocab_size), token, g.top_logprobs);
    ++n_generated_;
    TextStream::Piece piece = text_.push(token);
    step.text += piece.text;
    const bool keep_going = !g.on_token || g.on_token(token, piece.text);
    if (piece.stop_index >= 0) {
        stop_index_ = piece.stop_index;
        return FinishReason::StopString;
    }
    if (token == g.eos_token) return FinishReason::Eos;
    if (n_generated_ >= g.max_tokens) return FinishReason::MaxTokens;
    if (!keep_going) return FinishReason::Aborted;
    return FinishReason::None;
}

void Generation::finish(FinishReason reason, GenerationStep &step) {
    reason_ = reason;
    if (const PassSeconds &p = pass_seconds_; p.passes > 0) {
        const double ms = 1e3 / double(p.passes);
        log(SPECLA_LOG_DEBUG, "speculative passes: ", p.passes, ", per pass ", p.draft * ms, " ms drafting, ",
            p.verify * ms, " ms verification and acceptance, ", p.rest * ms, " ms commit and the rest; ",
            double(stats_.drafted) / double(p.passes), " nodes per pass");
    }
    if (drafter_ && opts_.speculation_min_gain > 0) {
        Session::SpeculationRecord record = session_.speculation_record(wants_features_);
        if (gate_.plain_seconds_per_token() > 0) record.plain_seconds_per_token = gate_.plain_seconds_per_token();
        record.drafter = drafter_;
        record.backoff_tokens = gate_.backoff_tokens();
        record.plain_tokens_left = gate_.plain_tokens_left();
        session_.set_speculation_record(wants_features_, record);
    }
    if (drafter_begun_) drafter_->end_generation();
    drafter_begun_ = false;
    const TextStream::Piece rest = text_.finish();
    step.text += rest.text;
    if (!rest.text.empty() && opts_.gen.on_token) opts_.gen.on_token(-1, rest.text);
}

GenerationResult run_generation(Session &session, Drafter *drafter, const int32_t *prompt, size_t n_prompt,
                                const SpecOptions &opts, TextOptions text) {
    Generation gen(session, drafter, prompt, n_prompt, opts, std::move(text));
    GenerationResult r;
    GenerationStep step;
    while (!gen.finished()) {
        gen.next(step);
        r.tokens.insert(r.tokens.end(), step.tokens.begin(), step.tokens.end());
        r.text += step.text;
        r.logprobs.extend(step.logprobs);
    }
    r.reason = gen.reason();
    r.stats = gen.stats();
    return r;
}

}  // namespace specla
