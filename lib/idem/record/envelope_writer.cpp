// Envelope lines for captured requests.

#include "idem/record/envelope_writer.hpp"

#include "idem/record/annotate.hpp"
#include "idem/util/encoding.hpp"

#include <simdjson.h>

namespace idem::record {

namespace {

void append_latin1_string(std::string& out, std::string_view text) {
    std::string utf8;
    utf8.reserve(text.size() * 2);
    for (char c : text) {
        auto byte = static_cast<unsigned char>(c);
        if (byte < 0x80) {
            utf8 += c;
        } else {
            utf8 += static_cast<char>(0xC0 | (byte >> 6));
            utf8 += static_cast<char>(0x80 | (byte & 0x3F));
        }
    }
    append_json_string(out, utf8);
}

void append_text(std::string& out, std::string_view text) {
    if (is_valid_utf8(text))
        append_json_string(out, text);
    else
        append_latin1_string(out, text);
}

} // namespace

bool is_valid_utf8(std::string_view bytes) {
    return simdjson::validate_utf8(bytes.data(), bytes.size());
}

void append_envelope(std::string& out, const CapturedRequest& request) {
    out += "{\"idem\":1,\"id\":";
    append_json_string(out, request.id);
    out += ",\"received_at\":\"";
    out += format_rfc3339(request.received_at);
    out += "\",\"method\":";
    append_text(out, request.method);
    out += ",\"path\":";
    append_text(out, request.path);
    // Text that is not UTF-8 is written for people as ISO-8859-1, which
    // cannot tell "caf\xe9" from "caf\xc3\xa9"; the raw bytes go beside it
    // in base64, and every reader uses those.
    if (!is_valid_utf8(request.path)) {
        out += ",\"path_b64\":\"";
        out += base64_encode(request.path);
        out += '"';
    }
    if (!request.remote.empty()) {
        out += ",\"remote\":";
        append_json_string(out, request.remote);
    }
    out += ",\"headers\":[";
    bool first = true;
    if (request.headers) {
        for (const auto& [name, value] : *request.headers) {
            if (!first) out += ',';
            first = false;
            out += '[';
            append_text(out, name);
            out += ',';
            append_text(out, value);
            if (!is_valid_utf8(value)) {
                out += ",\"";
                out += base64_encode(value);
                out += '"';
            }
            out += ']';
        }
    }
    out += ']';
    if (is_valid_utf8(request.body)) {
        out += ",\"body\":";
        append_json_string(out, request.body);
    } else {
        out += ",\"body_b64\":\"";
        out += base64_encode(request.body);
        out += '"';
    }
    out += '}';
}

} // namespace idem::record
