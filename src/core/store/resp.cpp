// RESP2 codec: replies through hiredis's reader, commands written here.
// hiredis calls our object functions while it parses; they build RespValue
// trees and refuse what the store must never send us (long or nested
// arrays, beyond what the reader's RespShape allows).
#include "core/store/resp.h"

#include <hiredis/read.h>

#include <charconv>
#include <cstring>
#include <new>
#include <utility>

namespace llmgw {

namespace {

// What the object functions see (redisReader.privdata, copied into every
// task): the reason they refused a reply.
struct CallbackState {
    std::string cb_error;
    RespShape shape;
    std::size_t elements = 0;   // in the reply being read
};

}  // namespace

struct RespReader::Impl {
    redisReader* r = nullptr;
    std::size_t max_buffer = kRespDefaultMaxBuffer;
    CallbackState cbs;
    std::string dead;       // non-empty: the reader is dead, this is why

    ~Impl() {
        if (r != nullptr) redisReaderFree(r);
    }
};

namespace {

CallbackState* state_of(const redisReadTask* t) { return static_cast<CallbackState*>(t->privdata); }

void refuse(const redisReadTask* t, const char* msg) {
    CallbackState* im = state_of(t);
    if (im == nullptr) return;
    try {
        im->cb_error = msg;
    } catch (...) {
    }
}

// Where the value of this task goes: a new root, or its slot in the parent
// array (owned by the parent; hiredis frees only roots).
RespValue* place(const redisReadTask* t) {
    if (t->parent == nullptr) return new (std::nothrow) RespValue();
    auto* parent = static_cast<RespValue*>(t->parent->obj);
    if (parent == nullptr || t->idx < 0 || static_cast<std::size_t>(t->idx) >= parent->elements.size()) {
        refuse(t, "invalid store reply: array element out of place");
        return nullptr;
    }
    return &parent->elements[static_cast<std::size_t>(t->idx)];
}

void* create_string(const redisReadTask* t, char* s, size_t len) {
    RespValue::Type type;
    switch (t->type) {
    case REDIS_REPLY_STRING:
        // hiredis skips the two bytes after a bulk string without looking.
        if (s[len] != '\r' || s[len + 1] != '\n') {
            refuse(t, "invalid store reply: bulk string not followed by CRLF");
            return nullptr;
        }
        type = RespValue::Type::String;
        break;
    case REDIS_REPLY_STATUS:
        type = RespValue::Type::Status;
        break;
    case REDIS_REPLY_ERROR:
        type = RespValue::Type::Error;
        break;
    default:
        refuse(t, "invalid store reply: unexpected string type");
        return nullptr;
    }
    std::string text;
    try {
        text.assign(s, len);
    } catch (...) {
        return nullptr;
    }
    RespValue* v = place(t);
    if (v == nullptr) return nullptr;
    v->type = type;
    v->str = std::move(text);
    return v;
}

void* create_array(const redisReadTask* t, int n) {
    CallbackState* im = state_of(t);
    const RespShape shape = im != nullptr ? im->shape : RespShape();
    int depth = 0;
    for (const redisReadTask* p = t->parent; p != nullptr; p = p->parent) ++depth;
    if (depth >= shape.max_depth) {
        refuse(t, "nested array in store reply");
        return nullptr;
    }
    if (n < 0 || static_cast<std::size_t>(n) > shape.max_array) {
        if (im != nullptr) {
            try {
                im->cb_error = "store reply array too long (" + std::to_string(n) + " > " +
                               std::to_string(shape.max_array) + ")";
            } catch (...) {
            }
        }
        return nullptr;
    }
    if (im != nullptr) {
        if (t->parent == nullptr) im->elements = 0;
        im->elements += static_cast<std::size_t>(n);
        if (im->elements > shape.max_elements) {
            refuse(t, "store reply has too many elements");
            return nullptr;
        }
    }
    RespValue* v = place(t);
    if (v == nullptr) return nullptr;
    v->type = RespValue::Type::Array;
    try {
        v->elements.resize(static_cast<std::size_t>(n));
    } catch (...) {
        delete v;  // a root: nothing else points to it yet
        return nullptr;
    }
    return v;
}

void* create_integer(const redisReadTask* t, long long value) {
    RespValue* v = place(t);
    if (v == nullptr) return nullptr;
    v->type = RespValue::Type::Integer;
    v->integer = value;
    return v;
}

void* create_nil(const redisReadTask* t) {
    RespValue* v = place(t);
    if (v == nullptr) return nullptr;
    v->type = RespValue::Type::Nil;
    return v;
}

// Called by hiredis for roots only (redisReader.reply).
void free_object(void* p) { delete static_cast<RespValue*>(p); }

redisReplyObjectFunctions g_functions = {create_string, create_array, create_integer, create_nil, free_object};

}  // namespace

RespReader::RespReader(std::size_t max_buffer, RespShape shape) {
    impl_.reset(new (std::nothrow) Impl());
    if (!impl_) return;
    impl_->max_buffer = max_buffer;
    impl_->cbs.shape = shape;
    impl_->r = redisReaderCreateWithFunctions(&g_functions);
    if (impl_->r == nullptr) {
        impl_->dead = "out of memory for the store reply reader";
        return;
    }
    impl_->r->privdata = &impl_->cbs;
}

RespReader::~RespReader() = default;
RespReader::RespReader(RespReader&&) noexcept = default;
RespReader& RespReader::operator=(RespReader&&) noexcept = default;

bool RespReader::feed(const char* data, std::size_t len) {
    if (!impl_ || !impl_->dead.empty() || impl_->r == nullptr) return false;
    try {
        redisReader* r = impl_->r;
        const std::size_t pending = r->len - r->pos;
        if (len > impl_->max_buffer || pending > impl_->max_buffer - len) {
            impl_->dead = "store reply too large (more than " + std::to_string(impl_->max_buffer) +
                          " bytes buffered)";
            return false;
        }
        if (len == 0) return true;
        if (redisReaderFeed(r, data, len) != REDIS_OK) {
            impl_->dead = std::string("invalid store reply: ") + r->errstr;
            return false;
        }
        return true;
    } catch (...) {
        if (impl_->dead.empty()) impl_->dead = "out of memory reading a store reply";
        return false;
    }
}

RespReader::Result RespReader::next(RespValue& out, std::string& err) {
    try {
        if (!impl_) {
            err = "store reply reader is not usable";
            return Result::Error;
        }
        if (!impl_->dead.empty()) {
            err = impl_->dead;
            return Result::Error;
        }
        void* reply = nullptr;
        if (redisReaderGetReply(impl_->r, &reply) != REDIS_OK) {
            if (!impl_->cbs.cb_error.empty()) {
                impl_->dead = impl_->cbs.cb_error;
            } else {
                impl_->dead = std::string("invalid store reply: ") + impl_->r->errstr;
            }
            err = impl_->dead;
            return Result::Error;
        }
        if (reply == nullptr) return Result::NeedMore;
        RespValue* v = static_cast<RespValue*>(reply);
        out = std::move(*v);
        delete v;
        return Result::Reply;
    } catch (...) {
        if (impl_ && impl_->dead.empty()) impl_->dead = "out of memory reading a store reply";
        try {
            err = "out of memory reading a store reply";
        } catch (...) {
        }
        return Result::Error;
    }
}

namespace {

// Decimal digits of n.
std::size_t digits(std::size_t n) {
    std::size_t d = 1;
    while (n >= 10) {
        n /= 10;
        ++d;
    }
    return d;
}

// Writes "<marker><n>\r\n" at p (digits(n) + 3 bytes), returns the end.
// The digits are written here from the count already taken: std::to_chars
// would count them again, about 7,000 instructions per Redis request.
char* put_length_line(char* p, char marker, std::size_t n) {
    *p++ = marker;
    const std::size_t d = digits(n);
    for (std::size_t i = d; i > 0; --i) {
        p[i - 1] = static_cast<char>('0' + n % 10);
        n /= 10;
    }
    p += d;
    *p++ = '\r';
    *p++ = '\n';
    return p;
}

// Writes a bulk string at p ("$<n>\r\n", the bytes, "\r\n"; digits(n) + n
// + 5 bytes), returns the end. data is never null.
char* put_bulk(char* p, const char* data, std::size_t n) {
    p = put_length_line(p, '$', n);
    std::memcpy(p, data, n);
    p += n;
    *p++ = '\r';
    *p++ = '\n';
    return p;
}

}  // namespace

bool append_resp_command(std::string& out, const std::vector<std::string>& argv) {
    if (argv.empty()) return false;
    // The exact size first, then one resize and plain stores: a command
    // carries up to a few hundred arguments (the accounting script's keys).
    std::size_t need = digits(argv.size()) + 3;
    for (const std::string& a : argv) need += digits(a.size()) + 3 + a.size() + 2;
    const std::size_t mark = out.size();
    try {
        out.resize(mark + need);
    } catch (...) {
        return false;   // out unchanged
    }
    char* p = &out[mark];
    p = put_length_line(p, '*', argv.size());
    for (const std::string& a : argv) p = put_bulk(p, a.data(), a.size());
    return true;
}

void RespWriter::command(std::size_t nargs) {
    char line[24];
    out_.append(line, static_cast<std::size_t>(put_length_line(line, '*', nargs) - line));
}

void RespWriter::arg(std::string_view bytes) {
    // A short argument (a key, a number, a field) goes in with one append.
    char buf[160];
    if (bytes.size() <= sizeof buf - 24) {
        const char* data = bytes.empty() ? "" : bytes.data();   // a default view's data is null
        out_.append(buf, static_cast<std::size_t>(put_bulk(buf, data, bytes.size()) - buf));
        return;
    }
    out_.append(buf, static_cast<std::size_t>(put_length_line(buf, '$', bytes.size()) - buf));
    out_.append(bytes.data(), bytes.size());
    out_.append("\r\n", 2);
}

char* RespWriter::arg_space(std::size_t n) {
    char buf[32];
    out_.append(buf, static_cast<std::size_t>(put_length_line(buf, '$', n) - buf));
    const std::size_t at = out_.size();
    out_.resize(at + n + 2);
    out_[at + n] = '\r';
    out_[at + n + 1] = '\n';
    return &out_[at];
}

void RespWriter::arg(std::int64_t value) {
    char num[24];
    const std::size_t n = static_cast<std::size_t>(std::to_chars(num, num + sizeof num, value).ptr - num);
    char buf[48];
    out_.append(buf, static_cast<std::size_t>(put_bulk(buf, num, n) - buf));
}

std::string resp_command(const std::vector<std::string>& argv) {
    std::string out;
    if (!append_resp_command(out, argv)) return std::string();
    return out;
}

}  // namespace llmgw
