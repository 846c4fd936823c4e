// RESP2 codec for the counter store (no nginx, no sockets): hiredis 0.14's
// reader parses replies into our own tree (RespValue); commands are written
// here (an array of bulk strings needs no more than lengths and bytes, and
// hiredis's formatter spends a printf on every argument, about a third of a
// worker's instructions per request on Redis). The connection is nginx's.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace llmgw {

struct RespValue {
    enum class Type { Nil, Integer, String, Status, Error, Array };
    Type type = Type::Nil;
    long long integer = 0;              // Integer
    std::string str;                    // String, Status, Error
    std::vector<RespValue> elements;    // Array (nested only where a RespShape allows it)
};

// Largest reply array accepted from the store (spec "Limits").
constexpr std::size_t kRespMaxArray = 1024;
// Default ceiling on bytes buffered and not yet parsed: a reply that does not
// fit (e.g. "$999999999" or a status line without its CRLF) is a store error.
constexpr std::size_t kRespDefaultMaxBuffer = 8u << 20;

// The shape of the replies a reader accepts: arrays nested at most
// max_depth deep (1: none inside another), each of at most max_array
// elements, at most max_elements in one reply. The default is what every
// counter command answers; a cluster's topology (CLUSTER SLOTS: ranges,
// their nodes, and since Redis 7 each node's other endpoints, four levels,
// up to one range per slot) needs kRespTopologyShape.
struct RespShape {
    int max_depth = 1;
    std::size_t max_array = kRespMaxArray;
    std::size_t max_elements = kRespMaxArray;
};
constexpr RespShape kRespTopologyShape{4, 16384, 400000};

// Incremental reader: feed() bytes as they arrive, then call next() until it
// says NeedMore. Replies come out in order.
//
// Store errors, after which the reader is dead (every later next() repeats
// the error, every later feed() returns false; the connection must be
// closed, the stream is never parsed on):
//   - a protocol error (garbage bytes, a bad length, a bulk string not
//     followed by CRLF),
//   - an array longer than kRespMaxArray elements ("store reply array too
//     long (2000 > 1024)"), detected on its header before any element,
//   - an array inside an array ("nested array in store reply"), including
//     an empty one; a nil array ("*-1") inside an array is a Nil element
//     (with a RespShape that allows nesting: an array deeper than its
//     max_depth, or a reply of more than max_elements elements),
//   - more than max_buffer bytes waiting for one reply.
// A nil bulk string ("$-1") and a nil array ("*-1") both give Type::Nil.
// No exception escapes.
class RespReader {
public:
    enum class Result { Reply, NeedMore, Error };

    explicit RespReader(std::size_t max_buffer = kRespDefaultMaxBuffer, RespShape shape = RespShape());
    ~RespReader();
    RespReader(RespReader&&) noexcept;
    RespReader& operator=(RespReader&&) noexcept;
    RespReader(const RespReader&) = delete;
    RespReader& operator=(const RespReader&) = delete;

    // false when the reader is dead or the bytes push it over max_buffer;
    // next() then returns Error with the reason.
    bool feed(const char* data, std::size_t len);
    // Reply: out holds the next reply (err untouched). NeedMore: no whole
    // reply buffered yet. Error: err says why (see above).
    Result next(RespValue& out, std::string& err);

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// One command in RESP2 (an array of bulk strings), binary safe, appended to
// out. false (out unchanged) when argv is empty or memory ran out.
bool append_resp_command(std::string& out, const std::vector<std::string>& argv);
// The same as a string of its own; "" when argv is empty or memory ran out.
std::string resp_command(const std::vector<std::string>& argv);

// Writes a command straight into out, with no argument list in between
// (the admission and accounting commands, built per request): command(n),
// then exactly n arguments, each bytes or an integer in decimal. Appending
// may throw std::bad_alloc; the caller then drops what was written.
class RespWriter {
public:
    explicit RespWriter(std::string& out) : out_(out) {}
    void command(std::size_t nargs);
    void arg(std::string_view bytes);
    void arg(std::int64_t value);
    // An argument of n bytes the caller writes at the pointer returned
    // (valid until the next call on this writer).
    char* arg_space(std::size_t n);

private:
    std::string& out_;
};

}  // namespace llmgw
