// Routing Redis commands over one node or a Redis Cluster (redis_cluster.hpp).
// One file past ~700 lines, on purpose: the router's connections, its slot
// map, redirects (MOVED, ASK, TRYAGAIN), retries and WAIT change together,
// and their helpers and process-wide settings (credentials, the store
// timeout) stay file-local; each role's commands are in redis_<role>.cpp.

#include "idem/store/redis/redis_cluster.hpp"

#include "idem/util/errors.hpp"
#include "idem/util/pipe_signal.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <chrono>
#include <fmt/format.h>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

namespace idem::store::detail {

namespace {

constexpr std::uint16_t k_slots = 16384;
// Redirects one command may follow before the map is called broken.
constexpr int k_max_redirects = 16;
// How long a cluster may be without an owner for a slot (a failover, a
// migration) before a command fails.
constexpr auto k_cluster_patience = std::chrono::seconds(15);
constexpr timeval k_io_timeout{5, 0};

std::uint16_t crc16(std::string_view bytes) {
    std::uint16_t crc = 0;
    for (char c : bytes) {
        crc = static_cast<std::uint16_t>(crc ^ (static_cast<std::uint8_t>(c) << 8));
        for (int bit = 0; bit < 8; ++bit)
            crc = static_cast<std::uint16_t>((crc & 0x8000) ? (crc << 1) ^ 0x1021 : crc << 1);
    }
    return crc;
}

std::mutex g_credentials_mutex;
RedisCredentials g_credentials;
std::atomic<std::int64_t> g_store_timeout_us{10'000'000};

// A connection that failed or went away: retried with backoff by the public
// operations when what was sent may safely be sent again.
struct Unreachable {
    std::string why;
    bool sent = false; // commands had gone out on the connection: what ran is not known
};

// What a failure that outlasted --store-timeout is called: the store's
// error, or (opening it) that it could not be connected to.
enum class GiveUp { store_error, cannot_connect };

// hiredis takes arguments as pointers and lengths.
struct ArgumentView {
    std::vector<const char*> pointers;
    std::vector<size_t> lengths;
    explicit ArgumentView(const Arguments& arguments) {
        for (const auto& argument : arguments) {
            pointers.push_back(argument.data());
            lengths.push_back(argument.size());
        }
    }
    [[nodiscard]] int count() const { return static_cast<int>(pointers.size()); }
};

constexpr auto k_first_backoff = std::chrono::milliseconds(100);
constexpr auto k_max_backoff = std::chrono::seconds(2);

RedisCredentials credentials() {
    std::lock_guard lock(g_credentials_mutex);
    return g_credentials;
}

std::string text_of(const redisReply* reply) {
    return reply && (reply->type == REDIS_REPLY_STRING || reply->type == REDIS_REPLY_STATUS ||
                     reply->type == REDIS_REPLY_ERROR)
               ? std::string(reply->str, reply->len)
               : std::string();
}

// "MOVED 3999 127.0.0.1:6381" / "ASK 3999 127.0.0.1:6381"
struct Redirect {
    bool ask = false;
    std::uint16_t slot = 0;
    RedisEndpoint to;
};
std::optional<Redirect> redirect_of(const redisReply* reply) {
    if (!reply || reply->type != REDIS_REPLY_ERROR) return std::nullopt;
    std::string_view text(reply->str, reply->len);
    Redirect redirect;
    if (text.starts_with("MOVED "))
        text.remove_prefix(6);
    else if (text.starts_with("ASK "))
        text.remove_prefix(4), redirect.ask = true;
    else
        return std::nullopt;
    auto space = text.find(' ');
    auto colon = text.rfind(':');
    if (space == std::string_view::npos || colon == std::string_view::npos || colon < space)
        return std::nullopt;
    unsigned slot = 0;
    std::from_chars(text.data(), text.data() + space, slot);
    redirect.slot = static_cast<std::uint16_t>(slot % k_slots);
    redirect.to.host = std::string(text.substr(space + 1, colon - space - 1));
    std::from_chars(text.data() + colon + 1, text.data() + text.size(), redirect.to.port);
    return redirect;
}

// A connection to one node, opened on first use.
struct Node {
    RedisEndpoint endpoint;
    Connection context;
    bool has_replicas = false; // as the slot map or the node itself says
    // When the node last said it has none (replicas_checked()).
    std::chrono::steady_clock::time_point no_replicas_since{};

    [[nodiscard]] std::string name() const {
        return fmt::format("{}:{}", endpoint.host, endpoint.port);
    }
    void close() { context.reset(); }
    Node(RedisEndpoint where, redisContext* open) : endpoint(std::move(where)), context(open) {}
};

} // namespace

bool error_starts(const redisReply* reply, std::string_view prefix) {
    return reply && reply->type == REDIS_REPLY_ERROR &&
           std::string_view(reply->str, reply->len).starts_with(prefix);
}

std::uint16_t key_slot(std::string_view key) {
    auto open = key.find('{');
    if (open != std::string_view::npos) {
        auto close = key.find('}', open + 1);
        if (close != std::string_view::npos && close > open + 1)
            key = key.substr(open + 1, close - open - 1);
    }
    return static_cast<std::uint16_t>(crc16(key) % k_slots);
}

void set_store_timeout(std::chrono::microseconds timeout) {
    g_store_timeout_us.store(timeout.count());
}

void set_redis_credentials(RedisCredentials given) {
    std::lock_guard lock(g_credentials_mutex);
    g_credentials = std::move(given);
}

// Whether a reply says the cluster could not take the command now: a slot
// being migrated (TRYAGAIN) or a failover under way (CLUSTERDOWN). The
// command did not run.
static bool cluster_busy(const redisReply* reply) {
    return error_starts(reply, "TRYAGAIN") || error_starts(reply, "CLUSTERDOWN");
}

// Sent right after a node's writes, in the same piece: WAIT answers once a
// replica has every write this connection made, or after k_replica_wait_ms.
static const Arguments& replica_wait() {
    static const Arguments k_wait{"WAIT", "1", std::to_string(k_replica_wait_ms)};
    return k_wait;
}

struct RedisRouter::Impl {
    std::vector<RedisEndpoint> seeds;
    int database = 0;
    std::string name;
    bool clustered = false;
    bool mode_known = false; // cluster or not: found out on the first connection
    std::vector<std::unique_ptr<Node>> nodes;
    std::vector<Node*> masters;
    std::array<Node*, k_slots> owner{};         // cluster: the master of each slot
    std::map<std::string, std::string> scripts; // sha -> source, for NOSCRIPT

    [[noreturn]] void fail(const std::string& what) const {
        throw StoreError(fmt::format("store {}: {}", name, what));
    }

    Node& node_for(const RedisEndpoint& endpoint) {
        for (auto& node : nodes)
            if (node->endpoint.host == endpoint.host && node->endpoint.port == endpoint.port)
                return *node;
        nodes.push_back(std::make_unique<Node>(endpoint, nullptr));
        return *nodes.back();
    }

    // Opens the node's connection if needed: connect, AUTH, SELECT.
    // False (and the reason in `why`) when the node cannot be reached.
    bool connect(Node& node, std::string& why) {
        if (node.context) return true;
        node.context.reset(
            redisConnectWithTimeout(node.endpoint.host.c_str(), node.endpoint.port, k_io_timeout));
        if (!node.context || node.context->err) {
            why = node.context ? node.context->errstr : "out of memory";
            node.close();
            return false;
        }
        redisSetTimeout(node.context.get(), k_io_timeout);
        auto login = credentials();
        if (!login.password.empty()) {
            Arguments auth{"AUTH"};
            if (!login.user.empty()) auth.push_back(login.user);
            auth.push_back(login.password);
            auto reply = raw_command(node, auth);
            if (!reply) {
                why = "connection lost";
                node.close();
                return false;
            }
            // A node that answers refused the credentials: waiting out
            // --store-timeout would not change its answer. The reply names
            // no secret; the password is never echoed.
            if (reply->type == REDIS_REPLY_ERROR) {
                node.close();
                fail("authentication failed: " + text_of(reply.get()));
            }
        }
        if (database != 0 && mode_known && !clustered) {
            auto reply = raw_command(node, {"SELECT", std::to_string(database)});
            if (!reply || reply->type == REDIS_REPLY_ERROR) {
                why = reply ? text_of(reply.get()) : "connection lost";
                node.close();
                return false;
            }
        }
        return true;
    }

    Node& connected(Node& node) {
        std::string why;
        if (!connect(node, why))
            throw Unreachable{fmt::format("cannot connect to {}: {}", node.name(), why)};
        return node;
    }

    // Runs `operation`; a node that cannot be reached, before anything was
    // sent or (Retry::safe) with commands in flight that may be sent again,
    // is retried with backoff until the store timeout, then reported.
    template <typename Operation>
    auto retrying(Retry retry, Operation operation, GiveUp give_up = GiveUp::store_error)
        -> decltype(operation()) {
        auto timeout = std::chrono::microseconds(g_store_timeout_us.load());
        auto deadline = std::chrono::steady_clock::now() + timeout;
        auto backoff = std::chrono::duration_cast<std::chrono::microseconds>(k_first_backoff);
        while (true) {
            try {
                return operation();
            } catch (const Unreachable& unreachable) {
                // Whatever failed, a connection may hold replies (or
                // commands) of the failed attempt: read by the next one,
                // a stale "OK" or "1" would answer a claim or a WAIT it
                // never got. Every connection starts afresh.
                for (auto& node : nodes)
                    node->close();
                auto now = std::chrono::steady_clock::now();
                if (unreachable.sent && retry == Retry::never) fail(unreachable.why);
                if (now >= deadline) {
                    auto why = fmt::format("{} (unreachable for {:.1f} s: --store-timeout)",
                                           unreachable.why,
                                           std::chrono::duration<double>(timeout).count());
                    if (give_up == GiveUp::cannot_connect)
                        throw StoreError(fmt::format("cannot connect to store {}: {}", name, why));
                    fail(why);
                }
                std::this_thread::sleep_for(std::min<std::chrono::microseconds>(
                    backoff,
                    std::chrono::duration_cast<std::chrono::microseconds>(deadline - now)));
                backoff = std::min<std::chrono::microseconds>(backoff * 2, k_max_backoff);
                if (clustered) refresh_quietly();
            }
        }
    }

    // hiredis writes with write(2): a node that went away must be an error,
    // not a SIGPIPE death (util/pipe_signal.hpp).
    static Reply raw_command(Node& node, const Arguments& arguments) {
        PipeSignalHeld held;
        ArgumentView view(arguments);
        return Reply(static_cast<redisReply*>(redisCommandArgv(
            node.context.get(), view.count(), view.pointers.data(), view.lengths.data())));
    }

    void append(Node& node, const Arguments& arguments) {
        ArgumentView view(arguments);
        if (redisAppendCommandArgv(node.context.get(), view.count(), view.pointers.data(),
                                   view.lengths.data()) != REDIS_OK)
            lost(node);
    }

    // Only a read that finds commands still to send writes (hiredis sends
    // them first), so only that one holds SIGPIPE back: holding it costs
    // four system calls, more than reading a pipelined reply.
    Reply read(Node& node) {
        std::optional<PipeSignalHeld> held;
        if (sdslen(node.context->obuf) > 0) held.emplace();
        void* raw = nullptr;
        if (redisGetReply(node.context.get(), &raw) != REDIS_OK || raw == nullptr) lost(node);
        return Reply(static_cast<redisReply*>(raw));
    }

    // A command in the Redis protocol (RESP), appended to what is sent to a
    // node in one piece: hiredis would build each in a buffer of its own.
    static void format_command(std::string& out, const Arguments& arguments) {
        out += '*';
        out += std::to_string(arguments.size());
        out += "\r\n";
        for (const auto& argument : arguments) {
            out += '$';
            out += std::to_string(argument.size());
            out += "\r\n";
            out += argument;
            out += "\r\n";
        }
    }

    // `answer` is WAIT's: a write counts as held only once a replica has
    // it. Asked again while the answer is 0 (a replica catching up, a
    // failover under way), up to k_replica_wait_tries; a master that never
    // hears from a replica, or that has become a replica itself, fails the
    // attempt as an unreachable node does (retried up to --store-timeout,
    // then StoreError): no record is written out on a claim the replica
    // that takes over might not have.
    void await_replica(Node& node, Reply answer) {
        for (int asked = 1;; ++asked) {
            if (answer && answer->type == REDIS_REPLY_INTEGER && answer->integer >= 1) return;
            if (!answer || answer->type != REDIS_REPLY_INTEGER || asked == k_replica_wait_tries)
                // Like a node that cannot be reached: the writes went again
                // (Retry::safe: each is this run's own when it meets itself)
                // until --store-timeout, so a replica slow to come back, or
                // a failover under way, is ridden out rather than ending the
                // run after its output was written.
                throw Unreachable{
                    fmt::format("no replica of {} acknowledged the writes ({})", node.name(),
                                !answer ? std::string("no answer")
                                : answer->type == REDIS_REPLY_INTEGER
                                    ? fmt::format("none within {} ms", k_replica_wait_ms * asked)
                                    : fmt::format("WAIT answered {}", text_of(answer.get()))),
                    true};
            append(node, replica_wait());
            answer = read(node);
        }
    }

    void append_formatted(Node& node, const std::string& commands) {
        if (redisAppendFormattedCommand(node.context.get(), commands.data(), commands.size()) !=
            REDIS_OK)
            lost(node);
    }

    // Commands were sent on it and it went away: what ran is not known.
    // retrying() sends them again only when that is safe.
    [[noreturn]] void lost(Node& node) {
        std::string why =
            node.context && node.context->errstr[0] ? node.context->errstr : "connection lost";
        node.close();
        throw Unreachable{
            fmt::format("lost the connection to {} with commands in flight: {}", node.name(), why),
            true};
    }

    // Reads the slot map from any node that answers; true when it was read.
    bool refresh_map() {
        std::vector<RedisEndpoint> candidates;
        for (auto& node : nodes)
            candidates.push_back(node->endpoint);
        candidates.insert(candidates.end(), seeds.begin(), seeds.end());
        for (const auto& endpoint : candidates) {
            auto& node = node_for(endpoint);
            std::string why;
            if (!connect(node, why)) continue;
            auto reply = raw_command(node, {"CLUSTER", "SLOTS"});
            if (!reply) {
                node.close();
                continue;
            }
            if (reply->type != REDIS_REPLY_ARRAY) continue;
            if (install_map(reply.get(), node)) return true;
        }
        return false;
    }

    void refresh_quietly() {
        try {
            refresh_map();
        } catch (const StoreError&) {
        }
    }

    bool install_map(const redisReply* reply, const Node& asked) {
        std::array<Node*, k_slots> next{};
        std::vector<Node*> next_masters;
        std::vector<Node*> replicated; // masters a range names replicas for
        for (std::size_t i = 0; i < reply->elements; ++i) {
            const auto* range = reply->element[i];
            if (range->type != REDIS_REPLY_ARRAY || range->elements < 3) continue;
            const auto* master = range->element[2];
            if (master->type != REDIS_REPLY_ARRAY || master->elements < 2) continue;
            RedisEndpoint endpoint{text_of(master->element[0]),
                                   static_cast<int>(master->element[1]->integer)};
            if (endpoint.host.empty() || endpoint.host == "?") endpoint.host = asked.endpoint.host;
            auto& node = node_for(endpoint);
            if (std::find(next_masters.begin(), next_masters.end(), &node) == next_masters.end())
                next_masters.push_back(&node);
            if (range->elements > 3) replicated.push_back(&node);
            auto first = static_cast<std::size_t>(range->element[0]->integer);
            auto last = static_cast<std::size_t>(range->element[1]->integer);
            for (auto slot = first; slot <= last && slot < k_slots; ++slot)
                next[slot] = &node;
        }
        if (next_masters.empty()) return false;
        owner = next;
        masters = std::move(next_masters);
        for (auto& node : nodes)
            node->has_replicas =
                std::find(replicated.begin(), replicated.end(), node.get()) != replicated.end();
        // CLUSTER SLOTS leaves out a replica whose replication offset its
        // master has not heard of yet (a cluster just created, a replica
        // just attached): taken for a master without replicas, its claims
        // would go unwaited and be lost with it. Each master says how many
        // replicas are connected now.
        for (auto* master : masters)
            if (!master->has_replicas) ask_replicas(*master);
        return true;
    }

    // INFO replication's connected_slaves: every replica connected now,
    // still syncing included (ROLE, like CLUSTER SLOTS, lists only the
    // ones online, and a replica is online a moment after its link is up):
    // WAIT then waits for it to catch up.
    void ask_replicas(Node& node) {
        node.no_replicas_since = std::chrono::steady_clock::now();
        std::string why;
        if (!connect(node, why)) return;
        auto info = raw_command(node, {"INFO", "replication"});
        if (!info || info->type != REDIS_REPLY_STRING) return;
        constexpr std::string_view k_field = "connected_slaves:";
        std::string_view text(info->str, info->len);
        auto at = text.find(k_field);
        if (at == std::string_view::npos) return;
        text.remove_prefix(at + k_field.size());
        std::size_t count = 0;
        auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), count);
        if (error == std::errc{} && end != text.data()) node.has_replicas = count > 0;
    }

    // Whether writes to `node` are waited on. A node taken for one without
    // replicas is asked again, at most once a second, before it is written
    // to: a replica attached since (the old master back after a failover,
    // as the new one's replica) is waited on from then, so a second
    // failover cannot lose what the first left unreplicated. Asked only
    // between pipelines: no reply is pending on its connection.
    bool replicas_checked(Node& node) {
        if (!node.has_replicas &&
            std::chrono::steady_clock::now() - node.no_replicas_since >= std::chrono::seconds(1))
            ask_replicas(node);
        return node.has_replicas;
    }

    // The node a key's commands go to; waits out a failover for a slot
    // without an owner, up to k_cluster_patience.
    Node& route(std::string_view key) {
        if (!clustered) return connected(*nodes.front());
        auto slot = key.empty() ? std::uint16_t{0} : key_slot(key);
        auto deadline = std::chrono::steady_clock::now() + k_cluster_patience;
        while (true) {
            if (auto* node = owner[slot]) {
                std::string why;
                if (connect(*node, why)) return *node;
                // Its master is unreachable: a failover may be under way.
                owner[slot] = nullptr;
            }
            if (std::chrono::steady_clock::now() > deadline)
                throw Unreachable{fmt::format(
                    "no reachable node serves slot {} after {} s", slot,
                    std::chrono::duration_cast<std::chrono::seconds>(k_cluster_patience).count())};
            if (!refresh_map() || !owner[slot])
                std::this_thread::sleep_for(std::chrono::milliseconds(200));
        }
    }

    // A reply that says the command did not run here: followed until it
    // ran, or failed with a reason. Each node a command ran on after all
    // (a redirect's target, a node asked again) is added to `ran_on`, when
    // given: a pipeline whose writes must reach a replica waits on those
    // too (RedisRouter::pipeline_once).
    Reply settle(Reply reply, const Arguments& arguments, std::string_view key,
                 ErrorReplies errors = ErrorReplies::fail, std::vector<Node*>* ran_on = nullptr) {
        auto ran_here = [&](Node& node) {
            if (ran_on && std::find(ran_on->begin(), ran_on->end(), &node) == ran_on->end())
                ran_on->push_back(&node);
        };
        for (int hop = 0; hop < k_max_redirects; ++hop) {
            if (!reply) fail("no reply");
            if (auto redirect = redirect_of(reply.get())) {
                auto& target = connected(node_for(redirect->to));
                if (redirect->ask) {
                    append(target, {"ASKING"});
                    append(target, arguments);
                    (void)read(target);
                    reply = read(target);
                    ran_here(target);
                } else {
                    owner[redirect->slot] = &target;
                    refresh_quietly();
                    auto& node = route(key);
                    reply = send_one(node, arguments);
                    ran_here(node);
                }
                continue;
            }
            if (error_starts(reply.get(), "NOSCRIPT") && arguments.size() > 1 &&
                scripts.contains(arguments[1])) {
                auto& node = route(key);
                (void)raw_command(node, {"SCRIPT", "LOAD", scripts.at(arguments[1])});
                reply = send_one(node, arguments);
                ran_here(node);
                continue;
            }
            if (cluster_busy(reply.get())) {
                std::this_thread::sleep_for(std::chrono::milliseconds(100));
                refresh_quietly();
                auto& node = route(key);
                reply = send_one(node, arguments);
                ran_here(node);
                continue;
            }
            // A restarted node answers LOADING while it reads its data back
            // (or is a replica the map still names, loading its master's
            // data): waited out as a node that cannot be reached, with
            // backoff and a fresh map, up to --store-timeout. The command
            // did not run; others in its pipeline may have.
            if (error_starts(reply.get(), "LOADING")) throw Unreachable{text_of(reply.get()), true};
            if (reply->type == REDIS_REPLY_ERROR && errors == ErrorReplies::fail)
                fail(text_of(reply.get()));
            return reply;
        }
        fail(fmt::format("more than {} redirects for one command", k_max_redirects));
    }

    Reply send_one(Node& node, const Arguments& arguments) {
        append(node, arguments);
        return read(node);
    }
};

RedisRouter::RedisRouter(std::vector<RedisEndpoint> seeds, int database, std::string name)
    : m_impl(std::make_unique<Impl>()) {
    auto& impl = *m_impl;
    impl.seeds = std::move(seeds);
    impl.database = database;
    impl.name = std::move(name);
    impl.retrying(
        Retry::safe,
        [&] {
            discover();
            return 0;
        },
        GiveUp::cannot_connect);
}

// The first seed that answers says whether this is a cluster.
void RedisRouter::discover() {
    auto& impl = *m_impl;
    auto database = impl.database;
    std::string last_error;
    for (const auto& seed : impl.seeds) {
        auto& node = impl.node_for(seed);
        if (!impl.connect(node, last_error)) continue;
        auto reply = Impl::raw_command(node, {"CLUSTER", "SLOTS"});
        if (!reply) {
            last_error =
                node.context && node.context->errstr[0] ? node.context->errstr : "connection lost";
            node.close();
            continue;
        }
        // A node still loading its data cannot say whether it is in a
        // cluster: asked again, with backoff, rather than taken for one node.
        if (error_starts(reply.get(), "LOADING")) {
            last_error = text_of(reply.get());
            node.close();
            continue;
        }
        impl.mode_known = true;
        if (reply->type == REDIS_REPLY_ARRAY && impl.install_map(reply.get(), node)) {
            impl.clustered = true;
            if (database != 0)
                impl.fail("a Redis Cluster has only database 0: drop the /db from the URI");
            return;
        }
        // "ERR This instance has cluster support disabled": one node.
        impl.nodes.erase(std::remove_if(impl.nodes.begin(), impl.nodes.end(),
                                        [&](const auto& other) { return other.get() != &node; }),
                         impl.nodes.end());
        impl.masters = {impl.nodes.front().get()};
        impl.ask_replicas(node);
        if (database != 0) {
            auto selected = Impl::raw_command(node, {"SELECT", std::to_string(database)});
            if (!selected || selected->type == REDIS_REPLY_ERROR)
                impl.fail(fmt::format("cannot select database {}: {}", database,
                                      selected ? text_of(selected.get()) : "connection lost"));
        }
        return;
    }
    throw Unreachable{last_error};
}

RedisRouter::~RedisRouter() = default; // each node closes its connection

bool RedisRouter::clustered() const {
    return m_impl->clustered;
}

Reply RedisRouter::command(const Arguments& arguments, std::string_view key, Retry retry) {
    auto& impl = *m_impl;
    return impl.retrying(retry, [&] {
        auto reply = impl.send_one(impl.route(key), arguments);
        return impl.settle(std::move(reply), arguments, key);
    });
}

std::vector<Reply> RedisRouter::pipeline(const std::vector<RoutedCommand>& commands, Retry retry,
                                         ErrorReplies errors, Replicas replicas) {
    return m_impl->retrying(retry, [&] { return pipeline_once(commands, errors, replicas); });
}

std::vector<Reply> RedisRouter::pipeline_once(const std::vector<RoutedCommand>& commands,
                                              ErrorReplies errors, Replicas replicas) {
    auto& impl = *m_impl;
    std::vector<std::size_t> which(commands.size());
    for (std::size_t i = 0; i < commands.size(); ++i)
        which[i] = i;
    std::vector<Reply> replies(commands.size());
    send_pipelined(commands, which, replies, replicas);
    // Commands the cluster could not take go again together, after one
    // pause, until it takes them (or k_cluster_patience): one by one, each
    // after a pause of its own, a block of 26,000 claims that met a
    // failover took 100 ms a claim.
    auto deadline = std::chrono::steady_clock::now() + k_cluster_patience;
    while (true) {
        which.clear();
        for (std::size_t i = 0; i < commands.size(); ++i)
            if (cluster_busy(replies[i].get())) which.push_back(i);
        if (which.empty()) break;
        // Still down: the run waits as for a node it cannot reach, up to
        // --store-timeout, rather than each command waiting on its own.
        if (std::chrono::steady_clock::now() >= deadline)
            throw Unreachable{text_of(replies[which.front()].get()), true};
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        impl.refresh_quietly();
        send_pipelined(commands, which, replies, replicas);
    }
    // A command that ran elsewhere than where it was first sent (a
    // redirect, NOSCRIPT, a busy cluster) ran without the WAIT its first
    // node's piece carried: its node is waited on now, or the claim it made
    // could be lost with that node and be a first copy twice.
    std::vector<Node*> ran_elsewhere;
    for (std::size_t i = 0; i < commands.size(); ++i)
        replies[i] = impl.settle(std::move(replies[i]), commands[i].arguments, commands[i].key,
                                 errors, replicas == Replicas::wait ? &ran_elsewhere : nullptr);
    for (auto* node : ran_elsewhere)
        if (impl.replicas_checked(*node)) {
            impl.append(*node, replica_wait());
            impl.await_replica(*node, impl.read(*node));
        }
    return replies;
}

// Sends commands[which...] in one piece per node and reads their replies
// into replies[which...], unsettled (redirects and the like still to be
// followed).
void RedisRouter::send_pipelined(const std::vector<RoutedCommand>& commands,
                                 const std::vector<std::size_t>& which, std::vector<Reply>& replies,
                                 Replicas replicas) {
    auto& impl = *m_impl;
    // Per node, the commands' indexes in the order they were sent, and the
    // commands themselves, sent in one piece.
    struct Batch {
        Node* node = nullptr;
        std::vector<std::size_t> indexes;
        std::string commands;
        bool waits = false; // a WAIT follows the commands
    };
    std::vector<Batch> batches;
    for (auto i : which) {
        auto* node = &impl.route(commands[i].key);
        auto batch = std::find_if(batches.begin(), batches.end(),
                                  [&](const auto& entry) { return entry.node == node; });
        if (batch == batches.end()) batch = batches.insert(batches.end(), Batch{node, {}, {}});
        batch->indexes.push_back(i);
        Impl::format_command(batch->commands, commands[i].arguments);
    }
    for (auto& batch : batches) {
        batch.waits = replicas == Replicas::wait && impl.replicas_checked(*batch.node);
        if (batch.waits) Impl::format_command(batch.commands, replica_wait());
        impl.append_formatted(*batch.node, batch.commands);
    }
    // A node lost part way leaves the others' replies unread: retrying()
    // closes every connection before the next attempt, so none is read as
    // the answer to a later command.
    for (auto& batch : batches) {
        for (auto i : batch.indexes)
            replies[i] = impl.read(*batch.node);
        if (batch.waits) impl.await_replica(*batch.node, impl.read(*batch.node));
    }
}

// Transactions hold writes that set values (HSET, DEL, HDEL): applying one
// twice leaves what applying it once does, so a lost one is sent again.
void RedisRouter::transact(const std::vector<RoutedCommand>& commands) {
    m_impl->retrying(Retry::safe, [&] {
        transact_once(commands);
        return 0;
    });
}

void RedisRouter::transact_once(const std::vector<RoutedCommand>& commands) {
    auto& impl = *m_impl;
    if (commands.empty()) return;
    // Groups of commands that may share one MULTI/EXEC.
    std::map<std::uint16_t, std::vector<const RoutedCommand*>> groups;
    for (const auto& command : commands)
        groups[impl.clustered ? key_slot(command.key) : std::uint16_t{0}].push_back(&command);
    auto deadline = std::chrono::steady_clock::now() + k_cluster_patience;
    for (const auto& [slot, group] : groups) {
        while (true) {
            auto& node = impl.route(group.front()->key);
            bool waits = impl.replicas_checked(node);
            impl.append(node, {"MULTI"});
            for (const auto* command : group)
                impl.append(node, command->arguments);
            impl.append(node, {"EXEC"});
            // A commit (a checkpoint, a batch's confirmation) lost in a
            // failover would have the next run take over claims whose
            // records are already out: on a replica before it returns.
            if (waits) impl.append(node, replica_wait());
            auto opened = impl.read(node);
            bool moved = redirect_of(opened.get()).has_value();
            for (std::size_t i = 0; i < group.size(); ++i) {
                auto queued = impl.read(node);
                moved =
                    moved || redirect_of(queued.get()) || error_starts(queued.get(), "TRYAGAIN");
            }
            auto done = impl.read(node);
            if (waits) impl.await_replica(node, impl.read(node));
            // A restarted node still reading its data answers LOADING to
            // MULTI: nothing of this group ran; waited out as settle() does.
            if (error_starts(opened.get(), "LOADING"))
                throw Unreachable{text_of(opened.get()), true};
            // A slot that moved before EXEC: nothing of it ran; send it
            // again where the slot lives now.
            if (moved && std::chrono::steady_clock::now() < deadline) {
                std::this_thread::sleep_for(std::chrono::milliseconds(50));
                if (!impl.refresh_map()) impl.fail("cannot read the cluster's slot map");
                continue;
            }
            if (!done || done->type == REDIS_REPLY_ERROR || done->type == REDIS_REPLY_NIL)
                impl.fail(fmt::format("a transaction failed: {}",
                                      done ? text_of(done.get()) : "no reply"));
            for (std::size_t i = 0; i < done->elements; ++i)
                if (done->element[i]->type == REDIS_REPLY_ERROR)
                    impl.fail(text_of(done->element[i]));
            break;
        }
    }
}

std::string RedisRouter::load_script(const std::string& source) {
    return m_impl->retrying(Retry::safe, [&] { return load_script_once(source); });
}

std::string RedisRouter::load_script_once(const std::string& source) {
    auto& impl = *m_impl;
    std::string sha;
    std::string why;
    // A master that cannot be reached now (a failover under way) gets the
    // script when a command meets NOSCRIPT there.
    for (auto* node : impl.masters) {
        if (!impl.connect(*node, why)) continue;
        auto reply = impl.send_one(*node, {"SCRIPT", "LOAD", source});
        // Still reading its data back after a restart: waited out like an
        // unreachable node (retrying() backs off up to --store-timeout).
        if (reply && error_starts(reply.get(), "LOADING"))
            throw Unreachable{text_of(reply.get()), false};
        if (!reply || reply->type != REDIS_REPLY_STRING)
            impl.fail(fmt::format("cannot load a script on {}: {}", node->name(),
                                  reply ? text_of(reply.get()) : "no reply"));
        sha = text_of(reply.get());
    }
    if (sha.empty()) impl.fail(fmt::format("cannot load a script on any master: {}", why));
    impl.scripts[sha] = source;
    return sha;
}

std::size_t RedisRouter::masters() const {
    return m_impl->masters.size();
}

Reply RedisRouter::command_on_master(std::size_t master, const Arguments& arguments) {
    auto& impl = *m_impl;
    return impl.retrying(Retry::safe, [&] {
        auto& node = impl.connected(*impl.masters.at(master));
        auto reply = impl.send_one(node, arguments);
        if (!reply || reply->type == REDIS_REPLY_ERROR)
            impl.fail(reply ? text_of(reply.get()) : "no reply");
        return reply;
    });
}

} // namespace idem::store::detail
