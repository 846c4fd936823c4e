// JSON-RPC 2.0 messages of the federated /mcp endpoint.
#include "core/mcp/jsonrpc.h"

#include <vector>

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "core/codec/codec_impl.h"
#include "core/codec/sse.h"
#include "core/json/text_checks.h"
#include "core/json/writer.h"

namespace llmgw {
namespace {

// Invalid UTF-8 is refused; so is anything but whitespace after the document.
// Iterative: a deep document never deepens the parser's stack. Not full
// precision: RapidJSON 1.1's full-precision number path reads past a table
// for some numbers of hundreds of digits (found by fuzz/fuzz_mcp.cpp).
constexpr unsigned kParseFlags =
    rapidjson::kParseValidateEncodingFlag | rapidjson::kParseIterativeFlag;
// Documents are written back (to_json recurses): deeper ones are refused.
constexpr int kMaxDepth = 64;
constexpr std::size_t kMaxIdBytes = 256;

std::string to_json(const rapidjson::Value& v) {
    rapidjson::StringBuffer buf;
    rapidjson::Writer<rapidjson::StringBuffer> w(buf);
    v.Accept(w);
    return std::string(buf.GetString(), buf.GetSize());
}

bool parse_doc(std::string_view text, rapidjson::Document& doc) {
    if (!json_text_depth_at_most(text, kMaxDepth)) return false;
    doc.Parse<kParseFlags>(text.data(), text.size());
    return !doc.HasParseError();
}

// A valid id: a string or an integer (JSON-RPC allows numbers; fractions are
// discouraged and refused here, as is null for a request).
bool valid_id(const rapidjson::Value& id) {
    if (id.IsString()) return id.GetStringLength() <= kMaxIdBytes;
    return id.IsInt64() || id.IsUint64();
}

std::string string_member(const rapidjson::Value& obj, const char* name) {
    if (!obj.IsObject()) return {};
    auto it = obj.FindMember(name);
    if (it == obj.MemberEnd() || !it->value.IsString()) return {};
    return std::string(it->value.GetString(), it->value.GetStringLength());
}

}  // namespace

RpcMessage parse_rpc(std::string_view body) {
    RpcMessage m;
    rapidjson::Document doc;
    if (!json_text_depth_at_most(body, kMaxDepth)) {
        m.error_code = kRpcInvalidRequest;
        m.error = "Invalid Request: the message nests deeper than 64 levels";
        return m;
    }
    doc.Parse<kParseFlags>(body.data(), body.size());
    if (doc.HasParseError()) {
        m.error_code = kRpcParseError;
        m.error = std::string("Parse error: ") + rapidjson::GetParseError_En(doc.GetParseError());
        return m;
    }
    m.error_code = kRpcInvalidRequest;
    if (doc.IsArray()) {
        m.error = "Invalid Request: batches are not supported";
        return m;
    }
    if (!doc.IsObject()) {
        m.error = "Invalid Request: the message must be a JSON object";
        return m;
    }
    auto ver = doc.FindMember("jsonrpc");
    if (ver == doc.MemberEnd() || !ver->value.IsString() || std::string_view(ver->value.GetString()) != "2.0") {
        m.error = "Invalid Request: jsonrpc must be \"2.0\"";
        return m;
    }
    auto id = doc.FindMember("id");
    const bool has_id = id != doc.MemberEnd();
    if (has_id && valid_id(id->value)) m.id = to_json(id->value);
    auto method = doc.FindMember("method");
    if (method == doc.MemberEnd()) {
        // A response to a request of the server's: the gateway sends none,
        // so there is nothing to match it with; it is accepted and dropped.
        if (has_id && (doc.HasMember("result") || doc.HasMember("error"))) {
            m.kind = RpcMessage::Kind::Response;
            m.error_code = 0;
            return m;
        }
        m.error = "Invalid Request: method is required";
        return m;
    }
    if (!method->value.IsString() || method->value.GetStringLength() == 0) {
        m.error = "Invalid Request: method must be a non-empty string";
        return m;
    }
    if (has_id && !valid_id(id->value)) {
        m.id = "null";
        m.error = "Invalid Request: id must be a string or an integer";
        return m;
    }
    m.method.assign(method->value.GetString(), method->value.GetStringLength());
    auto params = doc.FindMember("params");
    if (params != doc.MemberEnd()) {
        if (!params->value.IsObject()) {
            m.error = "Invalid Request: params must be an object";
            return m;
        }
        m.params = to_json(params->value);
        m.protocol_version = string_member(params->value, "protocolVersion");
        if (m.method == "tools/call" || m.method == "prompts/get") m.route_key = string_member(params->value, "name");
        if (m.method == "resources/read") m.route_key = string_member(params->value, "uri");
        if (m.method == "completion/complete") {
            auto ref = params->value.FindMember("ref");
            if (ref != params->value.MemberEnd() && ref->value.IsObject()) {
                m.ref_type = string_member(ref->value, "type");
                m.route_key = string_member(ref->value, m.ref_type == "ref/resource" ? "uri" : "name");
            }
        }
    }
    m.error_code = 0;
    m.kind = has_id ? RpcMessage::Kind::Request : RpcMessage::Kind::Notification;
    return m;
}

std::string rpc_result(std::string_view id, std::string_view result_json) {
    std::string out = "{\"jsonrpc\":\"2.0\",\"id\":";
    out.append(id).append(",\"result\":").append(result_json).append("}");
    return out;
}

std::string rpc_error(std::string_view id, int code, std::string_view message) {
    JsonWriter w;
    w.begin_object().field("code", static_cast<std::int64_t>(code)).field("message", message).end_object();
    std::string out = "{\"jsonrpc\":\"2.0\",\"id\":";
    out.append(id).append(",\"error\":").append(w.take()).append("}");
    return out;
}

std::string rpc_request(std::string_view id, std::string_view method, std::string_view params_json) {
    JsonWriter w;
    w.begin_object().field("jsonrpc", "2.0").key("id").raw(id).field("method", method);
    w.key("params").raw(params_json.empty() ? std::string_view("{}") : params_json);
    w.end_object();
    return w.take();
}

std::string rpc_notification(std::string_view method) {
    JsonWriter w;
    w.begin_object().field("jsonrpc", "2.0").field("method", method).end_object();
    return w.take();
}

std::string with_name(std::string_view params_json, std::string_view name, bool in_ref) {
    rapidjson::Document doc;
    if (!parse_doc(params_json, doc) || !doc.IsObject()) return {};
    rapidjson::Value* obj = &doc;
    if (in_ref) {
        auto ref = doc.FindMember("ref");
        if (ref == doc.MemberEnd() || !ref->value.IsObject()) return {};
        obj = &ref->value;
    }
    rapidjson::Value v(name.data(), static_cast<rapidjson::SizeType>(name.size()), doc.GetAllocator());
    auto it = obj->FindMember("name");
    if (it != obj->MemberEnd()) {
        it->value = v;
    } else {
        obj->AddMember("name", v, doc.GetAllocator());
    }
    return to_json(doc);
}

namespace {

// The same id: both strings with the same characters (however escaped),
// or both integers of the same value. The string "7" is not the number 7.
bool same_id(const rapidjson::Value& got, const rapidjson::Value& want) {
    if (!valid_id(got) || !valid_id(want)) return false;
    if (got.IsString() || want.IsString()) {
        return got.IsString() && want.IsString() &&
               std::string_view(got.GetString(), got.GetStringLength()) ==
                   std::string_view(want.GetString(), want.GetStringLength());
    }
    if (got.IsInt64() && want.IsInt64()) return got.GetInt64() == want.GetInt64();
    return got.IsUint64() && want.IsUint64() && got.GetUint64() == want.GetUint64();
}

// One JSON-RPC message of a backend: a response to want sets out.
bool read_message(std::string_view text, const rapidjson::Value& want, BackendReply& out) {
    rapidjson::Document doc;
    if (!parse_doc(text, doc) || !doc.IsObject()) {
        out.why = "the reply is not a JSON-RPC message";
        return false;
    }
    if (doc.HasMember("method")) return false;   // a request or notification of the server
    auto id = doc.FindMember("id");
    if (id == doc.MemberEnd() || !same_id(id->value, want)) {
        out.why = "the reply answers another request";
        return false;
    }
    auto res = doc.FindMember("result");
    if (res != doc.MemberEnd() && res->value.IsObject()) {
        out.kind = BackendReply::Kind::Result;
        out.json = to_json(res->value);
        return true;
    }
    auto err = doc.FindMember("error");
    if (err != doc.MemberEnd() && err->value.IsObject()) {
        out.kind = BackendReply::Kind::Error;
        out.json = to_json(err->value);
        return true;
    }
    out.why = "the reply has neither result nor error";
    return true;   // the answer to our request, and a failure
}

}  // namespace

BackendReply read_backend_reply(std::string_view content_type, std::string_view body, std::string_view want_id) {
    BackendReply out;
    rapidjson::Document want;   // the request's id, typed (a string or an integer)
    if (!parse_doc(want_id, want) || !valid_id(want)) {
        out.why = "the request has no valid id to match";
        return out;
    }
    if (is_media_type(content_type, "text/event-stream")) {
        SseParser parser;
        std::vector<SseEvent> events;
        if (!parser.feed(body, events)) {
            out.why = "an SSE event of the reply is too large";
            return out;
        }
        if (parser.has_partial()) parser.feed("\n\n", events);   // a last event without its blank line
        for (const SseEvent& ev : events) {
            if (ev.data.empty() || (!ev.event.empty() && ev.event != "message")) continue;
            if (read_message(ev.data, want, out)) return out;
        }
        if (out.why.empty()) out.why = "the SSE stream carried no response";
        return out;
    }
    if (!is_media_type(content_type, "application/json")) {
        out.why = "the reply is neither application/json nor text/event-stream";
        return out;
    }
    if (!read_message(body, want, out) && out.why.empty()) out.why = "the reply is not a response";
    return out;
}

namespace {
constexpr std::string_view kProtocols[] = {"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"};
}

bool known_protocol(std::string_view version) {
    for (std::string_view v : kProtocols) {
        if (v == version) return true;
    }
    return false;
}

std::string_view negotiate_protocol(std::string_view asked) {
    for (std::string_view v : kProtocols) {
        if (v == asked) return v;
    }
    return kDefaultProtocol;
}

}  // namespace llmgw
