#pragma once
// Internal to the Redis store: one interface over a single Redis node or a
// Redis Cluster (docs/stores.md). Debian's hiredis has no cluster client, so
// the routing is here: the slot map from CLUSTER SLOTS, each key's slot
// (CRC16 of its hash tag), pipelines split per node and their replies put
// back in order, MOVED (the map is read again) and ASK (ASKING, once)
// followed, NOSCRIPT answered by loading the script on that node. A command
// whose node answered a redirect was not executed, so sending it again is
// safe; a connection lost after commands were sent is a StoreError, never a
// guess at what ran.

#include <hiredis/hiredis.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace idem::store::detail {

// The Redis Cluster slot of a key: CRC16 (XMODEM) of the part between the
// first '{' and the next '}' when that part is not empty, else of the whole
// key, modulo 16384.
[[nodiscard]] std::uint16_t key_slot(std::string_view key);

// Whether a reply is an error whose text starts with `prefix`
// ("WRONGTYPE", "LOADING").
[[nodiscard]] bool error_starts(const redisReply* reply, std::string_view prefix);

struct RedisEndpoint {
    std::string host;
    int port = 6379;
};

// A password and an optional ACL user, for every connection to every node.
// Set once by the CLI from the environment (the library reads none).
struct RedisCredentials {
    std::string user;
    std::string password;
};
void set_redis_credentials(RedisCredentials credentials);

struct ReplyDeleter {
    void operator()(redisReply* reply) const { freeReplyObject(reply); }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

// One owner for a connection to one node: freed when it goes.
struct ContextDeleter {
    void operator()(redisContext* context) const { redisFree(context); }
};
using Connection = std::unique_ptr<redisContext, ContextDeleter>;
using Arguments = std::vector<std::string>;

// A command and the key that decides its node ("": any node).
struct RoutedCommand {
    Arguments arguments;
    std::string key;
};

// Whether commands lost with a connection may be sent again: safe for
// reads and for writes that applied twice leave what once does (idem's
// claim scripts know their own claim); never for a claim that would count
// itself twice.
enum class Retry { safe, never };

// What an error reply does to a pipeline, beyond those the router answers
// itself (a redirect, NOSCRIPT, TRYAGAIN, LOADING): ends it with a
// StoreError, or is handed back as that command's reply for the caller to
// read (a key of another type than the command expects).
enum class ErrorReplies { fail, returned };

// Whether a pipeline's writes must reach a replica before it returns. A
// master acknowledges a write before its replicas have it; killed then, the
// replica that takes over never had it. A claim lost that way was already
// acted on (its record written out), and claimed again after the failover
// it would be written out twice. With `wait`, each master the pipeline wrote
// to that has replicas is asked `WAIT 1` before the replies are handed back,
// again while it answers 0 (k_replica_wait_tries), and the pipeline fails
// when no replica ever acknowledged; a master that dies before answering
// loses the connection, and the pipeline is sent again where it moved.
enum class Replicas { ignore, wait };

// How long one WAIT waits for a replica's acknowledgement, and how many
// are sent while none came (a replica catching up, a failover): past them
// the batch fails (exit 4), unwritten, rather than count a write no
// replica holds.
inline constexpr int k_replica_wait_ms = 250;
inline constexpr int k_replica_wait_tries = 20;

// How long a store may stay unreachable before an operation fails
// (--store-timeout); connections are retried with backoff until then.
void set_store_timeout(std::chrono::microseconds timeout);

class RedisRouter {
public:
    // Connects to the first seed that answers and finds out whether it is a
    // cluster. `name` is how messages name the store. Throws StoreError.
    RedisRouter(std::vector<RedisEndpoint> seeds, int database, std::string name);
    ~RedisRouter();
    RedisRouter(const RedisRouter&) = delete;
    RedisRouter& operator=(const RedisRouter&) = delete;

    [[nodiscard]] bool clustered() const;

    // One command, routed by `key`. An error reply other than a redirect
    // throws StoreError.
    Reply command(const Arguments& arguments, std::string_view key = {}, Retry retry = Retry::safe);

    // Many commands: one round trip per node, replies in the commands' order.
    std::vector<Reply> pipeline(const std::vector<RoutedCommand>& commands,
                                Retry retry = Retry::safe, ErrorReplies errors = ErrorReplies::fail,
                                Replicas replicas = Replicas::ignore);

    // Applies `commands` in MULTI/EXEC: one transaction on a single node;
    // on a cluster one per slot (a transaction cannot span slots), each
    // retried whole if its slot moved before it ran, and each waited on
    // (WAIT 1) until a replica has it where the master has replicas.
    void transact(const std::vector<RoutedCommand>& commands);

    // Loads a Lua script wherever it will run; EVALSHA of it then succeeds
    // on any node (NOSCRIPT is answered by loading it there).
    std::string load_script(const std::string& source);

    // The masters, to visit every key (SCAN) on each.
    [[nodiscard]] std::size_t masters() const;
    Reply command_on_master(std::size_t master, const Arguments& arguments);

private:
    void discover();
    std::vector<Reply> pipeline_once(const std::vector<RoutedCommand>& commands,
                                     ErrorReplies errors, Replicas replicas);
    void send_pipelined(const std::vector<RoutedCommand>& commands,
                        const std::vector<std::size_t>& which, std::vector<Reply>& replies,
                        Replicas replicas);
    void transact_once(const std::vector<RoutedCommand>& commands);
    std::string load_script_once(const std::string& source);

    struct Impl;
    std::unique_ptr<Impl> m_impl;
};

} // namespace idem::store::detail
