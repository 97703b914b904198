// Minimal JSON output for the `--json` modes (the program only writes JSON, never reads it).
#pragma once

#include <cstdio>
#include <string>

namespace specla_cli {

// `s` as a JSON string literal: quotes, backslashes and control bytes escaped; other bytes are
// copied (the library's text is UTF-8).
inline std::string json_string(const std::string &s) {
    std::string out = "\"";
    for (const char ch : s) {
        const unsigned char c = static_cast<unsigned char>(ch);
        if (c == '"' || c == '\\') {
            out += '\\';
            out += ch;
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '\t') {
            out += "\\t";
        } else if (c < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out += buf;
        } else {
            out += ch;
        }
    }
    return out + "\"";
}

}  // namespace specla_cli
