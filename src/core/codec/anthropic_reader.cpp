// Anthropic Messages API answers -> IR: a whole message object, or the SSE
// events of a stream (message_start, content_block_start/delta/stop,
// message_delta, message_stop, ping, error). Usage: prompt = input_tokens +
// cache_creation_input_tokens + cache_read_input_tokens; completion =
// output_tokens (thinking included, as Anthropic counts it).
#include <exception>
#include <unordered_map>
#include <vector>

#include <rapidjson/document.h>

#include "core/json/read.h"

#include "core/codec/anthropic_wire.h"
#include "core/codec/json_copy.h"

namespace llmgw {
namespace {

namespace rj = rapidjson;

constexpr int kMaxDepth = 256;
constexpr std::size_t kMaxBlocks = 4096;

using json::count;
using json::get;
using json::get_str;
using json::sv;

// Parses into this thread's scratch document (valid until the next parse).
const rj::Document* parse(std::string_view s, std::string& err) { return parse_scratch_bounded(s, kMaxDepth, err); }

std::int64_t sat_add(std::int64_t a, std::int64_t b) { return a > INT64_MAX - b ? INT64_MAX : a + b; }

// Reads the counts present in a usage object into the running totals;
// fields absent (or null) keep their value (message_delta carries only
// some). A field whose latest value is not a count (negative, 10.7, 1e30,
// 2^63, a string) makes the usage malformed until a count replaces it.
struct UsageCounts {
    enum Field { kInput, kOutput, kCacheCreation, kCacheRead, kFields };
    std::int64_t input = -1, output = -1, cache_creation = -1, cache_read = -1;
    bool bad[kFields] = {};

    void merge(const rj::Value& u) {
        if (!u.IsObject()) return;
        auto take = [&](const char* n, std::int64_t& into, Field f) {
            const rj::Value* field = get(u, n);
            if (field == nullptr) return;
            const std::int64_t v = count(field);
            bad[f] = v < 0;
            if (v >= 0) into = v;
        };
        take("input_tokens", input, kInput);
        take("output_tokens", output, kOutput);
        take("cache_creation_input_tokens", cache_creation, kCacheCreation);
        take("cache_read_input_tokens", cache_read, kCacheRead);
    }
    bool malformed() const { return bad[kInput] || bad[kOutput] || bad[kCacheCreation] || bad[kCacheRead]; }
    bool any() const { return input >= 0 || output >= 0 || cache_creation >= 0 || cache_read >= 0 || malformed(); }
    UsageIR ir() const {
        UsageIR u;
        u.present = any();
        u.malformed = malformed();
        u.cache_creation = cache_creation < 0 ? 0 : cache_creation;
        u.cache_read = cache_read < 0 ? 0 : cache_read;
        u.prompt = sat_add(sat_add(input < 0 ? 0 : input, u.cache_creation), u.cache_read);
        u.completion = output < 0 ? 0 : output;
        return u;
    }
};

FinishReason finish_of(std::string_view s, bool& known) {
    known = true;
    if (s == "end_turn" || s == "pause_turn") return FinishReason::Stop;
    if (s == "stop_sequence") return FinishReason::StopSequence;
    if (s == "max_tokens" || s == "model_context_window_exceeded") return FinishReason::Length;
    if (s == "tool_use") return FinishReason::ToolCalls;
    if (s == "refusal") return FinishReason::ContentFilter;
    known = false;
    return FinishReason::Stop;
}

class AnthropicReader final : public ResponseReader {
public:
    bool complete() const override { return done_; }

private:
    bool whole(std::string_view body, ChatResponseIR& out, std::string& err) override {
        const rj::Document* dp = parse(body, err);
        if (dp == nullptr) return false;
        const rj::Document& d = *dp;
        const rj::Value* type = get_str(d, "type");
        const rj::Value* content = get(d, "content");
        if (type == nullptr || sv(*type) != "message" || content == nullptr || !content->IsArray()) {
            err = "not a Messages API message object";
            return false;
        }
        if (const rj::Value* id = get_str(d, "id")) out.id.assign(sv(*id));
        for (auto& b : content->GetArray()) {
            const rj::Value* bt = get_str(b, "type");
            if (bt == nullptr) {
                err = "a content block has no type";
                return false;
            }
            std::string_view t = sv(*bt);
            if (t == "text") {
                const rj::Value* x = get_str(b, "text");
                if (x == nullptr) {
                    err = "a text block has no text";
                    return false;
                }
                out.text.append(sv(*x));
            } else if (t == "thinking") {
                if (const rj::Value* x = get_str(b, "thinking")) out.reasoning.append(sv(*x));
            } else if (t == "tool_use") {
                const rj::Value* id = get_str(b, "id");
                const rj::Value* name = get_str(b, "name");
                if (id == nullptr || name == nullptr) {
                    err = "a tool_use block lacks its id or name";
                    return false;
                }
                ToolCallIR tc;
                tc.id.assign(sv(*id));
                tc.name.assign(sv(*name));
                const rj::Value* input = get(b, "input");
                tc.arguments = input != nullptr && input->IsObject() ? json_compact(*input) : "{}";
                out.tool_calls.push_back(std::move(tc));
            }
            // redacted_thinking, server tool blocks, citations: not carried
        }
        if (const rj::Value* s = get_str(d, "stop_reason")) {
            bool known;
            out.finish = finish_of(sv(*s), known);
        }
        if (const rj::Value* s = get_str(d, "stop_sequence")) out.stop_sequence.assign(sv(*s));
        if (const rj::Value* u = get(d, "usage")) {
            UsageCounts c;
            c.merge(*u);
            out.usage = c.ir();
        }
        return true;
    }

    ReadStep invalid(std::string& err, std::string why) {
        err = std::move(why);
        return ReadStep::Invalid;
    }

    ReadStep event(const SseEvent& ev, std::vector<StreamEventIR>& out, std::string& err) override {
        if (ev.data.empty()) return ReadStep::More;
        const rj::Document* dp = parse(ev.data, err);
        if (dp == nullptr) return ReadStep::Invalid;
        const rj::Document& d = *dp;
        const rj::Value* type = get_str(d, "type");
        std::string_view t = type != nullptr ? sv(*type) : std::string_view();
        if (!ev.event.empty()) {
            if (type != nullptr && t != ev.event) return invalid(err, "the event name and the data type disagree");
            t = ev.event;
        }
        if (t.empty()) return invalid(err, "an event without a type");
        if (t == "ping") return ReadStep::More;
        if (t == "error") {
            StreamEventIR x;
            x.kind = StreamEventIR::Kind::Error;
            const rj::Value* e = get(d, "error");
            const rj::Value* m = e != nullptr ? get_str(*e, "message") : nullptr;
            const rj::Value* et = e != nullptr ? get_str(*e, "type") : nullptr;
            x.text = m != nullptr ? scrub_secrets(sv(*m).substr(0, 300)) : "the upstream provider reported an error";
            x.error_type = et != nullptr && et->GetStringLength() <= 64 ? std::string(sv(*et)) : "api_error";
            out.push_back(std::move(x));
            return ReadStep::Failed;
        }
        if (t == "message_start") {
            const rj::Value* m = get(d, "message");
            if (m == nullptr || !m->IsObject()) return invalid(err, "message_start without a message");
            if (started_) return ReadStep::More;
            started_ = true;
            StreamEventIR s;
            s.kind = StreamEventIR::Kind::Start;
            if (const rj::Value* id = get_str(*m, "id")) s.id.assign(sv(*id));
            out.push_back(std::move(s));
            if (const rj::Value* u = get(*m, "usage")) usage(*u, out);
            return ReadStep::More;
        }
        if (t == "content_block_start") {
            const rj::Value* idx = get(d, "index");
            const rj::Value* b = get(d, "content_block");
            const rj::Value* bt = b != nullptr ? get_str(*b, "type") : nullptr;
            if (idx == nullptr || !idx->IsUint64() || bt == nullptr)
                return invalid(err, "content_block_start without an index or a block type");
            if (blocks_.size() >= kMaxBlocks) return invalid(err, "too many content blocks");
            const std::uint64_t index = idx->GetUint64();
            std::string_view btype = sv(*bt);
            if (btype == "tool_use") {
                const rj::Value* id = get_str(*b, "id");
                const rj::Value* name = get_str(*b, "name");
                if (id == nullptr || name == nullptr) return invalid(err, "a tool_use block lacks its id or name");
                const std::size_t tool = tools_++;
                blocks_[index] = Block{Block::Tool, tool};
                StreamEventIR s;
                s.kind = StreamEventIR::Kind::ToolStart;
                s.index = tool;
                s.id.assign(sv(*id));
                s.name.assign(sv(*name));
                out.push_back(std::move(s));
                const rj::Value* input = get(*b, "input");
                if (input != nullptr && input->IsObject() && input->MemberCount() > 0) {
                    StreamEventIR a;
                    a.kind = StreamEventIR::Kind::ToolArgs;
                    a.index = tool;
                    a.text = json_compact(*input);
                    out.push_back(std::move(a));
                }
            } else if (btype == "text") {
                blocks_[index] = Block{Block::Text, 0};
                if (const rj::Value* x = get_str(*b, "text"); x != nullptr && x->GetStringLength() > 0) {
                    StreamEventIR e;
                    e.kind = StreamEventIR::Kind::Text;
                    e.text.assign(sv(*x));
                    out.push_back(std::move(e));
                }
            } else if (btype == "thinking") {
                blocks_[index] = Block{Block::Thinking, 0};
            } else {
                blocks_[index] = Block{Block::Other, 0};
            }
            return ReadStep::More;
        }
        if (t == "content_block_delta") {
            const rj::Value* idx = get(d, "index");
            const rj::Value* delta = get(d, "delta");
            const rj::Value* dt = delta != nullptr ? get_str(*delta, "type") : nullptr;
            if (idx == nullptr || !idx->IsUint64() || dt == nullptr)
                return invalid(err, "content_block_delta without an index or a delta type");
            auto it = blocks_.find(idx->GetUint64());
            if (it == blocks_.end()) return invalid(err, "a delta for a content block that never started");
            std::string_view k = sv(*dt);
            auto piece = [&](const char* field, StreamEventIR::Kind kind) -> ReadStep {
                const rj::Value* x = get_str(*delta, field);
                if (x == nullptr) return invalid(err, std::string(k) + " without " + field);
                if (x->GetStringLength() == 0) return ReadStep::More;
                StreamEventIR e;
                e.kind = kind;
                e.index = it->second.tool;
                e.text.assign(sv(*x));
                out.push_back(std::move(e));
                return ReadStep::More;
            };
            if (k == "text_delta") return piece("text", StreamEventIR::Kind::Text);
            if (k == "thinking_delta") return piece("thinking", StreamEventIR::Kind::Reasoning);
            if (k == "input_json_delta") {
                if (it->second.kind != Block::Tool) return invalid(err, "input_json_delta for a block that is not tool_use");
                return piece("partial_json", StreamEventIR::Kind::ToolArgs);
            }
            return ReadStep::More;   // signature_delta, citations_delta, ...
        }
        if (t == "content_block_stop") return ReadStep::More;
        if (t == "message_delta") {
            const rj::Value* delta = get(d, "delta");
            if (delta != nullptr && delta->IsObject()) {
                if (const rj::Value* s = get_str(*delta, "stop_reason")) {
                    bool known;
                    StreamEventIR f;
                    f.kind = StreamEventIR::Kind::Finish;
                    f.finish = finish_of(sv(*s), known);
                    if (const rj::Value* q = get_str(*delta, "stop_sequence")) f.stop_sequence.assign(sv(*q));
                    out.push_back(std::move(f));
                }
            }
            if (const rj::Value* u = get(d, "usage")) usage(*u, out);
            return ReadStep::More;
        }
        if (t == "message_stop") {
            done_ = true;
            return ReadStep::Done;
        }
        return ReadStep::More;   // an event type added after this was written
    }

    void usage(const rj::Value& u, std::vector<StreamEventIR>& out) {
        counts_.merge(u);
        if (!counts_.any()) return;
        StreamEventIR e;
        e.kind = StreamEventIR::Kind::Usage;
        e.usage = counts_.ir();
        out.push_back(std::move(e));
    }

    struct Block {
        enum Kind { Text, Tool, Thinking, Other } kind;
        std::size_t tool;   // Tool: its index among the tool calls
    };

    bool started_ = false, done_ = false;
    std::unordered_map<std::uint64_t, Block> blocks_;
    std::size_t tools_ = 0;
    UsageCounts counts_;
};

}  // namespace

std::unique_ptr<ResponseReader> make_anthropic_reader() { return make_or_null<AnthropicReader>(); }

}  // namespace llmgw
