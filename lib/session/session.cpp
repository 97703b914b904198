#include "session/session.h"

#include <algorithm>
#include <cstring>

#include "sampling/sampler.h"
#include "util/error.h"

namespace specla {

void validate_tokens(const ModelConfig &config, const int32_t *tokens, size_t n) {
    for (size_t i = 0; i < n; ++i)
        require(tokens[i] >= 0 && tokens[i] < config.vocab_size, SPECLA_ERR_TOKEN_OUT_OF_RANGE, "token id ",
                tokens[i], " at position ", i, " is outside the vocabulary [0, ", config.vocab_size, ")");
}

Session::Session(std::shared_ptr<Model> model, const SessionLimits &limits)
    : model_(std::move(model)), limits_(limits) {
    require(limits.max_batch_tokens >= 1 && limits.max_tree_nodes >= 1, SPECLA_ERR_INVALID_ARGUMENT,
            "session limits must be positive (max_batch_tokens ", limits.max_batch_tokens, ", max_tree_nodes ",
            limits.max_tree_nodes, ")");
    state_ = model_->backend().create_state(limits_);
    last_logits_.resize(size_t(config().vocab_size));
}

void Session::reset() {
    model_->backend().reset_state(*state_);
    verified_ = false;
    context_.clear();
    pending_.reset();
    last_logits_valid_ = false;
}

void Session::flush_pending(bool keep_logits) {
    verified_ = false;  // the state moves on
    if (!pending_) return;
    const int32_t t = *pending_;
    pending_.reset();
    model_->backend().eval_chain(*state_, &t, 1, keep_logits ? LogitsRows::Last : LogitsRows::None,
                                 keep_logits ? last_logits_.data() : nullptr);
    last_logits_valid_ = keep_logits;
}

void Session::set_pending(int32_t token) {
    flush_pending();
    pending_ = token;
    context_.push_back(token);
    last_logits_valid_ = false;
}

void Session::eval(const int32_t *tokens, size_t n, LogitsRows rows, float *logits, float *features) {
    require(n > 0, SPECLA_ERR_INVALID_ARGUMENT, "no tokens to evaluate (n_tokens is 0)");
    validate_tokens(config(), tokens, n);
    flush_pending();
    const size_t vocab = size_t(config().vocab_size), D = size_t(config().hidden_size);
    const size_t block = size_t(limits_.max_batch_tokens);
    for (size_t off = 0; off < n; off += block) {
        const int32_t m = int32_t(std::min(block, n - off));
        const bool last_block = off + size_t(m) == n;
        LogitsRows r = LogitsRows::None;
        float *dst = nullptr;
        if (rows == LogitsRows::All) {
            r = LogitsRows::All, dst = logits + off * vocab;
        } else if (last_block) {
            // The last row is always kept so that generation can continue from this context.
            r = LogitsRows::Last, dst = last_logits_.data();
        }
        RowFeatures f;
        if (features) f.out = features + off * D;
        model_->backend().eval_chain(*state_, tokens + off, m, r, dst, f);
    }
    context_.insert(context_.end(), tokens, tokens + n);
    if (rows == LogitsRows::All) std::memcpy(last_logits_.data(), logits + (n - 1) * vocab, vocab * 4);
    else if (rows == LogitsRows::Last) std::memcpy(logits, last_logits_.data(), vocab * 4);
    last_logits_valid_ = true;
}

int32_t Session::decode_and_sample(int32_t token, const SamplingConfig &sampling, double u, const float **row,
                                   float *features) {
    validate_tokens(config(), &token, 1);
    flush_pending();
    int32_t next;
    if (row || sampling.needs_host_sampler(config().vocab_size)) {
        // A device sampler draws from the whole vocabulary with temperature, top-k and top-p
        // only: take the step's logits (the greedy path copies nothing else) and choose here, by
        // the same rule, with the transformations that read the history (the context with the
        // token just fed). Cost on the GPU: one vocab-wide logits copy per token plus the host
        // sampler, instead of an on-device argmax or draw.
        model_->backend().decode_and_sample(*state_, token, SamplingConfig{}, u, last_logits_.data(), features);
        context_.push_back(token);
        last_logits_valid_ = false;
        if (row) *row = last_logits_.data();
        return sample_token(last_logits_.data(), config().vocab_size, sampling, History::of(context_), u);
    }
    next = model_->backend().decode_and_sample(*state_, token, sampling, u, nullptr, features);
    context_.push_back(token);
    last_logits_valid_ = false;
    return next;
}

int32_t Session::sample_next(const SamplingConfig &sampling, double u, const float **row, float *features) {
    if (pending_) {
        const int32_t t = *pending_;
        pending_.reset();
        context_.pop_back();  // decode_and_sample records it again
        return decode_and_sample(t, sampling, u, row, features);
    }
    require(features == nullptr, SPECLA_ERR_INTERNAL, "sample_next: features asked for without a token to feed");
    require(last_logits_valid_, SPECLA_ERR_STATE,
            "the session has no logits for its last token: pass a non-empty prompt");
    if (row) *row = last_logits_.data();
    return sample_token(last_logits_.data(), config().vocab_size, sampling, History::of(context_), u);
}

void Session::verify(const DraftTree &tree, TreeAlgorithm algorithm, const VerifyBuffers &out) {
    const int32_t n = tree.size();
    const int32_t vocab = config().vocab_size;
    validate_tree(tree.tokens.data(), tree.parents.data(), n, vocab);
    require(n <= limits_.max_tree_nodes, SPECLA_ERR_INVALID_ARGUMENT, "draft tree of ", n,
            " nodes exceeds the session's max_tree_nodes (", limits_.max_tree_nodes, ")");
    verified_ = false;
    Backend &be = model_->backend();
    const size_t V = size_t(vocab), D = size_t(config().hidden_size);
    const bool want_logits = out.root_logits || out.node_logits;
    const bool want_features = out.root_features || out.node_features;
    if (pending_) {
        // The pending token leads the pass as node 0: its outputs are the root's.
        backend_nodes_.assign(1, *pending_);
        backend_parents_.assign(1, -1);
        for (int32_t i = 0; i < n; ++i) {
            backend_nodes_.push_back(tree.tokens[size_t(i)]);
            backend_parents_.push_back(tree.parents[size_t(i)] + 1);
        }
        VerifyOutputs bo;
        if (want_logits) {
            verify_logits_.resize(size_t(n + 1) * V);
            bo.logits = verify_logits_.data();
        }
        if (out.root_argmax || out.node_argmax) {
            verify_argmax_.resize(size_t(n + 1));
            bo.argmax = verify_argmax_.data();
        }
        if (want_features) {
            verify_features_.resize(size_t(n + 1) * D);
            bo.features.out = verify_features_.data();
        }
        be.verify_tree(*state_, backend_nodes_.data(), backend_parents_.data(), n + 1, algorithm, bo);
        if (out.root_features) std::memcpy(out.root_features, verify_features_.data(), D * sizeof(float));
        if (out.node_features && n)
            std::memcpy(out.node_features, verify_features_.data() + D, size_t(n) * D * sizeof(float));
        if (out.root_logits) std::memcpy(out.root_logits, verify_logits_.data(), V * sizeof(float));
        if (out.node_logits && n) std::memcpy(out.node_logits, verify_logits_.data() + V, size_t(n) * V * sizeof(float));
        if (out.root_argmax) *out.root_argmax = verify_argmax_[0];
        if (out.node_argmax && n) std::memcpy(out.node_argmax, verify_argmax_.data() + 1, size_t(n) * sizeof(int32_t));
        verified_with_pending_ = true;
    } else {
        require(last_logits_valid_, SPECLA_ERR_STATE,
                "the session has no logits for its last token: evaluate a prompt first");
        if (out.root_logits) std::memcpy(out.root_logits, last_logits_.data(), V * sizeof(float));
        if (out.root_argmax) *out.root_argmax = argmax(last_logits_.data(), vocab);
        VerifyOutputs bo;
        bo.logits = out.node_logits;
        bo.argmax = out.node_argmax;
        bo.features.out = out.node_features;
        if (n) be.verify_tree(*state_, tree.tokens.data(), tree.parents.data(), n, algorithm, bo);
        verified_with_pending_ = false;
    }
    verified_tokens_.assign(tree.tokens.begin(), tree.tokens.end());
    verified_parents_.assign(tree.parents.begin(), tree.parents.end());
    verified_ = true;
}

std::unique_ptr<RowSampler> Session::row_sampler(const SamplingConfig &sampling) {
    return pending_ ? model_->backend().row_sampler(*state_, sampling) : nullptr;
}

void Session::commit(const std::vector<int32_t> &path, int32_t bonus, bool deferred) {
    require(verified_, SPECLA_ERR_STATE, "commit without a preceding verification");
    validate_tokens(config(), &bonus, 1);
    int32_t expect_parent = -1;
    for (int32_t node : path) {
        require(node >= 0 && node < int32_t(verified_tokens_.size()) && verified_parents_[size_t(node)] == expect_parent,
                SPECLA_ERR_INVALID_ARGUMENT, "accepted node ", node, " does not continue a root-to-leaf path");
        expect_parent = node;
    }
    backend_nodes_.clear();
    if (verified_with_pending_) backend_nodes_.push_back(0);
    for (int32_t node : path) backend_nodes_.push_back(node + (verified_with_pending_ ? 1 : 0));
    if (!backend_nodes_.empty()) model_->backend().commit_path(*state_, backend_nodes_.data(), int32_t(backend_nodes_.size()), deferred);
    pending_.reset();  // consumed by the verification (when there was one)
    for (int32_t node : path) context_.push_back(verified_tokens_[size_t(node)]);
    pending_ = bonus;
    context_.push_back(bonus);
    last_logits_valid_ = false;
    verified_ = false;
}

void Session::read_state(int32_t layer, float *out) {
    require(layer >= 0 && layer < config().num_layers, SPECLA_ERR_INVALID_ARGUMENT, "layer ", layer,
            " is outside [0, ", config().num_layers, ")");
    flush_pending(/*keep_logits=*/true);  // generation may continue from this context afterwards
    model_->backend().read_recurrent_state(*state_, layer, out);
}

void Session::export_state(float *recurrent, float *conv) { model_->backend().export_state(*state_, recurrent, conv); }

void Session::restore(std::vector<int32_t> context, bool pending, const float *recurrent, const float *conv,
                      const float *last_logits) {
    model_->backend().import_state(*state_, recurrent, conv);
    context_ = std::move(context);
    pending_.reset();
    if (pending) pending_ = context_.back();
    last_logits_valid_ = last_logits != nullptr;
    if (last_logits) std::memcpy(last_logits_.data(), last_logits, last_logits_.size() * sizeof(float));
    verified_ = false;
}

void Session::copy_from(Session &source) {
    if (&source == this) return;
    require(&source.model() == &model(), SPECLA_ERR_INTERNAL, "copy_from: sessions of different model objects");
    std::vector<int32_t> context = source.context_;  // allocated before anything changes
    model_->backend().copy_state(*source.state_, *state_);
    context_ = std::move(context);
    pending_ = source.pending_;
    last_logits_valid_ = source.last_logits_valid_;
    if (last_logits_valid_) last_logits_ = source.last_logits_;
    verified_ = false;
}

Session::Memory Session::memory() const {
    Memory m;
    m.backend = model_->backend().session_memory(*state_);
    auto bytes = [](const auto &v) { return v.capacity() * sizeof(v[0]); };
    m.own_bytes = bytes(last_logits_) + bytes(verify_logits_) + bytes(verify_features_) + bytes(verified_tokens_) +
                  bytes(verified_parents_) + bytes(backend_nodes_) + bytes(backend_parents_) + bytes(verify_argmax_);
    m.context_bytes = bytes(context_);
    return m;
}

}  // namespace specla
