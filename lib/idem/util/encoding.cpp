#include "idem/util/encoding.hpp"

#include <array>

namespace idem {

namespace {
constexpr char k_hex_digits[] = "0123456789abcdef";
constexpr char k_base64_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

constexpr std::array<int, 256> make_base64_table() {
    std::array<int, 256> table{};
    for (auto& entry : table)
        entry = -1;
    for (int i = 0; i < 64; ++i)
        table[static_cast<unsigned char>(k_base64_alphabet[i])] = i;
    table['-'] = 62; // URL-safe alphabet
    table['_'] = 63;
    return table;
}
constexpr auto k_base64_table = make_base64_table();

constexpr std::array<int, 256> make_hex_table() {
    std::array<int, 256> table{};
    for (auto& entry : table)
        entry = -1;
    for (int i = 0; i < 10; ++i)
        table[static_cast<unsigned char>('0' + i)] = i;
    for (int i = 0; i < 6; ++i) {
        table[static_cast<unsigned char>('a' + i)] = 10 + i;
        table[static_cast<unsigned char>('A' + i)] = 10 + i;
    }
    return table;
}
constexpr auto k_hex_table = make_hex_table();

int hex_value(char c) {
    return k_hex_table[static_cast<unsigned char>(c)];
}
} // namespace

std::string hex_encode(std::string_view bytes) {
    std::string out(bytes.size() * 2, '\0');
    for (std::size_t i = 0; i < bytes.size(); ++i) {
        auto byte = static_cast<unsigned char>(bytes[i]);
        out[2 * i] = k_hex_digits[byte >> 4];
        out[2 * i + 1] = k_hex_digits[byte & 0xf];
    }
    return out;
}

bool is_hex(std::string_view text) {
    int invalid = 0;
    for (char c : text)
        invalid |= hex_value(c);
    return invalid >= 0;
}

std::optional<std::size_t> hex_decode_to(std::string_view text, char* out, std::size_t capacity) {
    if (text.size() % 2 != 0 || text.size() / 2 > capacity) return std::nullopt;
    int invalid = 0;
    for (std::size_t i = 0; i < text.size() / 2; ++i) {
        int high = hex_value(text[2 * i]);
        int low = hex_value(text[2 * i + 1]);
        invalid |= high | low;
        out[i] = static_cast<char>((high << 4) | low);
    }
    if (invalid < 0) return std::nullopt;
    return text.size() / 2;
}

std::optional<std::string> hex_decode(std::string_view text) {
    std::string out(text.size() / 2, '\0');
    if (!hex_decode_to(text, out.data(), out.size())) return std::nullopt;
    return out;
}

std::string base64_encode(std::string_view bytes) {
    std::string out;
    out.reserve((bytes.size() + 2) / 3 * 4);
    std::size_t i = 0;
    auto at = [&](std::size_t index) {
        return static_cast<unsigned>(static_cast<unsigned char>(bytes[index]));
    };
    for (; i + 3 <= bytes.size(); i += 3) {
        unsigned triple = (at(i) << 16) | (at(i + 1) << 8) | at(i + 2);
        out += k_base64_alphabet[(triple >> 18) & 63];
        out += k_base64_alphabet[(triple >> 12) & 63];
        out += k_base64_alphabet[(triple >> 6) & 63];
        out += k_base64_alphabet[triple & 63];
    }
    if (bytes.size() - i == 1) {
        unsigned triple = at(i) << 16;
        out += k_base64_alphabet[(triple >> 18) & 63];
        out += k_base64_alphabet[(triple >> 12) & 63];
        out += "==";
    } else if (bytes.size() - i == 2) {
        unsigned triple = (at(i) << 16) | (at(i + 1) << 8);
        out += k_base64_alphabet[(triple >> 18) & 63];
        out += k_base64_alphabet[(triple >> 12) & 63];
        out += k_base64_alphabet[(triple >> 6) & 63];
        out += '=';
    }
    return out;
}

std::string base64url_encode(std::string_view bytes) {
    auto out = base64_encode(bytes);
    while (!out.empty() && out.back() == '=')
        out.pop_back();
    for (auto& c : out)
        c = c == '+' ? '-' : c == '/' ? '_' : c;
    return out;
}

bool base64_decode_into(std::string_view text, std::string& out) {
    out.clear();
    while (!text.empty() && text.back() == '=')
        text.remove_suffix(1);
    if (text.size() % 4 == 1) return false;
    out.reserve(text.size() * 3 / 4);
    unsigned accumulator = 0;
    int bits = 0;
    for (char c : text) {
        int value = k_base64_table[static_cast<unsigned char>(c)];
        if (value < 0) return false;
        accumulator = (accumulator << 6) | static_cast<unsigned>(value);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out += static_cast<char>((accumulator >> bits) & 0xff);
        }
    }
    return true;
}

std::optional<std::size_t> base64_decode_to(std::string_view text, char* out,
                                            std::size_t capacity) {
    while (!text.empty() && text.back() == '=')
        text.remove_suffix(1);
    if (text.size() % 4 == 1 ||
        text.size() / 4 * 3 + (text.size() % 4 ? text.size() % 4 - 1 : 0) > capacity)
        return std::nullopt;
    unsigned accumulator = 0;
    int bits = 0;
    std::size_t size = 0;
    for (char c : text) {
        int value = k_base64_table[static_cast<unsigned char>(c)];
        if (value < 0) return std::nullopt;
        accumulator = (accumulator << 6) | static_cast<unsigned>(value);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[size++] = static_cast<char>((accumulator >> bits) & 0xff);
        }
    }
    return size;
}

std::optional<std::string> base64_decode(std::string_view text) {
    std::string out;
    if (!base64_decode_into(text, out)) return std::nullopt;
    return out;
}

std::string form_decode(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (text[i] == '+') {
            out += ' ';
        } else if (text[i] == '%' && i + 2 < text.size()) {
            auto decoded = hex_decode(text.substr(i + 1, 2));
            if (decoded) {
                out += *decoded;
                i += 2;
            } else {
                out += '%';
            }
        } else {
            out += text[i];
        }
    }
    return out;
}

std::vector<std::pair<std::string, std::string>> parse_form(std::string_view body) {
    std::vector<std::pair<std::string, std::string>> pairs;
    while (!body.empty()) {
        auto end = body.find('&');
        auto item = body.substr(0, end);
        body = end == std::string_view::npos ? std::string_view() : body.substr(end + 1);
        if (item.empty()) continue;
        auto equals = item.find('=');
        pairs.emplace_back(form_decode(item.substr(0, equals)),
                           equals == std::string_view::npos ? std::string()
                                                            : form_decode(item.substr(equals + 1)));
    }
    return pairs;
}

} // namespace idem
