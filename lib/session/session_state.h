// A session's state as bytes: saved to memory or a file, restored, copied into another session.
// The format (versioned, checksummed, tied to one model, one canonical layout for every backend)
// is specified in session_state.md beside this file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "session/session.h"

namespace specla {

constexpr uint32_t kSessionStateVersion = 1;
constexpr size_t kSessionStateHeaderBytes = 96;

// Exact size of what encode_state writes for the session as it is now.
size_t encoded_state_size(const Session &session);
// Writes encoded_state_size(session) bytes to `out` (any alignment).
void encode_state(Session &session, unsigned char *out);
// Checks `size` bytes and makes them the session's state. Throws naming `origin` (a file path or
// "session state buffer") and what does not fit: SPECLA_ERR_FORMAT (not a state, truncated,
// trailing bytes, checksum mismatch, impossible values), SPECLA_ERR_UNSUPPORTED (another format
// version), SPECLA_ERR_SHAPE (a state of another model). The session is unchanged on any throw.
void decode_state(Session &session, const unsigned char *data, size_t size, const std::string &origin);

// The same through a file: written to `path`.part, then renamed over `path`, so that a failed save
// leaves no partial file under the name (SPECLA_ERR_IO naming the path and the reason).
void save_state_file(Session &session, const std::string &path);
void load_state_file(Session &session, const std::string &path);

// `to` continues exactly as `from` would (a fork). Sessions of one model object copy on the
// backend; sessions of two loads of one model (other backend, other thread count) go through the
// canonical layout; another model is SPECLA_ERR_SHAPE naming what differs.
void copy_state(Session &from, Session &to);

}  // namespace specla
