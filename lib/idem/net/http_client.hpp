#pragma once
// Many HTTP requests at once from one thread (libcurl's multi interface),
// for `idem replay`: start transfers, then collect the ones that finished.
// The only place libcurl is included.

#include "idem/net/http_request.hpp"
#include "idem/util/time.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace idem::net {

struct OutgoingRequest {
    std::string method = "POST";
    std::string url;
    HeaderPairs headers; // sent as given, in order; curl adds Host and Content-Length
    std::string body;
};

struct Timeouts {
    Duration connect = std::chrono::seconds(2);
    Duration total = std::chrono::seconds(30);
};

struct TransferResult {
    enum class Transport { answered, not_sent, lost_after_send };
    Transport transport = Transport::answered;
    int status = 0;
    std::string retry_after; // the response's Retry-After header, if any
    // The headers that say what a handler did with a delivery (Content-Type,
    // Location, Idempotent-Replayed, an Idempotency-Key echo), each value
    // cut to k_key_header_bytes: what probe shows of a failing answer.
    std::vector<std::pair<std::string, std::string>> key_headers;
    std::string body;   // at most max_body_bytes of it
    std::string digest; // SHA-256 of the whole body, hex
    Duration latency{0};
    std::string error; // transport errors: curl's description
};

inline constexpr std::size_t k_key_header_bytes = 100;

class HttpClient {
public:
    // Throws NetworkError when libcurl cannot start.
    HttpClient(Timeouts timeouts, std::size_t max_body_bytes = 64 << 10);
    ~HttpClient();
    HttpClient(const HttpClient&) = delete;
    HttpClient& operator=(const HttpClient&) = delete;

    // Starts sending; the id comes back with the result.
    void start(std::uint64_t id, OutgoingRequest request);

    // Drives transfers for at most `wait` and returns those that ended.
    std::vector<std::pair<std::uint64_t, TransferResult>> poll(Duration wait);

    [[nodiscard]] std::size_t in_flight() const;

    // One request, start to end (the client must have none in flight).
    TransferResult send(OutgoingRequest request);

private:
    struct Impl;
    std::unique_ptr<Impl> m_impl;
};

} // namespace idem::net
