#include "core/codec/openai.h"
#include "core/codec/chat_ir.h"
#include "core/codec/json_counts.h"
#include "core/http/ascii.h"
#include "core/json/text_checks.h"

#include <cstdint>
#include <cstring>
#include <exception>

#include <rapidjson/document.h>
#include <rapidjson/encodedstream.h>
#include <rapidjson/memorystream.h>
#include <rapidjson/reader.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

namespace llmgw {

namespace rj = rapidjson;

namespace {

// ---------------------------------------------------------------- requests

// Deeper bodies are refused: rewrite() serializes recursively (Accept), and
// the recursive parser would otherwise be a stack overflow waiting for a
// body of a million '['s. Real requests (JSON schemas included) nest far less.
constexpr int kMaxRequestDepth = 256;

// Full precision (parse_full_precision): numbers are re-serialized upstream
// and must keep their value.

std::size_t count_members(const rj::Value& obj, const char* name) {
    const std::size_t len = std::strlen(name);
    std::size_t n = 0;
    for (auto m = obj.MemberBegin(); m != obj.MemberEnd(); ++m) {
        if (m->name.GetStringLength() == len && std::memcmp(m->name.GetString(), name, len) == 0) ++n;
    }
    return n;
}

bool name_is(const rj::Value& name, std::string_view s) {
    return std::string_view(name.GetString(), name.GetStringLength()) == s;
}

// StringBuffer rather than appending to a std::string: the writer reserves
// once per string and then stores bytes unchecked, which is faster (big
// base64 images) than the final copy costs.
using StringWriter = rj::Writer<rj::StringBuffer>;

// The request's document lives as long as the request (every attempt's
// rewrite reads it), so its pool is sized to the body instead of rapidjson's
// 64 KiB first chunk: about the body's size holds its values and copied
// strings (a body denser in values takes more chunks of the same size).
// Chunks come from the one shared malloc wrapper, not one allocated per
// document.
std::size_t doc_chunk_for(std::size_t body_size) {
    constexpr std::size_t kMin = 256, kMax = 64 * 1024;   // rapidjson's own chunk size
    const std::size_t n = body_size + body_size / 2 + kMin;
    return n < kMax ? n : kMax;
}

rj::CrtAllocator* shared_crt() {
    static rj::CrtAllocator crt;   // stateless: malloc and free
    return &crt;
}

class RequestDocImpl final : public RequestDoc {
public:
    explicit RequestDocImpl(std::size_t body_bytes) : pool(doc_chunk_for(body_bytes), shared_crt()), doc(&pool) {}

    rj::MemoryPoolAllocator<> pool;   // before doc: doc's values live in it
    rj::Document doc;
    RequestInfo inf;
    std::size_t body_size = 0;

    const RequestInfo& info() const override { return inf; }

    std::string rewrite(std::string_view upstream_model, bool force_stream_usage) const override {
        try {
            rj::StringBuffer sb(nullptr, body_size + upstream_model.size() + 64);
            StringWriter w(sb);
            write(w, upstream_model, force_stream_usage && inf.stream);
            return std::string(sb.GetString(), sb.GetSize());
        } catch (const std::exception&) {
            return std::string();
        }
    }

private:
    void write(StringWriter& w, std::string_view model, bool force_usage) const {
        bool wrote_options = false;
        w.StartObject();
        for (auto m = doc.MemberBegin(); m != doc.MemberEnd(); ++m) {
            w.Key(m->name.GetString(), m->name.GetStringLength());
            if (name_is(m->name, "model")) {
                w.String(model.data(), static_cast<rj::SizeType>(model.size()));
            } else if (force_usage && name_is(m->name, "stream_options")) {
                write_stream_options(w, m->value);
                wrote_options = true;
            } else {
                m->value.Accept(w);
            }
        }
        if (force_usage && !wrote_options) {
            w.Key("stream_options");
            write_stream_options(w, rj::Value());
        }
        w.EndObject();
    }

    // stream_options with include_usage true, other members kept.
    static void write_stream_options(StringWriter& w, const rj::Value& opts) {
        w.StartObject();
        if (opts.IsObject()) {
            for (auto m = opts.MemberBegin(); m != opts.MemberEnd(); ++m) {
                if (name_is(m->name, "include_usage")) continue;
                w.Key(m->name.GetString(), m->name.GetStringLength());
                m->value.Accept(w);
            }
        }
        w.Key("include_usage");
        w.Bool(true);
        w.EndObject();
    }
};

// RequestInfo::max_output (a reservation's worst case, docs/metering.md).
std::int64_t max_output_of(const rj::Document& doc) {
    std::int64_t most = 0;
    for (const char* name : {"max_tokens", "max_completion_tokens", "max_output_tokens"}) {
        auto m = doc.FindMember(name);
        if (m != doc.MemberEnd() && m->value.IsInt64() && m->value.GetInt64() > most) most = m->value.GetInt64();
    }
    auto n = doc.FindMember("n");
    if (most > 0 && n != doc.MemberEnd() && n->value.IsInt64() && n->value.GetInt64() > 1 && n->value.GetInt64() <= 128 &&
        most <= INT64_MAX / 128) {
        most *= n->value.GetInt64();
    }
    return most;
}

const char* check_request(const rj::Document& doc, RequestInfo& inf) {
    if (!doc.IsObject()) return "request body must be a JSON object";
    // Duplicates would let the gateway and the upstream read different values.
    if (count_members(doc, "model") > 1) return "request body has more than one \"model\" member";
    if (count_members(doc, "stream") > 1) return "request body has more than one \"stream\" member";
    if (count_members(doc, "stream_options") > 1) return "request body has more than one \"stream_options\" member";

    auto model = doc.FindMember("model");
    if (model == doc.MemberEnd()) return "model is required";
    if (!model->value.IsString() || model->value.GetStringLength() == 0) return "model must be a non-empty string";
    inf.model.assign(model->value.GetString(), model->value.GetStringLength());

    auto stream = doc.FindMember("stream");
    if (stream != doc.MemberEnd() && !stream->value.IsNull()) {  // null: the default, as OpenAI reads it
        if (!stream->value.IsBool()) return "stream must be a boolean";
        inf.stream = stream->value.GetBool();
    }

    auto opts = doc.FindMember("stream_options");
    if (opts != doc.MemberEnd() && opts->value.IsObject()) {
        if (count_members(opts->value, "include_usage") > 1)
            return "stream_options has more than one \"include_usage\" member";
        auto iu = opts->value.FindMember("include_usage");
        inf.client_wants_usage = iu != opts->value.MemberEnd() && iu->value.IsTrue();
    }
    inf.max_output = max_output_of(doc);
    auto temp = doc.FindMember("temperature");
    if (temp != doc.MemberEnd() && temp->value.IsNumber()) inf.temperature = temp->value.GetDouble();
    return nullptr;
}

// ---------------------------------------------------------------- responses

// SAX scan of a response or stream chunk: only the root members "usage",
// "choices" and "error" are looked at and nothing is stored (embeddings
// responses are megabytes of floats; no DOM is built for them).
struct TopScan : CountHandler<TopScan> {
    enum Member { kOtherMember, kUsage, kChoices, kError };
    enum Field { kOtherField, kPrompt, kCompletion };
    enum Kind { kNull, kScalar, kObject, kArray };

    int depth = 0;
    bool root_object = false;
    Member member = kOtherMember;  // key of the current root member
    Field field = kOtherField;     // key of the current usage member
    bool in_usage = false, in_choices = false;
    bool error = false, usage_object = false, choices_array = false, choices_empty = false;
    std::int64_t prompt = -1, completion = -1;  // -1: absent or not a count
    bool malformed = false;                     // a count member's value is not a count
    // Inside "choices": the last key named completion text (content,
    // reasoning_content, refusal, arguments), and the bytes of such strings.
    bool text_key = false;
    std::int64_t text_bytes = 0;

    void on_value(Kind k) {
        if (depth == 0) {
            root_object = k == kObject;
        } else if (depth == 1 && root_object) {
            if (member == kError && k != kNull) error = true;
            if (member == kUsage) {
                usage_object = in_usage = k == kObject;
                prompt = completion = -1;
                malformed = false;
            }
            if (member == kChoices) {
                choices_array = in_choices = k == kArray;
                choices_empty = true;
            }
        } else if (depth == 2 && in_choices) {
            choices_empty = false;
        }
    }

    // At the value of prompt_tokens or completion_tokens of the usage object.
    bool at_count() const { return depth == 2 && in_usage && field != kOtherField; }

    bool Default() {   // true, false
        if (at_count()) malformed = true;
        on_value(kScalar);
        text_key = false;
        return true;
    }
    bool String(const char*, rj::SizeType len, bool) {
        if (at_count()) malformed = true;
        on_value(kScalar);
        if (in_choices && text_key) text_bytes += static_cast<std::int64_t>(len);
        text_key = false;
        return true;
    }
    bool Null() {
        on_value(kNull);
        return true;
    }
    // A number; v is -1 unless it is a non-negative integer.
    bool number(std::int64_t v) {
        on_value(kScalar);
        if (!at_count()) return true;
        if (v < 0) {
            malformed = true;
        } else {
            (field == kPrompt ? prompt : completion) = v;
        }
        return true;
    }
    bool Key(const char* s, rj::SizeType len, bool) {
        const std::string_view k(s, len);
        if (depth == 1 && root_object) {
            member = k == "usage" ? kUsage : k == "choices" ? kChoices : k == "error" ? kError : kOtherMember;
        } else if (depth == 2 && in_usage) {
            field = k == "prompt_tokens" ? kPrompt : k == "completion_tokens" ? kCompletion : kOtherField;
        }
        text_key = in_choices && (k == "content" || k == "reasoning_content" || k == "refusal" || k == "arguments");
        return true;
    }
    bool StartObject() {
        if (at_count()) malformed = true;
        on_value(kObject);
        text_key = false;
        ++depth;
        return true;
    }
    bool StartArray() {
        if (at_count()) malformed = true;
        on_value(kArray);
        text_key = false;
        ++depth;
        return true;
    }
    bool end_container() {
        if (--depth == 1) in_usage = in_choices = false;
        return true;
    }
    bool EndObject(rj::SizeType) { return end_container(); }
    bool EndArray(rj::SizeType) { return end_container(); }

    void fill(Usage& u) const {
        u = Usage();
        if (!usage_object) return;
        u.present = prompt >= 0 || completion >= 0 || malformed;
        u.malformed = malformed;
        u.prompt_tokens = prompt >= 0 ? prompt : 0;
        u.completion_tokens = completion >= 0 ? completion : 0;
    }
};

// Iterative: no recursion, whatever the upstream sends.
bool scan(std::string_view s, TopScan& h) {
    rj::MemoryStream ms(s.data(), s.size());
    rj::EncodedInputStream<rj::UTF8<>, rj::MemoryStream> is(ms);
    rj::Reader reader;
    return !reader.Parse<rj::kParseIterativeFlag>(is, h).IsError();
}

std::string_view trim(std::string_view s) {
    const char* ws = " \t\r\n";
    const std::size_t b = s.find_first_not_of(ws);
    if (b == std::string_view::npos) return {};
    return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

// ---------------------------------------------------------------- scrubbing

inline bool is_alnum(char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
inline bool is_key_char(char c) { return is_alnum(c) || c == '_' || c == '-'; }
inline bool is_param_char(char c) { return is_alnum(c) || c == '_' || c == '-' || c == '.'; }
inline bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v'; }
// End of a bearer token or of a query parameter value.
inline bool is_token_end(char c) {
    return is_space(c) || c == '\0' || std::strchr("\"'`,;<>()[]{}\\&#", c) != nullptr;
}
inline bool is_authority_end(char c) {
    return is_space(c) || c == '\0' || std::strchr("/?#\"'`<>\\", c) != nullptr;
}

// Parameter names whose values are credentials: key, api_key, apiKey,
// x-goog-api-key, access_token, client_secret, password, sig (Azure SAS)...
bool sensitive_param(std::string_view name) {
    for (const char* s : {"key", "token", "secret", "password", "passwd", "sig", "signature"})
        if (ascii_iends_with(name, s)) return true;
    return false;
}

// End of a secret-looking token starting at i, or i when there is none there.
std::size_t secret_token_end(std::string_view t, std::size_t i) {
    const std::size_t n = t.size();
    if (i > 0 && is_alnum(t[i - 1])) return i;
    std::size_t prefix = 0, min_rest = 0;
    if (t.compare(i, 3, "sk-") == 0) prefix = 3, min_rest = 6;              // OpenAI, Anthropic (sk-ant-...)
    else if (t.compare(i, 4, "AIza") == 0) prefix = 4, min_rest = 30;       // Google API keys
    else return i;
    std::size_t e = i + prefix;
    while (e < n && is_key_char(t[e])) ++e;
    return e - (i + prefix) >= min_rest ? e : i;
}

}  // namespace

// ---------------------------------------------------------------- public

std::unique_ptr<RequestDoc> RequestDoc::parse(std::string_view body, std::string& err) {
    try {
        if (!json_text_depth_at_most(body, kMaxRequestDepth)) {
            err = "request body is nested too deeply";
            return nullptr;
        }
        auto r = std::make_unique<RequestDocImpl>(body.size());
        if (!parse_full_precision<rj::kParseDefaultFlags>(r->doc, body)) {
            err = json_numbers_representable(body)
                      ? "request body is not valid JSON"
                      : "request body has a number out of the range of a double (a non-zero below 1e-326 or above "
                        "1.7976931348623157e308 (the largest double), or a zero written beyond 1e-22 or 1e22, or "
                        "significant digits beginning 18446744073709551615 then 5 to 9)";
            return nullptr;
        }
        if (const char* e = check_request(r->doc, r->inf)) {
            err = e;
            return nullptr;
        }
        r->body_size = body.size();
        return r;
    } catch (const std::exception&) {
        try {
            err = "request body cannot be processed";
        } catch (...) {
        }
        return nullptr;
    }
}

// TopScan's handlers never stop the parse: it fails exactly when the body is
// not valid JSON, as is_json_document's would.
bool read_whole_response(std::string_view json_body, Usage& usage) {
    usage = Usage();
    TopScan h;
    if (!scan(json_body, h)) return false;
    if (h.root_object) h.fill(usage);
    return true;
}

ChunkKind inspect_stream_chunk(std::string_view data, Usage& usage, std::int64_t* text_bytes) {
    usage = Usage();
    if (text_bytes != nullptr) *text_bytes = 0;
    const std::string_view t = trim(data);
    if (t == "[DONE]") return ChunkKind::Done;
    TopScan h;
    if (!scan(t, h) || !h.root_object) return ChunkKind::Other;
    if (h.error) return ChunkKind::Error;
    h.fill(usage);
    if (text_bytes != nullptr) *text_bytes = h.text_bytes;
    if (h.choices_array && h.choices_empty && h.usage_object) return ChunkKind::UsageOnly;
    return ChunkKind::Data;
}

std::string upstream_error_text(std::string_view body) {
    constexpr std::size_t kMax = 300;
    try {
        rj::Document doc;
        doc.Parse<rj::kParseIterativeFlag>(body.data(), body.size());
        std::string_view msg;
        if (!doc.HasParseError() && doc.IsObject()) {
            auto e = doc.FindMember("error");
            const rj::Value* m = nullptr;
            if (e != doc.MemberEnd()) {
                if (e->value.IsString()) {
                    m = &e->value;  // {"error": "..."}
                } else if (e->value.IsObject()) {
                    auto mm = e->value.FindMember("message");
                    if (mm != e->value.MemberEnd()) m = &mm->value;
                }
            } else {
                auto mm = doc.FindMember("message");  // {"object":"error","message":"..."} (vLLM)
                if (mm != doc.MemberEnd()) m = &mm->value;
            }
            if (m && m->IsString()) msg = std::string_view(m->GetString(), m->GetStringLength());
        }
        if (trim(msg).empty()) return "upstream error without a message";

        std::string s = scrub_secrets(msg);  // before truncating: no half secrets
        for (char& c : s)
            if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
        if (s.size() > kMax) {
            std::size_t cut = kMax;
            while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
            s.resize(cut);
        }
        return s;
    } catch (const std::exception&) {
        return std::string();
    }
}

std::string scrub_secrets(std::string_view t) {
    try {
        std::string out;
        const std::size_t n = t.size();
        std::size_t copied = 0, i = 0;
        // Copies t[copied, keep) and "[redacted]", then skips to skip.
        auto redact = [&](std::size_t keep, std::size_t skip) {
            if (out.empty()) out.reserve(n + 16);
            out.append(t.data() + copied, keep - copied).append("[redacted]");
            copied = i = skip;
        };
        while (i < n) {
            const char c = t[i];
            if ((c == 'B' || c == 'b') && (i == 0 || !is_alnum(t[i - 1])) && ascii_iequals(t.substr(i, 6), "bearer")) {
                std::size_t j = i + 6, e;
                while (j < n && (t[j] == ' ' || t[j] == '\t')) ++j;
                for (e = j; e < n && !is_token_end(t[e]);) ++e;
                if (j > i + 6 && e > j) {
                    redact(j, e);
                    continue;
                }
            } else if (c == 's' || c == 'A') {
                const std::size_t e = secret_token_end(t, i);
                if (e != i) {
                    redact(i, e);
                    continue;
                }
            } else if (c == ':' && t.compare(i, 3, "://") == 0) {
                std::size_t a = i + 3, at = a;
                for (std::size_t e = a; e < n && !is_authority_end(t[e]); ++e)
                    if (t[e] == '@') at = e;
                if (at > a) {
                    redact(a, at);
                    continue;
                }
            }
            if (is_param_char(c) && (i == 0 || !is_param_char(t[i - 1]))) {  // name=value
                std::size_t j = i;
                while (j < n && is_param_char(t[j])) ++j;
                if (j < n && t[j] == '=' && sensitive_param(t.substr(i, j - i))) {
                    std::size_t e = j + 1;
                    while (e < n && !is_token_end(t[e])) ++e;
                    if (e > j + 1) {
                        redact(j + 1, e);
                        continue;
                    }
                }
            }
            ++i;
        }
        if (out.empty()) return std::string(t);  // nothing redacted
        out.append(t.data() + copied, n - copied);
        return out;
    } catch (const std::exception&) {
        return std::string();
    }
}

const rapidjson::Value& request_json(const RequestDoc& doc) {
    return static_cast<const RequestDocImpl&>(doc).doc;
}

}  // namespace llmgw
