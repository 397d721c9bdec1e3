#pragma once
// A request sent whole and its connection closed before a byte of the
// answer is read: what a provider's timeout does to a slow handler, for
// `idem probe`'s retry-after-drop. Plain http:// only (a TLS session cannot
// be dropped half-way through libcurl).

#include "idem/net/http_client.hpp"
#include "idem/net/target.hpp"

#include <optional>
#include <string>

namespace idem::net {

// Why a connection to `target` cannot be dropped half-way (not http://),
// or nullopt.
[[nodiscard]] std::optional<std::string> hang_up_refused(const Target& target);

// Sends `request` to `target` (its origin only: the request's path is the
// target's) and hangs up. Nullopt once sent; otherwise why it was not.
[[nodiscard]] std::optional<std::string>
send_and_hang_up(const Target& target, const OutgoingRequest& request, Duration connect_timeout);

} // namespace idem::net
