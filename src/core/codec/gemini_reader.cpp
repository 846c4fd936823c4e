// The Gemini response reader (see gemini_wire.h).
#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "core/codec/gemini_json.h"
#include "core/codec/gemini_wire.h"
#include "core/json/envelope.h"

namespace llmgw {

namespace rj = rapidjson;
using gemini::sv;

namespace {

std::string valid(std::string_view s) { return is_valid_utf8(s) ? std::string(s) : to_valid_utf8(s); }

FinishReason map_finish(std::string_view r, bool calls) {
    if (r == "STOP") return calls ? FinishReason::ToolCalls : FinishReason::Stop;
    if (r == "MAX_TOKENS") return FinishReason::Length;
    if (r == "SAFETY" || r == "RECITATION" || r == "BLOCKLIST" || r == "PROHIBITED_CONTENT" || r == "SPII" ||
            r == "IMAGE_SAFETY" || r == "LANGUAGE")
        return FinishReason::ContentFilter;
    return FinishReason::Stop;   // MALFORMED_FUNCTION_CALL, OTHER, unknown
}

std::int64_t sat_add(std::int64_t a, std::int64_t b) { return a > INT64_MAX - b ? INT64_MAX : a + b; }

UsageIR read_usage(const rj::Value& doc) {
    UsageIR u;
    auto m = doc.FindMember("usageMetadata");
    if (m == doc.MemberEnd() || !m->value.IsObject()) return u;
    const rj::Value& um = m->value;
    // A count there but not a count (negative, 10.7, 1e30, 2^63, a string)
    // makes the usage malformed (null is absent).
    auto count = [&](const char* name) -> std::int64_t {
        auto c = um.FindMember(name);
        if (c == um.MemberEnd() || c->value.IsNull()) return -1;
        const std::int64_t n = json::count(&c->value);
        u.present = true;
        if (n < 0) u.malformed = true;
        return n;
    };
    const std::int64_t prompt = count("promptTokenCount"), cands = count("candidatesTokenCount"),
                       thoughts = count("thoughtsTokenCount"), cached = count("cachedContentTokenCount"),
                       tool_prompt = count("toolUsePromptTokenCount");
    auto z = [](std::int64_t n) { return n < 0 ? 0 : n; };
    u.prompt = sat_add(z(prompt), z(tool_prompt));
    u.completion = sat_add(z(cands), z(thoughts));
    u.cache_read = z(cached);
    u.reasoning = z(thoughts);
    return u;
}

struct Piece {
    enum class Kind { Text, Reasoning, Call } kind;
    std::string text;
    ToolCallIR call;
};

// One GenerateContentResponse, checked.
struct Resp {
    std::string id;
    std::vector<Piece> pieces;
    bool has_candidate = false;
    bool has_finish = false;
    std::string finish;
    bool blocked = false;   // no candidates; promptFeedback.blockReason
    bool calls = false;
    UsageIR usage;
};

// false + err when doc is not a well-formed answer. Calls without an id are
// numbered from next_call ("call_<n>").
bool read_resp(const rj::Value& doc, std::size_t next_call, Resp& r, std::string& err) {
    if (!doc.IsObject()) return err = "the answer is not a JSON object", false;
    auto id = doc.FindMember("responseId");
    if (id != doc.MemberEnd() && !id->value.IsNull()) {
        if (!id->value.IsString()) return err = "responseId is not a string", false;
        r.id = valid(sv(id->value));
    }
    r.usage = read_usage(doc);
    auto cands = doc.FindMember("candidates");
    if (cands != doc.MemberEnd() && !cands->value.IsNull() && !cands->value.IsArray())
        return err = "candidates is not an array", false;
    if (cands != doc.MemberEnd() && cands->value.IsArray() && !cands->value.Empty()) {
        const rj::Value& c = cands->value[0];
        if (!c.IsObject()) return err = "candidates[0] is not an object", false;
        r.has_candidate = true;
        auto fr = c.FindMember("finishReason");
        if (fr != c.MemberEnd() && !fr->value.IsNull()) {
            if (!fr->value.IsString()) return err = "finishReason is not a string", false;
            r.has_finish = true;
            r.finish.assign(sv(fr->value));
        }
        auto content = c.FindMember("content");
        if (content == c.MemberEnd() || content->value.IsNull()) return true;
        if (!content->value.IsObject()) return err = "candidates[0].content is not an object", false;
        auto parts = content->value.FindMember("parts");
        if (parts == content->value.MemberEnd() || parts->value.IsNull()) return true;
        if (!parts->value.IsArray()) return err = "content.parts is not an array", false;
        for (const rj::Value& p : parts->value.GetArray()) {
            if (!p.IsObject()) return err = "a part is not an object", false;
            auto text = p.FindMember("text");
            auto thought = p.FindMember("thought");
            auto fc = p.FindMember("functionCall");
            const bool is_thought = thought != p.MemberEnd() && thought->value.IsBool() && thought->value.GetBool();
            if (thought != p.MemberEnd() && !thought->value.IsBool() && !thought->value.IsNull())
                return err = "a part's thought is not a boolean", false;
            if (text != p.MemberEnd() && !text->value.IsNull()) {
                if (!text->value.IsString()) return err = "a part's text is not a string", false;
                if (text->value.GetStringLength() > 0)
                    r.pieces.push_back(Piece{is_thought ? Piece::Kind::Reasoning : Piece::Kind::Text,
                            valid(sv(text->value)), {}});
            }
            if (fc != p.MemberEnd() && !fc->value.IsNull()) {
                const rj::Value& f = fc->value;
                if (!f.IsObject()) return err = "a functionCall is not an object", false;
                auto name = f.FindMember("name");
                if (name == f.MemberEnd() || !name->value.IsString())
                    return err = "a functionCall has no name", false;
                auto args = f.FindMember("args");
                if (args != f.MemberEnd() && !args->value.IsNull() && !args->value.IsObject())
                    return err = "a functionCall's args is not an object", false;
                auto fid = f.FindMember("id");
                if (fid != f.MemberEnd() && !fid->value.IsNull() && !fid->value.IsString())
                    return err = "a functionCall's id is not a string", false;
                Piece pc{Piece::Kind::Call, {}, {}};
                if (fid != f.MemberEnd() && fid->value.IsString() && fid->value.GetStringLength() > 0)
                    pc.call.id = valid(sv(fid->value));
                else
                    pc.call.id = "call_" + std::to_string(next_call);
                ++next_call;
                pc.call.name = valid(sv(name->value));
                pc.call.arguments = args != f.MemberEnd() && args->value.IsObject() ? gemini::to_json(args->value)
                                                                                      : std::string("{}");
                r.pieces.push_back(std::move(pc));
                r.calls = true;
            }
        }
        return true;
    }
    auto pf = doc.FindMember("promptFeedback");
    if (pf != doc.MemberEnd() && pf->value.IsObject()) {
        auto br = pf->value.FindMember("blockReason");
        if (br != pf->value.MemberEnd() && br->value.IsString()) r.blocked = true;
    }
    return true;
}

class GeminiReader final : public ResponseReader {
public:
    bool whole(std::string_view body, ChatResponseIR& out, std::string& err) override {
        out = ChatResponseIR();
        const rj::Document* dp = gemini::parse_json_scratch(body);
        if (dp == nullptr) return err = "the answer is not JSON", false;
        const rj::Document& doc = *dp;
        Resp r;
        if (!read_resp(doc, 0, r, err)) return false;
        if (!r.has_candidate && !r.blocked) return err = "the answer has no candidates", false;
        out.id = std::move(r.id);
        out.usage = r.usage;
        if (r.blocked) {
            out.finish = FinishReason::ContentFilter;
            return true;
        }
        for (Piece& p : r.pieces) {
            if (p.kind == Piece::Kind::Text) out.text += p.text;
            else if (p.kind == Piece::Kind::Reasoning) out.reasoning += p.text;
            else out.tool_calls.push_back(std::move(p.call));
        }
        if (r.has_finish) out.finish = map_finish(r.finish, r.calls);
        return true;
    }

    ReadStep event(const SseEvent& ev, std::vector<StreamEventIR>& out, std::string& err) override {
        std::string_view data = ev.data;
        while (!data.empty() && (data.front() == ' ' || data.front() == '\t' || data.front() == '\r' ||
                                  data.front() == '\n'))
            data.remove_prefix(1);
        if (data.empty()) return ReadStep::More;   // no data (a comment): nothing to read
        const rj::Document* dp = gemini::parse_json_scratch(data);
        if (dp == nullptr) return err = "a stream event is not JSON", ReadStep::Invalid;
        const rj::Document& doc = *dp;
        if (!doc.IsObject()) return err = "a stream event is not a JSON object", ReadStep::Invalid;
        auto e = doc.FindMember("error");
        if (e != doc.MemberEnd() && !e->value.IsNull()) {
            StreamEventIR x;
            x.kind = StreamEventIR::Kind::Error;
            x.text = valid(upstream_error_text(data));
            if (e->value.IsObject()) {
                auto st = e->value.FindMember("status");
                if (st != e->value.MemberEnd() && st->value.IsString()) {
                    std::string t = valid(scrub_secrets(sv(st->value)));
                    if (t.size() <= 64) x.error_type = std::move(t);
                }
            }
            out.push_back(std::move(x));
            return ReadStep::Failed;
        }
        Resp r;
        if (!read_resp(doc, tools_, r, err)) return ReadStep::Invalid;
        if (!started_) {
            StreamEventIR s;
            s.kind = StreamEventIR::Kind::Start;
            s.id = r.id;
            out.push_back(std::move(s));
            started_ = true;
        }
        for (Piece& p : r.pieces) {
            StreamEventIR x;
            if (p.kind != Piece::Kind::Call) {
                x.kind = p.kind == Piece::Kind::Text ? StreamEventIR::Kind::Text : StreamEventIR::Kind::Reasoning;
                x.text = std::move(p.text);
                out.push_back(std::move(x));
                continue;
            }
            x.kind = StreamEventIR::Kind::ToolStart;
            x.index = tools_;
            x.id = std::move(p.call.id);
            x.name = std::move(p.call.name);
            out.push_back(std::move(x));
            StreamEventIR a;
            a.kind = StreamEventIR::Kind::ToolArgs;
            a.index = tools_++;
            a.text = std::move(p.call.arguments);
            out.push_back(std::move(a));
            saw_call_ = true;
        }
        if (r.usage.present) {
            StreamEventIR u;
            u.kind = StreamEventIR::Kind::Usage;
            u.usage = r.usage;
            out.push_back(std::move(u));
        }
        if (r.has_finish || r.blocked) {
            StreamEventIR f;
            f.kind = StreamEventIR::Kind::Finish;
            f.finish = r.blocked ? FinishReason::ContentFilter : map_finish(r.finish, saw_call_);
            out.push_back(std::move(f));
            finished_ = true;
        }
        return ReadStep::More;
    }

    bool complete() const override { return finished_; }

private:
    bool started_ = false;
    bool finished_ = false;
    bool saw_call_ = false;
    std::size_t tools_ = 0;
};

}  // namespace

std::unique_ptr<ResponseReader> make_gemini_reader() { return make_or_null<GeminiReader>(); }

}  // namespace llmgw
