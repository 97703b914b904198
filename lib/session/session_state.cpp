#include "session/session_state.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <limits>
#include <utility>

#include "util/checksum.h"
#include "util/error.h"
#include "util/file_read.h"

namespace specla {

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "session states are little-endian; this host is not (see session_state.md)"
#endif

namespace {

constexpr unsigned char kMagic[8] = {'S', 'P', 'E', 'C', 'L', 'A', 'S', 'T'};
constexpr uint32_t kFlagPending = 1u, kFlagLogits = 2u, kKnownFlags = kFlagPending | kFlagLogits;

// Byte offsets of the header fields (session_state.md).
enum : size_t {
    kOffMagic = 0, kOffVersion = 8, kOffHeaderBytes = 12, kOffPayloadBytes = 16, kOffChecksum = 24,
    kOffConfigHash = 32, kOffWeightsHash = 40, kOffShape = 48,  // 7 x int32, see Shape
    kOffFlags = 76, kOffContext = 80, kOffReserved = 88,
    kChecksummedFrom = 32,  // the checksum covers everything after itself
};

template <typename T>
T get(const unsigned char *p, size_t off) {
    T v;
    std::memcpy(&v, p + off, sizeof v);
    return v;
}
template <typename T>
void put(unsigned char *p, size_t off, T v) {
    std::memcpy(p + off, &v, sizeof v);
}

std::string hex(uint64_t v) {
    char b[24];
    std::snprintf(b, sizeof b, "0x%016" PRIx64, v);
    return b;
}

// What a state must share with the model it is loaded into.
struct Shape {
    int32_t dims[7] = {};  // num_layers, num_v_heads, head_k_dim, head_v_dim, conv rows, conv channels, vocab
    uint64_t config_hash = 0, weights_hash = 0;

    static Shape of(const Model &m) {
        const ModelConfig &c = m.config();
        Shape s;
        const int32_t conv_rows = c.use_short_conv ? c.conv_size - 1 : 0;
        const int32_t d[7] = {c.num_layers, c.num_v_heads, c.head_k_dim, c.head_v_dim, conv_rows, c.conv_channels(),
                              c.vocab_size};
        std::copy(d, d + 7, s.dims);
        s.config_hash = m.identity().config_hash;
        s.weights_hash = m.identity().weights_hash;
        return s;
    }
    uint64_t recurrent_floats() const { return uint64_t(dims[0]) * uint64_t(dims[1]) * uint64_t(dims[2]) * uint64_t(dims[3]); }
    uint64_t conv_floats() const { return uint64_t(dims[0]) * uint64_t(dims[4]) * uint64_t(dims[5]); }
};

constexpr const char *kDimNames[7] = {"num_layers", "num_v_heads", "head_k_dim", "head_v_dim", "conv cache rows",
                                      "conv channels", "vocab_size"};

// SPECLA_ERR_SHAPE naming the first thing `state` (what a state or another session holds) does
// not share with `model` (the session it would go into).
void require_same_model(const Shape &state, const Shape &model, const std::string &origin) {
    for (int i = 0; i < 7; ++i)
        require(state.dims[i] == model.dims[i], SPECLA_ERR_SHAPE, origin, ": state of another model: ", kDimNames[i],
                " is ", state.dims[i], ", this session's model has ", model.dims[i]);
    require(state.config_hash == model.config_hash, SPECLA_ERR_SHAPE, origin,
            ": state of another model: same shapes, other configuration (config hash ", hex(state.config_hash),
            ", this session's model ", hex(model.config_hash), ")");
    require(state.weights_hash == model.weights_hash, SPECLA_ERR_SHAPE, origin,
            ": state of another model: same configuration, other weights (weights fingerprint ",
            hex(state.weights_hash), ", this session's model ", hex(model.weights_hash), ")");
}

// The framing checks, on the header alone: what it is, its version, that `total_size` bytes are
// exactly a header and the payload it announces. Returns the payload size.
uint64_t check_framing(const unsigned char *h, size_t header_available, uint64_t total_size, const std::string &origin) {
    const size_t magic_seen = std::min(header_available, sizeof kMagic);
    require(std::memcmp(h + kOffMagic, kMagic, magic_seen) == 0, SPECLA_ERR_FORMAT, origin,
            ": not a SpecLA session state (its first bytes are not \"SPECLAST\")");
    require(header_available >= kSessionStateHeaderBytes, SPECLA_ERR_FORMAT, origin, ": truncated: ", total_size,
            " bytes, shorter than the ", kSessionStateHeaderBytes, "-byte header of a session state");
    const uint32_t version = get<uint32_t>(h, kOffVersion);
    require(version == kSessionStateVersion, SPECLA_ERR_UNSUPPORTED, origin, ": session state format version ", version,
            " is not supported (this library reads version ", kSessionStateVersion, ")");
    const uint32_t header_bytes = get<uint32_t>(h, kOffHeaderBytes);
    require(header_bytes == kSessionStateHeaderBytes, SPECLA_ERR_FORMAT, origin, ": header size field is ", header_bytes,
            ", version ", kSessionStateVersion, " headers are ", kSessionStateHeaderBytes, " bytes");
    const uint64_t payload = get<uint64_t>(h, kOffPayloadBytes);
    const uint64_t present = total_size - kSessionStateHeaderBytes;
    require(payload <= present, SPECLA_ERR_FORMAT, origin, ": truncated: the header announces ", payload,
            " payload bytes, ", present, " are present");
    require(payload == present, SPECLA_ERR_FORMAT, origin, ": ", present - payload,
            " byte(s) after the end of the state");
    return payload;
}

}  // namespace

size_t encoded_state_size(const Session &session) {
    const Shape s = Shape::of(session.model());
    const size_t floats = size_t(s.recurrent_floats() + s.conv_floats()) +
                          (session.last_logits() ? size_t(session.config().vocab_size) : 0);
    return kSessionStateHeaderBytes + session.context().size() * sizeof(int32_t) + floats * sizeof(float);
}

void encode_state(Session &session, unsigned char *out) {
    const Shape s = Shape::of(session.model());
    const std::vector<int32_t> &context = session.context();
    const float *logits = session.last_logits();
    const size_t total = encoded_state_size(session);

    unsigned char *h = out;
    std::memset(h, 0, kSessionStateHeaderBytes);
    std::memcpy(h + kOffMagic, kMagic, sizeof kMagic);
    put<uint32_t>(h, kOffVersion, kSessionStateVersion);
    put<uint32_t>(h, kOffHeaderBytes, uint32_t(kSessionStateHeaderBytes));
    put<uint64_t>(h, kOffPayloadBytes, uint64_t(total - kSessionStateHeaderBytes));
    put<uint64_t>(h, kOffConfigHash, s.config_hash);
    put<uint64_t>(h, kOffWeightsHash, s.weights_hash);
    for (int i = 0; i < 7; ++i) put<int32_t>(h, kOffShape + 4 * size_t(i), s.dims[i]);
    put<uint32_t>(h, kOffFlags, (session.has_pending() ? kFlagPending : 0u) | (logits ? kFlagLogits : 0u));
    put<uint64_t>(h, kOffContext, uint64_t(context.size()));

    unsigned char *p = out + kSessionStateHeaderBytes;
    if (!context.empty()) std::memcpy(p, context.data(), context.size() * sizeof(int32_t));
    p += context.size() * sizeof(int32_t);
    // The backend writes floats: stage them, since `out` need not be aligned for float.
    HostVec<float> recurrent(size_t(s.recurrent_floats())), conv(size_t(s.conv_floats()));
    session.export_state(recurrent.data(), conv.data());
    std::memcpy(p, recurrent.data(), recurrent.size() * sizeof(float));
    p += recurrent.size() * sizeof(float);
    if (!conv.empty()) std::memcpy(p, conv.data(), conv.size() * sizeof(float));
    p += conv.size() * sizeof(float);
    if (logits) std::memcpy(p, logits, size_t(session.config().vocab_size) * sizeof(float));
    put<uint64_t>(h, kOffChecksum, checksum(out + kChecksummedFrom, total - kChecksummedFrom));
}

void decode_state(Session &session, const unsigned char *data, size_t size, const std::string &origin) {
    const uint64_t payload = check_framing(data, size, size, origin);
    const uint64_t stored = get<uint64_t>(data, kOffChecksum);
    const uint64_t computed = checksum(data + kChecksummedFrom, size - kChecksummedFrom);
    require(stored == computed, SPECLA_ERR_FORMAT, origin, ": checksum mismatch (stored ", hex(stored), ", computed ",
            hex(computed), "): the state is corrupted");

    Shape state;
    for (int i = 0; i < 7; ++i) state.dims[i] = get<int32_t>(data, kOffShape + 4 * size_t(i));
    state.config_hash = get<uint64_t>(data, kOffConfigHash);
    state.weights_hash = get<uint64_t>(data, kOffWeightsHash);
    const Shape model = Shape::of(session.model());
    require_same_model(state, model, origin);

    const uint32_t flags = get<uint32_t>(data, kOffFlags);
    require((flags & ~kKnownFlags) == 0, SPECLA_ERR_FORMAT, origin, ": flags field ", flags,
            " has bits this version does not define");
    const bool pending = flags & kFlagPending, has_logits = flags & kFlagLogits;
    require(!(pending && has_logits), SPECLA_ERR_FORMAT, origin,
            ": flags say both a pending token and last logits (logits are kept only when no token is pending)");
    require(get<uint64_t>(data, kOffReserved) == 0, SPECLA_ERR_FORMAT, origin, ": reserved header field is not 0");
    const uint64_t n_context = get<uint64_t>(data, kOffContext);
    require(!pending || n_context > 0, SPECLA_ERR_FORMAT, origin, ": a pending token is flagged but the context is empty");
    const uint64_t vocab = uint64_t(model.dims[6]);
    const uint64_t floats = model.recurrent_floats() + model.conv_floats() + (has_logits ? vocab : 0);
    require(n_context <= payload / sizeof(int32_t) && payload == n_context * 4 + floats * 4, SPECLA_ERR_FORMAT, origin,
            ": payload of ", payload, " bytes does not hold ", n_context, " context ids and ", floats,
            " state floats");

    // Everything is copied out (and checked) before the session changes.
    const unsigned char *p = data + kSessionStateHeaderBytes;
    std::vector<int32_t> context(static_cast<size_t>(n_context));
    if (n_context) std::memcpy(context.data(), p, size_t(n_context) * sizeof(int32_t));
    p += n_context * sizeof(int32_t);
    for (size_t i = 0; i < context.size(); ++i)
        require(context[i] >= 0 && uint64_t(context[i]) < vocab, SPECLA_ERR_FORMAT, origin, ": context id ", context[i],
                " at position ", i, " is outside the vocabulary [0, ", vocab, ")");
    HostVec<float> recurrent(size_t(model.recurrent_floats())), conv(size_t(model.conv_floats())), logits;
    std::memcpy(recurrent.data(), p, recurrent.size() * sizeof(float));
    p += recurrent.size() * sizeof(float);
    if (!conv.empty()) std::memcpy(conv.data(), p, conv.size() * sizeof(float));
    p += conv.size() * sizeof(float);
    if (has_logits) {
        logits.resize(size_t(vocab));
        std::memcpy(logits.data(), p, logits.size() * sizeof(float));
    }
    session.restore(std::move(context), pending, recurrent.data(), conv.data(), has_logits ? logits.data() : nullptr);
}

void save_state_file(Session &session, const std::string &path) {
    require(!path.empty(), SPECLA_ERR_INVALID_ARGUMENT, "session state path is empty");
    HostVec<unsigned char> bytes(encoded_state_size(session));
    encode_state(session, bytes.data());
    const std::string part = path + ".part";
    const int fd = ::open(part.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY, 0644);
    require(fd >= 0, SPECLA_ERR_IO, "cannot create ", part, ": ", std::strerror(errno));
    auto give_up = [&](const char *what, int err) {
        ::close(fd);
        ::unlink(part.c_str());
        fail(SPECLA_ERR_IO, "cannot ", what, " ", part, ": ", std::strerror(err));
    };
    for (size_t done = 0; done < bytes.size();) {
        const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) give_up("write", n < 0 ? errno : EIO);
        done += size_t(n);
    }
    if (::close(fd) != 0) {
        const int err = errno;
        ::unlink(part.c_str());
        fail(SPECLA_ERR_IO, "cannot write ", part, ": ", std::strerror(err));
    }
    if (::rename(part.c_str(), path.c_str()) != 0) {
        const int err = errno;
        ::unlink(part.c_str());
        fail(SPECLA_ERR_IO, "cannot rename ", part, " to ", path, ": ", std::strerror(err));
    }
}

void load_state_file(Session &session, const std::string &path) {
    require(!path.empty(), SPECLA_ERR_INVALID_ARGUMENT, "session state path is empty");
    const ReadOnlyFile file(path);
    // The header first: a file that is not a state (or not this size) is refused without reading it.
    unsigned char header[kSessionStateHeaderBytes] = {};
    size_t got = 0;
    while (got < sizeof header) {
        const ssize_t n = ::pread(file.fd(), header + got, sizeof header - got, off_t(got));
        if (n < 0 && errno == EINTR) continue;
        require(n >= 0, SPECLA_ERR_IO, "cannot read ", path, ": ", std::strerror(errno));
        if (n == 0) break;
        got += size_t(n);
    }
    check_framing(header, got, file.size(), path);
    const std::string text = file.read_all(file.size(), "the size its header announces");
    decode_state(session, reinterpret_cast<const unsigned char *>(text.data()), text.size(), path);
}

void copy_state(Session &from, Session &to) {
    if (&from == &to) return;
    if (&from.model() == &to.model()) {
        to.copy_from(from);
        return;
    }
    const Shape a = Shape::of(from.model()), b = Shape::of(to.model());
    require_same_model(a, b, "copying a session state");
    HostVec<float> recurrent(size_t(a.recurrent_floats())), conv(size_t(a.conv_floats())), logits;
    if (const float *l = from.last_logits()) logits.assign(l, l + from.config().vocab_size);
    std::vector<int32_t> context = from.context();
    from.export_state(recurrent.data(), conv.data());
    to.restore(std::move(context), from.has_pending(), recurrent.data(), conv.data(),
               logits.empty() ? nullptr : logits.data());
}

}  // namespace specla
