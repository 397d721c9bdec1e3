// libcurl's multi interface behind HttpClient.

#include "idem/net/http_client.hpp"

#include "idem/crypto/crypto.hpp"
#include "idem/net/detail/libcurl.hpp"
#include "idem/util/encoding.hpp"
#include "idem/util/errors.hpp"
#include "idem/util/text.hpp"

#include <algorithm>
#include <curl/curl.h>
#include <fmt/format.h>
#include <map>
#include <utility>

namespace idem::net {

namespace {

// curl_global_init is not thread-safe; done once, before any handle exists.
void initialise_curl() {
    static const bool k_done = [] {
        if (detail::libcurl().global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
            throw NetworkError("libcurl failed to initialise");
        return true;
    }();
    (void)k_done;
}

long milliseconds(Duration duration) {
    return static_cast<long>(std::max<long long>(
        1, std::chrono::duration_cast<std::chrono::milliseconds>(duration).count()));
}

} // namespace

struct Transfer {
    CURL* easy = nullptr;
    curl_slist* headers = nullptr;
    std::uint64_t id = 0;
    OutgoingRequest request;
    TransferResult result;
    crypto::Sha256Stream hash;
    std::size_t max_body_bytes = 0;
    std::chrono::steady_clock::time_point started;

    ~Transfer() {
        detail::libcurl().slist_free_all(headers);
        if (easy) detail::libcurl().easy_cleanup(easy);
    }
};

namespace {

std::size_t on_body(char* data, std::size_t size, std::size_t count, void* user) {
    auto* transfer = static_cast<Transfer*>(user);
    std::string_view bytes(data, size * count);
    transfer->hash.update(bytes);
    auto room =
        transfer->max_body_bytes - std::min(transfer->max_body_bytes, transfer->result.body.size());
    transfer->result.body.append(bytes.substr(0, std::min(room, bytes.size())));
    return bytes.size();
}

std::size_t on_header(char* data, std::size_t size, std::size_t count, void* user) {
    auto* transfer = static_cast<Transfer*>(user);
    std::string_view line(data, size * count);
    // A new status line (after 100 Continue, say) starts a new header block.
    if (line.starts_with("HTTP/")) {
        transfer->result.retry_after.clear();
        transfer->result.key_headers.clear();
    }
    auto colon = line.find(':');
    if (colon == std::string_view::npos) return line.size();
    auto name = trim(line.substr(0, colon));
    auto value = trim(line.substr(colon + 1));
    if (iequals(name, "Retry-After")) transfer->result.retry_after = value;
    constexpr std::string_view k_key_headers[] = {"Content-Type", "Location", "Idempotent-Replayed",
                                                  "Idempotency-Key"};
    auto& kept = transfer->result.key_headers;
    for (auto key : k_key_headers)
        if (iequals(name, key) && kept.size() < std::size(k_key_headers))
            kept.emplace_back(std::string(key), utf8_prefix(value, k_key_header_bytes));
    return line.size();
}

// Headers curl would add on its own unless told not to: the request carries
// exactly the captured ones (Host and Content-Length excepted).
constexpr std::string_view k_suppressed_defaults[] = {"Accept", "Content-Type", "Expect"};

} // namespace

struct HttpClient::Impl {
    CURLM* multi = nullptr;
    Timeouts timeouts;
    std::size_t max_body_bytes;
    std::map<CURL*, std::unique_ptr<Transfer>> transfers;
    // Finished handles, reset and kept: a new handle per request allocates
    // its buffers again, which was a quarter of replay's time.
    std::vector<CURL*> idle_handles;
};

HttpClient::HttpClient(Timeouts timeouts, std::size_t max_body_bytes)
    : m_impl(std::make_unique<Impl>()) {
    initialise_curl();
    m_impl->multi = detail::libcurl().multi_init();
    if (!m_impl->multi) throw NetworkError("libcurl: cannot create a multi handle");
    m_impl->timeouts = timeouts;
    m_impl->max_body_bytes = max_body_bytes;
    detail::libcurl().multi_setopt(m_impl->multi, CURLMOPT_MAXCONNECTS, 256L);
}

HttpClient::~HttpClient() {
    for (auto& [easy, transfer] : m_impl->transfers)
        detail::libcurl().multi_remove_handle(m_impl->multi, easy);
    m_impl->transfers.clear();
    for (auto* easy : m_impl->idle_handles)
        detail::libcurl().easy_cleanup(easy);
    detail::libcurl().multi_cleanup(m_impl->multi);
}

void HttpClient::start(std::uint64_t id, OutgoingRequest request) {
    const auto& curl = detail::libcurl();
    auto transfer = std::make_unique<Transfer>();
    if (!m_impl->idle_handles.empty()) {
        transfer->easy = m_impl->idle_handles.back();
        m_impl->idle_handles.pop_back();
    } else {
        transfer->easy = curl.easy_init();
    }
    if (!transfer->easy) throw NetworkError("libcurl: cannot create a transfer");
    transfer->id = id;
    transfer->request = std::move(request);
    transfer->max_body_bytes = m_impl->max_body_bytes;
    auto* easy = transfer->easy;
    const auto& sent = transfer->request;
    curl.easy_setopt(easy, CURLOPT_URL, sent.url.c_str());
    curl.easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
    curl.easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, milliseconds(m_impl->timeouts.connect));
    curl.easy_setopt(easy, CURLOPT_TIMEOUT_MS, milliseconds(m_impl->timeouts.total));
    if (sent.method == "GET" && sent.body.empty()) {
        curl.easy_setopt(easy, CURLOPT_HTTPGET, 1L);
    } else {
        curl.easy_setopt(easy, CURLOPT_POSTFIELDS, sent.body.data());
        curl.easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE,
                         static_cast<curl_off_t>(sent.body.size()));
        if (sent.method != "POST")
            curl.easy_setopt(easy, CURLOPT_CUSTOMREQUEST, sent.method.c_str());
    }
    for (const auto& [name, value] : sent.headers)
        transfer->headers =
            curl.slist_append(transfer->headers, fmt::format("{}: {}", name, value).c_str());
    for (auto name : k_suppressed_defaults) {
        bool given = std::any_of(sent.headers.begin(), sent.headers.end(),
                                 [&](const auto& header) { return iequals(header.first, name); });
        if (!given)
            transfer->headers =
                curl.slist_append(transfer->headers, fmt::format("{}:", name).c_str());
    }
    curl.easy_setopt(easy, CURLOPT_HTTPHEADER, transfer->headers);
    curl.easy_setopt(easy, CURLOPT_WRITEFUNCTION, on_body);
    curl.easy_setopt(easy, CURLOPT_WRITEDATA, transfer.get());
    curl.easy_setopt(easy, CURLOPT_HEADERFUNCTION, on_header);
    curl.easy_setopt(easy, CURLOPT_HEADERDATA, transfer.get());
    transfer->started = std::chrono::steady_clock::now();
    if (curl.multi_add_handle(m_impl->multi, easy) != CURLM_OK)
        throw NetworkError("libcurl: cannot start a transfer");
    m_impl->transfers.emplace(easy, std::move(transfer));
}

std::vector<std::pair<std::uint64_t, TransferResult>> HttpClient::poll(Duration wait) {
    const auto& curl = detail::libcurl();
    auto& impl = *m_impl;
    int running = 0;
    curl.multi_perform(impl.multi, &running);
    if (running > 0) {
        curl.multi_poll(impl.multi, nullptr, 0, static_cast<int>(milliseconds(wait)), nullptr);
        curl.multi_perform(impl.multi, &running);
    }
    std::vector<std::pair<std::uint64_t, TransferResult>> finished;
    int left = 0;
    while (CURLMsg* message = curl.multi_info_read(impl.multi, &left)) {
        if (message->msg != CURLMSG_DONE) continue;
        auto found = impl.transfers.find(message->easy_handle);
        if (found == impl.transfers.end()) continue;
        auto& transfer = *found->second;
        auto& result = transfer.result;
        result.latency = std::chrono::duration_cast<Duration>(std::chrono::steady_clock::now() -
                                                              transfer.started);
        auto code = message->data.result;
        if (code == CURLE_OK) {
            long status = 0;
            curl.easy_getinfo(transfer.easy, CURLINFO_RESPONSE_CODE, &status);
            result.status = static_cast<int>(status);
            result.transport = TransferResult::Transport::answered;
            result.digest = hex_encode(transfer.hash.finish().view());
        } else {
            // Whether the target may have seen the request decides whether
            // a retry without a key is safe: no connection means it did not.
            long connected = 0;
            curl.easy_getinfo(transfer.easy, CURLINFO_PRIMARY_PORT, &connected);
            bool never_connected = code == CURLE_COULDNT_CONNECT ||
                                   code == CURLE_COULDNT_RESOLVE_HOST ||
                                   code == CURLE_COULDNT_RESOLVE_PROXY || connected == 0;
            result.transport = never_connected ? TransferResult::Transport::not_sent
                                               : TransferResult::Transport::lost_after_send;
            result.error = curl.easy_strerror(code);
        }
        curl.multi_remove_handle(impl.multi, transfer.easy);
        curl.easy_reset(transfer.easy);
        impl.idle_handles.push_back(std::exchange(transfer.easy, nullptr));
        finished.emplace_back(transfer.id, std::move(result));
        impl.transfers.erase(found);
    }
    return finished;
}

std::size_t HttpClient::in_flight() const {
    return m_impl->transfers.size();
}

TransferResult HttpClient::send(OutgoingRequest request) {
    start(0, std::move(request));
    while (true) {
        auto finished = poll(std::chrono::milliseconds(100));
        if (!finished.empty()) return std::move(finished.front().second);
    }
}

} // namespace idem::net
