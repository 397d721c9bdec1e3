#pragma once
// What the signature tests build: a configuration of secrets labelled #1,
// #2... as the CLI labels them, and a POST delivery (one spelling for every
// test, so a unity batch has one of each).

#include "idem/record/parser.hpp"
#include "idem/verify/config.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace idem::test {

[[nodiscard]] inline verify::VerifyConfig config_for(verify::Scheme scheme,
                                                     std::vector<std::string> secrets) {
    verify::VerifyConfig config;
    config.scheme = scheme;
    for (std::size_t i = 0; i < secrets.size(); ++i)
        config.secrets.push_back({"#" + std::to_string(i + 1), secrets[i]});
    return config;
}

[[nodiscard]] inline record::Envelope delivery(std::vector<record::Header> headers,
                                               std::string_view body, std::string_view path = "/") {
    record::Envelope e;
    e.method = "POST";
    e.path = path;
    e.headers = std::move(headers);
    e.body = body;
    return e;
}

} // namespace idem::test
