// One sequence over a model: its backend state, the tokens it has consumed, and the token that
// generation picked last but has not fed yet (fed lazily, so a generation ends without an extra
// forward pass and the next one starts from it).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "engine/backend.h"
#include "engine/model.h"
#include "memory/host_alloc.h"
#include "engine/draft_tree.h"

namespace specla {

// Throws SPECLA_ERR_TOKEN_OUT_OF_RANGE naming the first bad position.
void validate_tokens(const ModelConfig &config, const int32_t *tokens, size_t n);

class Session {
public:
    Session(std::shared_ptr<Model> model, const SessionLimits &limits);

    Model &model() const { return *model_; }
    const ModelConfig &config() const { return model_->config(); }
    const SessionLimits &limits() const { return limits_; }

    void reset();
    // Feed tokens (validated, split into blocks of max_batch_tokens). logits: n rows for All,
    // one for Last. features (may be null): every row's output feature, n x hidden_size (the
    // target's last hidden state before the final norm, spec/eagle_drafter.md); a pending token
    // fed first is not one of the rows. The state is unchanged when validation fails.
    void eval(const int32_t *tokens, size_t n, LogitsRows rows, float *logits, float *features = nullptr);

    // Feed one token and choose the next (device-side sampling where the backend has it; on the
    // host when the config restricts the candidate ids, which backends do not know about).
    // row (may be null): receives the logits the choice read (vocab floats, valid until the
    // session changes); asking for them makes the choice on the host. features (may be null):
    // the fed token's output feature (hidden_size floats), as eval's.
    int32_t decode_and_sample(int32_t token, const SamplingConfig &sampling, double u, const float **row = nullptr,
                              float *features = nullptr);

    // Next token after the current context with the given sampler: from the pending token if
    // there is one, else from the logits kept by the last eval. SPECLA_ERR_STATE when neither.
    // row, features: as for decode_and_sample (features only with a pending token: it is the
    // token fed).
    int32_t sample_next(const SamplingConfig &sampling, double u, const float **row = nullptr,
                        float *features = nullptr);

    // Remember a chosen token without feeding it yet.
    void set_pending(int32_t token);
    // Feed the pending token, if any (before reading the state, or before a block that must
    // start from a complete context). keep_logits: keep its logits for a later sample_next; the
    // callers that evaluate more tokens right away do not need them (no output-head pass then).
    void flush_pending(bool keep_logits = false);

    void read_state(int32_t layer, float *out);

    // Where a verification's results go: the target's logits (vocab floats per row) or just its
    // argmax, at the context end (root) and after every node. Null pointers are not filled;
    // asking only for argmax lets a GPU backend skip copying logits to the host.
    // Features (hidden_size floats per row): the root's is the pending token's row, so it is
    // filled only when a pending token leads the pass (has_pending() before verify); without one
    // the context's last token was consumed earlier and its feature is not kept.
    struct VerifyBuffers {
        float *root_logits = nullptr;
        float *node_logits = nullptr;  // n x vocab
        int32_t *root_argmax = nullptr;
        int32_t *node_argmax = nullptr;  // n
        float *root_features = nullptr;
        float *node_features = nullptr;  // n x hidden_size
    };
    // Speculative verification of a draft tree after the context (parents -1 = first draft
    // position). The state is not changed; commit() then keeps an accepted path.
    void verify(const DraftTree &tree, TreeAlgorithm algorithm, const VerifyBuffers &out);
    // The backend's sampler over the rows of the next verification (Backend::row_sampler), for use
    // right after it and before any other pass, where a pending token leads it: the root's logits
    // are then row 0 and node i's row i + 1 (accept_sampled_rows). Null otherwise, or where the
    // backend has none for the config.
    std::unique_ptr<RowSampler> row_sampler(const SamplingConfig &sampling);
    // Keep the accepted path (tree node indices, root to leaf) of the last verify and make
    // `bonus` the next, pending token. deferred: leave the state update to the next pass.
    void commit(const std::vector<int32_t> &path, int32_t bonus, bool deferred);

    int64_t n_past() const { return int64_t(context_.size()); }  // includes a pending token
    bool has_pending() const { return pending_.has_value(); }
    // Whether sample_next (and a verification without a pending token) has something to start
    // from: a pending token, or the logits of the last token evaluated.
    bool can_continue() const { return pending_.has_value() || last_logits_valid_; }
    const std::vector<int32_t> &context() const { return context_; }
    SequenceState &state() { return *state_; }
    // Record tokens fed through the backend directly (speculative commit).
    void append_context(const int32_t *tokens, size_t n) { context_.insert(context_.end(), tokens, tokens + n); }

    // ---- what a continued generation needs (session/session_state.h writes and reads it) ----
    // The logits of the context's last token, kept by the last eval when no token is pending
    // (generation with an empty prompt starts from them); null when there are none.
    const float *last_logits() const { return last_logits_valid_ && !pending_ ? last_logits_.data() : nullptr; }
    // The committed backend state in the canonical layout (Backend::export_state); deferred
    // factors are applied, which changes no later result.
    void export_state(float *recurrent, float *conv);
    // Replace everything a continuation depends on: the context (its last token pending, not yet
    // fed, when `pending`), the backend state (canonical layout) and the last logits (vocab floats;
    // null: none). An uncommitted verification is dropped. Inputs are trusted (checked by the
    // caller); allocation happens before anything changes.
    void restore(std::vector<int32_t> context, bool pending, const float *recurrent, const float *conv,
                 const float *last_logits);
    // The same from another session of the same model object (a fork): device to device where
    // both states are on one backend.
    void copy_from(Session &source);

    // What the speculation gate (spec/spec_gate.h) of this session's last speculative generation
    // measured, for decoding steps (with_features false) and for decoding steps that also return
    // the fed token's feature (what a plain step is for a drafter that reads features; its
    // drafter catches up on those features at the next pass). The next generation
    // starts from it: no plain probe, and where speculation with the same drafter had lost, the
    // rest of its back-off before probing again (generations of a few dozen tokens would
    // otherwise each pay a probe of a drafter that loses). Kept across reset(): these are costs
    // of steps, not of a context.
    struct SpeculationRecord {
        double plain_seconds_per_token = 0;  // 0: none measured
        const void *drafter = nullptr;       // whose back-off this is (another starts afresh)
        int64_t backoff_tokens = 0;          // the next back-off (0: the gate's first)
        int64_t plain_tokens_left = 0;       // plain tokens left of the current back-off
    };
    const SpeculationRecord &speculation_record(bool with_features) const {
        return speculation_records_[with_features];
    }
    void set_speculation_record(bool with_features, const SpeculationRecord &r) {
        speculation_records_[with_features] = r;
    }

    struct Memory {
        SessionMemory backend;     // the backend's buffers (state, factors, scratch)
        size_t own_bytes = 0;      // this object's host buffers: last logits, verification outputs
        size_t context_bytes = 0;  // the token history (the standard allocator's, not HostVec)
    };
    Memory memory() const;

private:
    std::shared_ptr<Model> model_;
    SessionLimits limits_;
    std::unique_ptr<SequenceState> state_;
    std::vector<int32_t> context_;
    std::optional<int32_t> pending_;
    HostVec<float> last_logits_;
    bool last_logits_valid_ = false;
    SpeculationRecord speculation_records_[2];
    // The last verification: whether its node 0 was the pending token, and its draft tokens.
    bool verified_with_pending_ = false;
    bool verified_ = false;
    // HostVec like every buffer but the context, so that memory() counts them exactly.
    HostVec<int32_t> verified_tokens_, verified_parents_;
    HostVec<int32_t> backend_nodes_, backend_parents_;
    HostVec<float> verify_logits_;
    HostVec<float> verify_features_;
    HostVec<int32_t> verify_argmax_;
};

}  // namespace specla
