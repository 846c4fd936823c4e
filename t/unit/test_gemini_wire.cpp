// Gemini translation: the model path, the request, the reader (whole and
// stream) and embeddings, on exact bytes.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <rapidjson/document.h>

#include "core/codec/gemini_embed.h"
#include "core/codec/gemini_wire.h"
#include "core/json/envelope.h"

using namespace llmgw;

namespace {

// Parsed as RequestDoc parses (full precision, no UTF-8 validation).
rapidjson::Document parse(const std::string& json) {
    rapidjson::Document d;
    d.Parse<rapidjson::kParseFullPrecisionFlag>(json.data(), json.size());
    EXPECT_FALSE(d.HasParseError()) << json;
    return d;
}

// The body, or "400: <err>".
std::string translate(const std::string& json) {
    rapidjson::Document d = parse(json);
    std::string body, err;
    if (!gemini_request_from_openai(d, body, err)) {
        EXPECT_TRUE(body.empty());
        return "400: " + err;
    }
    EXPECT_TRUE(is_valid_utf8(body));
    rapidjson::Document check;
    check.Parse(body.data(), body.size());
    EXPECT_FALSE(check.HasParseError()) << body;
    return body;
}

const std::string kHi = R"("messages":[{"role":"user","content":"hi"}])";
const std::string kHiContents = R"({"contents":[{"role":"user","parts":[{"text":"hi"}]}])";

// A request of kHi plus extra members.
std::string with(const std::string& extra) { return translate("{" + kHi + (extra.empty() ? "" : "," + extra) + "}"); }

const char* kind_name(StreamEventIR::Kind k) {
    switch (k) {
    case StreamEventIR::Kind::Start: return "Start";
    case StreamEventIR::Kind::Text: return "Text";
    case StreamEventIR::Kind::Reasoning: return "Reasoning";
    case StreamEventIR::Kind::Refusal: return "Refusal";
    case StreamEventIR::Kind::ToolStart: return "ToolStart";
    case StreamEventIR::Kind::ToolArgs: return "ToolArgs";
    case StreamEventIR::Kind::Finish: return "Finish";
    case StreamEventIR::Kind::Usage: return "Usage";
    case StreamEventIR::Kind::Error: return "Error";
    }
    return "?";
}

const char* finish_name(FinishReason f) {
    switch (f) {
    case FinishReason::None: return "none";
    case FinishReason::Stop: return "stop";
    case FinishReason::StopSequence: return "stop_sequence";
    case FinishReason::Length: return "length";
    case FinishReason::ToolCalls: return "tool_calls";
    case FinishReason::ContentFilter: return "content_filter";
    }
    return "?";
}

std::string usage_str(const UsageIR& u) {
    if (!u.present) return "absent";
    return "p=" + std::to_string(u.prompt) + " c=" + std::to_string(u.completion) + " cache=" +
           std::to_string(u.cache_read) + " r=" + std::to_string(u.reasoning) + (u.malformed ? " malformed" : "");
}

std::string describe(const StreamEventIR& e) {
    std::string s = kind_name(e.kind);
    switch (e.kind) {
    case StreamEventIR::Kind::Start: return s + " id=" + e.id;
    case StreamEventIR::Kind::ToolStart: return s + " " + std::to_string(e.index) + " id=" + e.id + " name=" + e.name;
    case StreamEventIR::Kind::ToolArgs: return s + " " + std::to_string(e.index) + " " + e.text;
    case StreamEventIR::Kind::Finish: return s + " " + finish_name(e.finish);
    case StreamEventIR::Kind::Usage: return s + " " + usage_str(e.usage);
    case StreamEventIR::Kind::Error: return s + " type=" + e.error_type + " " + e.text;
    default: return s + " " + e.text;
    }
}

SseEvent data_event(const std::string& data) {
    SseEvent ev;
    ev.data = data;
    ev.lines.push_back("data: " + data);
    return ev;
}

struct StreamRun {
    std::vector<std::string> events;
    std::vector<ReadStep> steps;
    std::string err;
    bool complete = false;
};

StreamRun stream(const std::vector<std::string>& datas) {
    StreamRun r;
    auto reader = make_gemini_reader();
    std::vector<StreamEventIR> out;
    for (const auto& d : datas) {
        out.clear();
        r.steps.push_back(reader->read_event(data_event(d), out, r.err));
        for (const auto& e : out) {
            EXPECT_TRUE(is_valid_utf8(e.text) && is_valid_utf8(e.id) && is_valid_utf8(e.name));
            r.events.push_back(describe(e));
        }
    }
    r.complete = reader->complete();
    return r;
}

bool whole(const std::string& body, ChatResponseIR& ir, std::string& err) {
    return make_gemini_reader()->read_whole(body, ir, err);
}

}  // namespace

// ---------------------------------------------------------------- model path

TEST(GeminiPath, PlainModel) {
    EXPECT_EQ(gemini_model_path("gemini-2.5-flash", "generateContent"),
            "/v1beta/models/gemini-2.5-flash:generateContent");
    EXPECT_EQ(gemini_model_path("gemini-2.5-flash", "streamGenerateContent?alt=sse"),
            "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse");
    EXPECT_EQ(gemini_model_path("text-embedding-004", "embedContent"), "/v1beta/models/text-embedding-004:embedContent");
    EXPECT_EQ(gemini_model_path("gemini-embedding-001", "batchEmbedContents"),
            "/v1beta/models/gemini-embedding-001:batchEmbedContents");
    EXPECT_EQ(gemini_model_path("A.z_0~9-", "generateContent"), "/v1beta/models/A.z_0~9-:generateContent");
}

TEST(GeminiPath, EncodesEverythingElse) {
    EXPECT_EQ(gemini_model_path("a/b", "generateContent"), "/v1beta/models/a%2Fb:generateContent");
    EXPECT_EQ(gemini_model_path("../../v1/files", "generateContent"),
            "/v1beta/models/..%2F..%2Fv1%2Ffiles:generateContent");
    EXPECT_EQ(gemini_model_path("m?key=x", "generateContent"), "/v1beta/models/m%3Fkey%3Dx:generateContent");
    EXPECT_EQ(gemini_model_path("m#frag", "generateContent"), "/v1beta/models/m%23frag:generateContent");
    EXPECT_EQ(gemini_model_path("100%", "generateContent"), "/v1beta/models/100%25:generateContent");
    EXPECT_EQ(gemini_model_path("a b\tc", "generateContent"), "/v1beta/models/a%20b%09c:generateContent");
    EXPECT_EQ(gemini_model_path("m:x", "generateContent"), "/v1beta/models/m%3Ax:generateContent");
    EXPECT_EQ(gemini_model_path("\xC3\xA9\xFF", "generateContent"), "/v1beta/models/%C3%A9%FF:generateContent");
    EXPECT_EQ(gemini_model_path(std::string("a\0b\r\n", 5), "generateContent"),
            "/v1beta/models/a%00b%0D%0A:generateContent");
    EXPECT_EQ(gemini_model_path("a\\b", "generateContent"), "/v1beta/models/a%5Cb:generateContent");
    EXPECT_EQ(gemini_model_path("...", "generateContent"), "/v1beta/models/...:generateContent");
}

TEST(GeminiPath, Refused) {
    EXPECT_EQ(gemini_model_path("", "generateContent"), "");
    EXPECT_EQ(gemini_model_path(".", "generateContent"), "");
    EXPECT_EQ(gemini_model_path("..", "generateContent"), "");
    EXPECT_EQ(gemini_model_path("m", "countTokens"), "");
    EXPECT_EQ(gemini_model_path("m", ""), "");
}

// ---------------------------------------------------------------- requests

TEST(GeminiRequest, RichRequest) {
    const std::string req = R"({"model":"g","messages":[
 {"role":"system","content":"Be brief."},
 {"role":"developer","content":[{"type":"text","text":"Use tools."}]},
 {"role":"user","content":[{"type":"text","text":"What is in these?"},
    {"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}},
    {"type":"image_url","image_url":{"url":"https://example.com/a/cat.JPG?x=1#f","detail":"high"}}]},
 {"role":"assistant","content":null,"tool_calls":[
    {"id":"call_a","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\",\"days\":2}"}},
    {"id":"call_b","type":"function","function":{"name":"get_time","arguments":"{}"}}]},
 {"role":"tool","tool_call_id":"call_a","content":"{\"temp\":21.5}"},
 {"role":"tool","tool_call_id":"call_b","content":"noon"},
 {"role":"user","content":"Thanks"},
 {"role":"assistant","content":"You're welcome."},
 {"role":"assistant","content":[{"type":"text","text":"Anything else?"}]}],
 "tools":[{"type":"function","function":{"name":"get_weather","description":"Weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]},"strict":true}},
          {"type":"function","function":{"name":"get_time"}}],
 "tool_choice":{"type":"function","function":{"name":"get_weather"}},
 "temperature":0.7,"top_p":1,"max_tokens":100,"max_completion_tokens":200,"stop":["END","STOP"],
 "presence_penalty":0.5,"frequency_penalty":-0.5,"seed":42,
 "response_format":{"type":"json_schema","json_schema":{"name":"x","strict":true,"schema":{"type":"object","properties":{"a":{"type":"integer"}}}}},
 "reasoning_effort":"low","user":"u1","store":false,"metadata":{"a":"b"},"service_tier":"auto","stream":true,
 "stream_options":{"include_usage":true},"parallel_tool_calls":false,"n":1,"logprobs":false,"logit_bias":{},
 "modalities":["text"],"unknown_member":{"x":1}})";
    const std::string want =
        R"({"contents":[)"
        R"({"role":"user","parts":[{"text":"What is in these?"},{"inlineData":{"mimeType":"image/png","data":"iVBORw0KGgo="}},)"
        R"({"fileData":{"mimeType":"image/jpeg","fileUri":"https://example.com/a/cat.JPG?x=1#f"}}]},)"
        R"({"role":"model","parts":[{"functionCall":{"name":"get_weather","args":{"city":"Paris","days":2}},"thoughtSignature":"skip_thought_signature_validator"},)"
        R"({"functionCall":{"name":"get_time","args":{}},"thoughtSignature":"skip_thought_signature_validator"}]},)"
        R"({"role":"user","parts":[{"functionResponse":{"name":"get_weather","response":{"temp":21.5}}},)"
        R"({"functionResponse":{"name":"get_time","response":{"content":"noon"}}},{"text":"Thanks"}]},)"
        R"({"role":"model","parts":[{"text":"You're welcome."},{"text":"Anything else?"}]}],)"
        R"("systemInstruction":{"parts":[{"text":"Be brief."},{"text":"Use tools."}]},)"
        R"("tools":[{"functionDeclarations":[{"name":"get_weather","description":"Weather","parametersJsonSchema":)"
        R"({"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}},{"name":"get_time"}]}],)"
        R"("toolConfig":{"functionCallingConfig":{"mode":"ANY","allowedFunctionNames":["get_weather"]}},)"
        R"("generationConfig":{"temperature":0.7,"topP":1,"maxOutputTokens":200,"stopSequences":["END","STOP"],)"
        R"("presencePenalty":0.5,"frequencyPenalty":-0.5,"seed":42,"responseMimeType":"application/json",)"
        R"("responseJsonSchema":{"type":"object","properties":{"a":{"type":"integer"}}},"thinkingConfig":{"thinkingBudget":1024}}})";
    EXPECT_EQ(translate(req), want);
}

TEST(GeminiRequest, Minimal) {
    EXPECT_EQ(with(""), kHiContents + "}");
    // Ignored members change nothing.
    EXPECT_EQ(with(R"("model":"x","user":"u","store":true,"metadata":{},"service_tier":"flex","stream":false,)"
                   R"("stream_options":null,"parallel_tool_calls":true,"tools":[],"response_format":{"type":"text"},)"
                   R"("temperature":null,"stop":[],"n":null,"logprobs":null,"top_logprobs":null)"),
            kHiContents + "}");
}

TEST(GeminiRequest, ToolChoiceForms) {
    EXPECT_EQ(with(R"("tool_choice":"auto")"), kHiContents + R"(,"toolConfig":{"functionCallingConfig":{"mode":"AUTO"}}})");
    EXPECT_EQ(with(R"("tool_choice":"none")"), kHiContents + R"(,"toolConfig":{"functionCallingConfig":{"mode":"NONE"}}})");
    EXPECT_EQ(with(R"("tool_choice":"required")"), kHiContents + R"(,"toolConfig":{"functionCallingConfig":{"mode":"ANY"}}})");
    EXPECT_EQ(with(R"("tool_choice":{"type":"function","function":{"name":"f"}})"),
            kHiContents + R"(,"toolConfig":{"functionCallingConfig":{"mode":"ANY","allowedFunctionNames":["f"]}}})");
}

TEST(GeminiRequest, GenerationConfigForms) {
    EXPECT_EQ(with(R"("max_tokens":5,"stop":"\n\n")"),
            kHiContents + R"(,"generationConfig":{"maxOutputTokens":5,"stopSequences":["\n\n"]}})");
    EXPECT_EQ(with(R"("response_format":{"type":"json_object"})"),
            kHiContents + R"(,"generationConfig":{"responseMimeType":"application/json"}})");
    EXPECT_EQ(with(R"("response_format":{"type":"json_schema","json_schema":{"name":"n"}})"),
            kHiContents + R"(,"generationConfig":{"responseMimeType":"application/json"}})");
    EXPECT_EQ(with(R"("temperature":0,"top_p":0.25,"seed":-2147483648)"),
            kHiContents + R"(,"generationConfig":{"temperature":0,"topP":0.25,"seed":-2147483648}})");
    const std::pair<const char*, const char*> efforts[] = {
        {"none", "0"}, {"minimal", "0"}, {"low", "1024"}, {"medium", "8192"}, {"high", "24576"}};
    for (const auto& e : efforts) {
        EXPECT_EQ(with(std::string(R"("reasoning_effort":")") + e.first + "\""),
                kHiContents + R"(,"generationConfig":{"thinkingConfig":{"thinkingBudget":)" + e.second + "}}}");
    }
}

TEST(GeminiRequest, ToolResultsAndMerging) {
    // A tool result looked up across turns; array content joined; an
    // assistant's text before its calls; empty text parts dropped.
    const std::string req = R"({"messages":[
 {"role":"user","content":[{"type":"text","text":""},{"type":"text","text":"go"}]},
 {"role":"user","content":"again"},
 {"role":"assistant","content":"Calling.","tool_calls":[{"id":"x1","type":"function","function":{"name":"f","arguments":" {\"a\":[1,{\"b\":null}]} "}}]},
 {"role":"assistant","content":""},
 {"role":"user","content":"wait"},
 {"role":"tool","tool_call_id":"x1","content":[{"type":"text","text":"[1,"},{"type":"text","text":"2]"}]},
 {"role":"tool","tool_call_id":"x1"}]})";
    EXPECT_EQ(translate(req),
            R"({"contents":[{"role":"user","parts":[{"text":"go"},{"text":"again"}]},)"
            R"({"role":"model","parts":[{"text":"Calling."},{"functionCall":{"name":"f","args":{"a":[1,{"b":null}]}},"thoughtSignature":"skip_thought_signature_validator"}]},)"
            R"({"role":"user","parts":[{"text":"wait"},{"functionResponse":{"name":"f","response":{"content":"[1,2]"}}},)"
            R"({"functionResponse":{"name":"f","response":{"content":""}}}]}]})");
}

TEST(GeminiRequest, ImageUrls) {
    auto img = [](const std::string& url) {
        return translate(R"({"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":")" + url +
                         R"("}}]}]})");
    };
    const std::pair<const char*, const char*> ok[] = {
        {"http://h/x.png", "image/png"}, {"https://h/p/x.jpeg", "image/jpeg"}, {"HTTPS://h/x.Webp", "image/webp"},
        {"https://h/x.gif#a.png", "image/gif"}, {"https://h/x.heic?a=b.png", "image/heic"},
        {"https://h/x.HEIF", "image/heif"}, {"https://h/a.b/x.jpg", "image/jpeg"}};
    for (const auto& c : ok) {
        EXPECT_EQ(img(c.first), std::string(R"({"contents":[{"role":"user","parts":[{"fileData":{"mimeType":")") +
                                        c.second + R"(","fileUri":")" + c.first + R"("}}]}]})") << c.first;
    }
    EXPECT_EQ(img("data:image/jpeg;base64,/9j/4A=="),
            R"({"contents":[{"role":"user","parts":[{"inlineData":{"mimeType":"image/jpeg","data":"/9j/4A=="}}]}]})");
    const std::string bad_ext = "400: messages[0].content[0].image_url.url must end in .png, .jpg, .jpeg, .webp, "
                                ".gif, .heic or .heif (Gemini needs the image type)";
    for (const char* u : {"https://h/x.bmp", "https://h/x", "https://h.png", "https://h/a.png/x", "https://h/?x.png",
                 "https://h/x.png."}) {
        EXPECT_EQ(img(u), bad_ext) << u;
    }
    const std::string bad_url = "400: messages[0].content[0].image_url.url must be a base64 data URL "
                                "(data:<type>;base64,<data>) or an http(s) URL";
    for (const char* u : {"ftp://h/x.png", "file:///etc/x.png", "x.png", "", "data:image/png,abc",
                 "data:;base64,abc", "data:image/png;base64,", "data:image/png;base64", "data:png;base64,abc"}) {
        EXPECT_EQ(img(u), bad_url) << u;
    }
}

TEST(GeminiRequest, Refusals) {
    const std::pair<const char*, const char*> cases[] = {
        {R"("n":2)", "n greater than 1 is not supported by Gemini models"},
        {R"("logprobs":true)", "logprobs is not supported by Gemini models"},
        {R"("top_logprobs":0)", "top_logprobs is not supported by Gemini models"},
        {R"("top_logprobs":5)", "top_logprobs is not supported by Gemini models"},
        {R"("logit_bias":{"50256":-100})", "logit_bias is not supported by Gemini models"},
        {R"("audio":{"voice":"alloy","format":"wav"})", "audio is not supported by Gemini models"},
        {R"("modalities":["text","audio"])", "audio in modalities is not supported by Gemini models"},
        {R"("prediction":{"type":"content","content":"x"})", "prediction is not supported by Gemini models"},
        {R"("functions":[{"name":"f"}])", "functions is not supported by Gemini models (use tools)"},
        {R"("function_call":"auto")", "function_call is not supported by Gemini models (use tool_choice)"},
        {R"("tools":[{"type":"web_search"}])", "tools[0].type must be \"function\" (Gemini takes function tools only)"},
        {R"("tools":[{"type":"function","function":{"name":"f"}},{"type":"custom","custom":{}}])",
                "tools[1].type must be \"function\" (Gemini takes function tools only)"},
    };
    for (const auto& c : cases) EXPECT_EQ(with(c.first), std::string("400: ") + c.second) << c.first;

    auto msgs = [](const std::string& m) { return translate(R"({"messages":[)" + m + "]}"); };
    EXPECT_EQ(msgs(R"({"role":"user","content":[{"type":"input_audio","input_audio":{"data":"x","format":"wav"}}]})"),
            "400: messages[0].content[0] has an unsupported type (Gemini takes text and image_url parts)");
    EXPECT_EQ(msgs(R"({"role":"user","content":"a"},{"role":"user","content":[{"type":"file","file":{}}]})"),
            "400: messages[1].content[0] has an unsupported type (Gemini takes text and image_url parts)");
    EXPECT_EQ(msgs(R"({"role":"user","content":"a"},{"role":"tool","tool_call_id":"nope","content":"x"})"),
            "400: messages[1].tool_call_id does not match a tool call of an earlier assistant message");
    // Only earlier calls count.
    EXPECT_EQ(msgs(R"({"role":"tool","tool_call_id":"c","content":"x"},)"
                   R"({"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]})"),
            "400: messages[0].tool_call_id does not match a tool call of an earlier assistant message");
    for (const char* args : {R"("[1]")", R"("\"s\"")", R"("")", R"("{")", R"("null")", R"("{} x")", "{}", "null"}) {
        EXPECT_EQ(msgs(std::string(R"({"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":)") +
                       args + "}}]}"),
                "400: messages[0].tool_calls[0].function.arguments must be a JSON object")
                << args;
    }
    EXPECT_EQ(msgs(R"({"role":"system","content":"only system"})"),
            "400: messages must hold at least one non-empty user, assistant or tool message");
    EXPECT_EQ(msgs(""), "400: messages must hold at least one non-empty user, assistant or tool message");
    EXPECT_EQ(msgs(R"({"role":"user","content":""})"),
            "400: messages must hold at least one non-empty user, assistant or tool message");
}

TEST(GeminiRequest, WrongTypes) {
    const std::pair<const char*, const char*> cases[] = {
        {R"("n":"2")", "n must be a positive integer"},
        {R"("n":0)", "n must be a positive integer"},
        {R"("n":1.5)", "n must be a positive integer"},
        {R"("logprobs":1)", "logprobs must be a boolean"},
        {R"("logit_bias":[])", "logit_bias must be an object"},
        {R"("modalities":"audio")", "modalities must be an array of strings"},
        {R"("modalities":[1])", "modalities must be an array of strings"},
        {R"("temperature":"0.5")", "temperature must be a number"},
        {R"("top_p":true)", "top_p must be a number"},
        {R"("presence_penalty":[])", "presence_penalty must be a number"},
        {R"("frequency_penalty":{})", "frequency_penalty must be a number"},
        {R"("max_tokens":"5")", "max_tokens must be an integer from 1 to 2147483647"},
        {R"("max_tokens":0)", "max_tokens must be an integer from 1 to 2147483647"},
        {R"("max_tokens":2147483648)", "max_tokens must be an integer from 1 to 2147483647"},
        {R"("max_tokens":1e30)", "max_tokens must be an integer from 1 to 2147483647"},
        {R"("max_tokens":99999999999999999999999)", "max_tokens must be an integer from 1 to 2147483647"},
        {R"("max_completion_tokens":-1,"max_tokens":5)", "max_completion_tokens must be an integer from 1 to 2147483647"},
        {R"("max_completion_tokens":2.5)", "max_completion_tokens must be an integer from 1 to 2147483647"},
        {R"("stop":5)", "stop must be a string or an array of strings"},
        {R"("stop":["a",1])", "stop must be a string or an array of strings"},
        {R"("seed":"1")", "seed must be an integer from -2147483648 to 2147483647"},
        {R"("seed":4294967296)", "seed must be an integer from -2147483648 to 2147483647"},
        {R"("seed":18446744073709551615)", "seed must be an integer from -2147483648 to 2147483647"},
        {R"("response_format":"json_object")", "response_format must be an object"},
        {R"("response_format":{})", "response_format.type must be \"text\", \"json_object\" or \"json_schema\""},
        {R"("response_format":{"type":"xml"})", "response_format.type must be \"text\", \"json_object\" or \"json_schema\""},
        {R"("response_format":{"type":"json_schema"})", "response_format.json_schema must be an object"},
        {R"("response_format":{"type":"json_schema","json_schema":{"schema":true}})",
                "response_format.json_schema.schema must be an object"},
        {R"("reasoning_effort":"max")", "reasoning_effort must be none, minimal, low, medium or high"},
        {R"("reasoning_effort":1)", "reasoning_effort must be none, minimal, low, medium or high"},
        {R"("tools":{})", "tools must be an array"},
        {R"("tools":["f"])", "tools[0] must be an object"},
        {R"("tools":[{"type":"function"}])", "tools[0].function must be an object"},
        {R"("tools":[{"type":"function","function":{}}])", "tools[0].function.name must be a string"},
        {R"("tools":[{"type":"function","function":{"name":1}}])", "tools[0].function.name must be a string"},
        {R"("tools":[{"type":"function","function":{"name":"f","description":2}}])",
                "tools[0].function.description must be a string"},
        {R"("tools":[{"type":"function","function":{"name":"f","parameters":[]}}])",
                "tools[0].function.parameters must be an object"},
        {R"("tool_choice":"any")", "tool_choice must be \"auto\", \"none\", \"required\" or a named function"},
        {R"("tool_choice":1)", "tool_choice must be \"auto\", \"none\", \"required\" or a named function"},
        {R"("tool_choice":{"type":"auto"})", "tool_choice must be \"auto\", \"none\", \"required\" or a named function"},
        {R"("tool_choice":{"type":"function"})", "tool_choice.function.name must be a string"},
        {R"("tool_choice":{"type":"function","function":{"name":3}})", "tool_choice.function.name must be a string"},
    };
    for (const auto& c : cases) EXPECT_EQ(with(c.first), std::string("400: ") + c.second) << c.first;

    auto msgs = [](const std::string& m) { return translate(R"({"messages":)" + m + "}"); };
    const std::pair<const char*, const char*> mcases[] = {
        {R"({})", "messages must be an array"},
        {R"(null)", "messages must be an array"},
        {R"([1])", "messages[0] must be an object"},
        {R"([{"content":"x"}])", "messages[0].role must be a string"},
        {R"([{"role":5,"content":"x"}])", "messages[0].role must be a string"},
        {R"([{"role":"function","content":"x","name":"f"}])",
                "messages[0].role must be system, developer, user, assistant or tool"},
        {R"([{"role":"system","content":5}])", "messages[0].content must be a string or an array of text parts"},
        {R"([{"role":"system","content":[{"type":"image_url"}]}])", "messages[0].content[0] must be a text part"},
        {R"([{"role":"system","content":["x"]}])", "messages[0].content[0] must be a text part"},
        {R"([{"role":"user"}])", "messages[0].content must be a string or an array of content parts"},
        {R"([{"role":"user","content":{}}])", "messages[0].content must be a string or an array of content parts"},
        {R"([{"role":"user","content":[5]}])", "messages[0].content[0] must be an object"},
        {R"([{"role":"user","content":[{"text":"x"}]}])", "messages[0].content[0].type must be a string"},
        {R"([{"role":"user","content":[{"type":"text","text":5}]}])", "messages[0].content[0].text must be a string"},
        {R"([{"role":"user","content":[{"type":"image_url","image_url":"https://h/x.png"}]}])",
                "messages[0].content[0].image_url must be an object"},
        {R"([{"role":"user","content":[{"type":"image_url","image_url":{"url":1}}]}])",
                "messages[0].content[0].image_url.url must be a string"},
        {R"([{"role":"assistant","content":5}])", "messages[0].content must be a string or an array of text parts"},
        {R"([{"role":"assistant","tool_calls":{}}])", "messages[0].tool_calls must be an array"},
        {R"([{"role":"assistant","tool_calls":[1]}])", "messages[0].tool_calls[0] must be an object"},
        {R"([{"role":"assistant","tool_calls":[{"type":"custom","id":"c"}]}])",
                "messages[0].tool_calls[0].type must be \"function\""},
        {R"([{"role":"assistant","tool_calls":[{"type":"function","function":{"name":"f","arguments":"{}"}}]}])",
                "messages[0].tool_calls[0].id must be a string"},
        {R"([{"role":"assistant","tool_calls":[{"id":"c","type":"function"}]}])",
                "messages[0].tool_calls[0].function must be an object"},
        {R"([{"role":"assistant","tool_calls":[{"id":"c","function":{"arguments":"{}"}}]}])",
                "messages[0].tool_calls[0].function.name must be a string"},
        {R"([{"role":"tool","content":"x"}])", "messages[0].tool_call_id must be a string"},
        {R"([{"role":"tool","tool_call_id":7,"content":"x"}])", "messages[0].tool_call_id must be a string"},
    };
    for (const auto& c : mcases) EXPECT_EQ(msgs(c.first), std::string("400: ") + c.second) << c.first;

    EXPECT_EQ(msgs(R"([{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},)"
                   R"({"role":"tool","tool_call_id":"c","content":5}])"),
            "400: messages[1].content must be a string or an array of text parts");
    EXPECT_EQ(msgs(R"([{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},)"
                   R"({"role":"tool","tool_call_id":"c","content":[{"type":"image_url"}]}])"),
            "400: messages[1].content[0] must be a text part");

    for (const char* body : {"[]", "\"x\"", "1", "null"}) {
        rapidjson::Document d = parse(body);
        std::string out, err;
        EXPECT_FALSE(gemini_request_from_openai(d, out, err));
        EXPECT_EQ(err, "request body must be a JSON object");
    }
}

TEST(GeminiRequest, InvalidUtf8AndHugeValuesStayValid) {
    // Invalid bytes in caller text, keys and schemas become U+FFFD.
    EXPECT_EQ(translate("{\"messages\":[{\"role\":\"user\",\"content\":\"a\xff\xc3\"}]}"),
            "{\"contents\":[{\"role\":\"user\",\"parts\":[{\"text\":\"a\xEF\xBF\xBD\xEF\xBF\xBD\"}]}]}");
    EXPECT_EQ(translate("{" + kHi + ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":"
                                    "{\"\xfe\":[\"\xc0\xaf\",1e300,-9223372036854775808,18446744073709551615]}}}]}"),
            kHiContents + ",\"tools\":[{\"functionDeclarations\":[{\"name\":\"f\",\"parametersJsonSchema\":"
                          "{\"\xEF\xBF\xBD\":[\"\xEF\xBF\xBD\xEF\xBF\xBD\",1e300,-9223372036854775808,18446744073709551615]}}]}]}");
    // Control characters and quotes are escaped.
    EXPECT_EQ(translate(R"({"messages":[{"role":"user","content":"\"\u0000\n"}]})"),
            R"({"contents":[{"role":"user","parts":[{"text":"\"\u0000\n"}]}]})");
    // Tool arguments nested deeper than 256 levels are refused; a deep tool
    // result is passed as text.
    std::string deep = std::string(300, '[') + std::string(300, ']');
    std::string deep_obj = "{\\\"a\\\":" + deep + "}";
    EXPECT_EQ(translate(R"({"messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":")" +
                        deep_obj + R"("}}]}]})"),
            "400: messages[0].tool_calls[0].function.arguments must be a JSON object");
    const std::string out =
            translate(R"({"messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},)"
                      R"({"role":"tool","tool_call_id":"c","content":")" + deep_obj + R"("}]})");
    EXPECT_NE(out.find(R"("response":{"content":"{\"a\":[[[)"), std::string::npos) << out.substr(0, 200);
}

TEST(GeminiRequest, DeepSchemaIsCopiedWithoutRecursion) {
    // The copy is iterative: a schema nested deeper than any real one still works.
    std::string schema, close;
    for (int i = 0; i < 200; ++i) {
        schema += R"({"a":)";
        close += "}";
    }
    schema += "1" + close;
    const std::string body = with(R"("response_format":{"type":"json_schema","json_schema":{"schema":)" + schema + "}}");
    EXPECT_EQ(body, kHiContents + R"(,"generationConfig":{"responseMimeType":"application/json","responseJsonSchema":)" +
                            schema + "}}");
}

// ---------------------------------------------------------------- whole responses

TEST(GeminiWhole, Text) {
    ChatResponseIR ir;
    std::string err;
    ASSERT_TRUE(whole(R"({"candidates":[{"content":{"role":"model","parts":[{"text":"Hello"},{"text":", world"}]},)"
                      R"("finishReason":"STOP","index":0,"safetyRatings":[]}],)"
                      R"("usageMetadata":{"promptTokenCount":8,"candidatesTokenCount":3,"totalTokenCount":11},)"
                      R"("modelVersion":"gemini-2.5-flash","responseId":"r-1"})",
            ir, err))
            << err;
    EXPECT_EQ(ir.id, "r-1");
    EXPECT_EQ(ir.text, "Hello, world");
    EXPECT_EQ(ir.reasoning, "");
    EXPECT_TRUE(ir.tool_calls.empty());
    EXPECT_EQ(ir.finish, FinishReason::Stop);
    EXPECT_EQ(usage_str(ir.usage), "p=8 c=3 cache=0 r=0");
    EXPECT_EQ(ir.usage.accounting().prompt_tokens, 8);
    EXPECT_EQ(ir.usage.accounting().completion_tokens, 3);
}

TEST(GeminiWhole, ThoughtsCallsAndUsage) {
    ChatResponseIR ir;
    std::string err;
    ASSERT_TRUE(whole(R"({"candidates":[{"content":{"role":"model","parts":[)"
                      R"({"text":"Thinking about it.","thought":true},{"text":"Sure."},)"
                      R"({"functionCall":{"name":"get_weather","args":{"city":"Paris","opts":{"u":["c"]}}},"thoughtSignature":"c2ln"},)"
                      R"({"functionCall":{"id":"fc-7","name":"get_time"}},)"
                      R"({"functionCall":{"name":"noop","args":{}}},)"
                      R"({"inlineData":{"mimeType":"image/png","data":"AA=="}}]},"finishReason":"STOP"}],)"
                      R"("usageMetadata":{"promptTokenCount":100,"candidatesTokenCount":20,"thoughtsTokenCount":50,)"
                      R"("cachedContentTokenCount":64,"toolUsePromptTokenCount":7,"totalTokenCount":177}})",
            ir, err))
            << err;
    EXPECT_EQ(ir.id, "");
    EXPECT_EQ(ir.text, "Sure.");
    EXPECT_EQ(ir.reasoning, "Thinking about it.");
    ASSERT_EQ(ir.tool_calls.size(), 3u);
    EXPECT_EQ(ir.tool_calls[0].id, "call_0");
    EXPECT_EQ(ir.tool_calls[0].name, "get_weather");
    EXPECT_EQ(ir.tool_calls[0].arguments, R"({"city":"Paris","opts":{"u":["c"]}})");
    EXPECT_EQ(ir.tool_calls[1].id, "fc-7");
    EXPECT_EQ(ir.tool_calls[1].name, "get_time");
    EXPECT_EQ(ir.tool_calls[1].arguments, "{}");
    EXPECT_EQ(ir.tool_calls[2].id, "call_2");
    EXPECT_EQ(ir.tool_calls[2].arguments, "{}");
    EXPECT_EQ(ir.finish, FinishReason::ToolCalls);
    EXPECT_EQ(usage_str(ir.usage), "p=107 c=70 cache=64 r=50");
}

TEST(GeminiWhole, FinishReasons) {
    const std::pair<const char*, FinishReason> cases[] = {
        {"STOP", FinishReason::Stop}, {"MAX_TOKENS", FinishReason::Length},
        {"SAFETY", FinishReason::ContentFilter}, {"RECITATION", FinishReason::ContentFilter},
        {"BLOCKLIST", FinishReason::ContentFilter}, {"PROHIBITED_CONTENT", FinishReason::ContentFilter},
        {"SPII", FinishReason::ContentFilter}, {"IMAGE_SAFETY", FinishReason::ContentFilter},
        {"LANGUAGE", FinishReason::ContentFilter}, {"MALFORMED_FUNCTION_CALL", FinishReason::Stop},
        {"OTHER", FinishReason::Stop}, {"FINISH_REASON_UNSPECIFIED", FinishReason::Stop},
        {"SOMETHING_NEW", FinishReason::Stop}};
    for (const auto& c : cases) {
        ChatResponseIR ir;
        std::string err;
        ASSERT_TRUE(whole(std::string(R"({"candidates":[{"content":{"parts":[{"text":"x"}]},"finishReason":")") +
                                  c.first + "\"}]}",
                ir, err));
        EXPECT_EQ(ir.finish, c.second) << c.first;
    }
    // A call with MAX_TOKENS stays Length; no finishReason stays None.
    ChatResponseIR ir;
    std::string err;
    ASSERT_TRUE(whole(R"({"candidates":[{"content":{"parts":[{"functionCall":{"name":"f"}}]},"finishReason":"MAX_TOKENS"}]})", ir, err));
    EXPECT_EQ(ir.finish, FinishReason::Length);
    ASSERT_TRUE(whole(R"({"candidates":[{"content":{"parts":[{"text":"x"}]}}]})", ir, err));
    EXPECT_EQ(ir.finish, FinishReason::None);
    // A safety-stopped candidate without content.
    ASSERT_TRUE(whole(R"({"candidates":[{"finishReason":"SAFETY","safetyRatings":[]}]})", ir, err));
    EXPECT_EQ(ir.finish, FinishReason::ContentFilter);
    EXPECT_EQ(ir.text, "");
}

TEST(GeminiWhole, PromptBlocked) {
    ChatResponseIR ir;
    std::string err;
    ASSERT_TRUE(whole(R"({"promptFeedback":{"blockReason":"SAFETY","safetyRatings":[]},)"
                      R"("usageMetadata":{"promptTokenCount":9,"totalTokenCount":9},"responseId":"b"})",
            ir, err));
    EXPECT_EQ(ir.finish, FinishReason::ContentFilter);
    EXPECT_EQ(ir.text, "");
    EXPECT_EQ(ir.id, "b");
    EXPECT_EQ(usage_str(ir.usage), "p=9 c=0 cache=0 r=0");
    ASSERT_TRUE(whole(R"({"candidates":[],"promptFeedback":{"blockReason":"OTHER"}})", ir, err));
    EXPECT_EQ(ir.finish, FinishReason::ContentFilter);
}

TEST(GeminiWhole, UsageCountsThatAreNotCounts) {
    ChatResponseIR ir;
    std::string err;
    // Out of range or not integers: a malformed usage (billed as unread: the
    // estimate, with a warning), whichever count it is.
    ASSERT_TRUE(whole(R"({"candidates":[{"content":{"parts":[{"text":"x"}]},"finishReason":"STOP"}],)"
                      R"("usageMetadata":{"promptTokenCount":-1,"candidatesTokenCount":1.5,"thoughtsTokenCount":"3",)"
                      R"("cachedContentTokenCount":99999999999999999999,"toolUsePromptTokenCount":null}})",
            ir, err));
    EXPECT_TRUE(ir.usage.present);
    EXPECT_TRUE(ir.usage.malformed);
    EXPECT_TRUE(ir.usage.accounting().malformed);
    for (const char* bad : {"1e30", "9223372036854775808", "10.7", "-3", "\"12\"", "true", "{}", "[5]"}) {
        SCOPED_TRACE(bad);
        ASSERT_TRUE(whole(std::string(R"({"candidates":[{"content":{"parts":[{"text":"x"}]}}],)") +
                              R"("usageMetadata":{"promptTokenCount":)" + bad + R"(,"candidatesTokenCount":5}})",
                          ir, err));
        EXPECT_EQ(usage_str(ir.usage), "p=0 c=5 cache=0 r=0 malformed");
    }
    // null is absent
    ASSERT_TRUE(whole(R"({"candidates":[{"content":{"parts":[{"text":"x"}]}}],)"
                      R"("usageMetadata":{"promptTokenCount":null,"candidatesTokenCount":5}})",
            ir, err));
    EXPECT_EQ(usage_str(ir.usage), "p=0 c=5 cache=0 r=0");
    ASSERT_TRUE(whole(R"({"candidates":[{"content":{"parts":[{"text":"x"}]}}],)"
                      R"("usageMetadata":{"promptTokenCount":9223372036854775807,"toolUsePromptTokenCount":5,)"
                      R"("candidatesTokenCount":9223372036854775807,"thoughtsTokenCount":9223372036854775807}})",
            ir, err));
    EXPECT_EQ(usage_str(ir.usage), "p=9223372036854775807 c=9223372036854775807 cache=0 r=9223372036854775807");
    ASSERT_TRUE(whole(R"({"candidates":[{"content":{"parts":[{"text":"x"}]}}],"usageMetadata":[1]})", ir, err));
    EXPECT_FALSE(ir.usage.present);
}

TEST(GeminiWhole, InvalidAnswers) {
    const std::pair<std::string, const char*> cases[] = {
        {"", "the answer is not JSON"},
        {R"({"candidates":[{"content":{"parts":[{"text":"x"})", "the answer is not JSON"},
        {"{\"candidates\":[]} x", "the answer is not JSON"},
        {std::string(300, '[') + std::string(300, ']'), "the answer is not JSON"},
        {"[]", "the answer is not a JSON object"},
        {"\"x\"", "the answer is not a JSON object"},
        {"{}", "the answer has no candidates"},
        {R"({"candidates":[]})", "the answer has no candidates"},
        {R"({"candidates":null,"promptFeedback":{}})", "the answer has no candidates"},
        {R"({"promptFeedback":{"blockReason":1}})", "the answer has no candidates"},
        {R"({"error":{"code":500,"message":"x","status":"INTERNAL"}})", "the answer has no candidates"},
        {R"({"candidates":{}})", "candidates is not an array"},
        {R"({"candidates":[1]})", "candidates[0] is not an object"},
        {R"({"candidates":[{"content":"x"}]})", "candidates[0].content is not an object"},
        {R"({"candidates":[{"content":{"parts":{}}}]})", "content.parts is not an array"},
        {R"({"candidates":[{"content":{"parts":["x"]}}]})", "a part is not an object"},
        {R"({"candidates":[{"content":{"parts":[{"text":1}]}}]})", "a part's text is not a string"},
        {R"({"candidates":[{"content":{"parts":[{"text":"x","thought":"yes"}]}}]})", "a part's thought is not a boolean"},
        {R"({"candidates":[{"content":{"parts":[{"functionCall":[]}]}}]})", "a functionCall is not an object"},
        {R"({"candidates":[{"content":{"parts":[{"functionCall":{"args":{}}}]}}]})", "a functionCall has no name"},
        {R"({"candidates":[{"content":{"parts":[{"functionCall":{"name":2}}]}}]})", "a functionCall has no name"},
        {R"({"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":"{}"}}]}}]})",
                "a functionCall's args is not an object"},
        {R"({"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","id":3}}]}}]})",
                "a functionCall's id is not a string"},
        {R"({"candidates":[{"finishReason":1}]})", "finishReason is not a string"},
        {R"({"candidates":[{}],"responseId":5})", "responseId is not a string"},
    };
    for (const auto& c : cases) {
        ChatResponseIR ir;
        std::string err;
        EXPECT_FALSE(whole(c.first, ir, err)) << c.first;
        EXPECT_EQ(err, c.second) << c.first;
    }
}

TEST(GeminiWhole, InvalidUtf8BecomesReplacement) {
    ChatResponseIR ir;
    std::string err;
    ASSERT_TRUE(whole("{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"a\xff\"},{\"text\":\"t\xc3\",\"thought\":true},"
                      "{\"functionCall\":{\"id\":\"i\xfe\",\"name\":\"n\xfd\",\"args\":{\"k\xfc\":\"v\xfb\"}}}]}}],"
                      "\"responseId\":\"r\xfa\"}",
            ir, err));
    EXPECT_EQ(ir.text, "a\xEF\xBF\xBD");
    EXPECT_EQ(ir.reasoning, "t\xEF\xBF\xBD");
    EXPECT_EQ(ir.id, "r\xEF\xBF\xBD");
    ASSERT_EQ(ir.tool_calls.size(), 1u);
    EXPECT_EQ(ir.tool_calls[0].id, "i\xEF\xBF\xBD");
    EXPECT_EQ(ir.tool_calls[0].name, "n\xEF\xBF\xBD");
    EXPECT_EQ(ir.tool_calls[0].arguments, "{\"k\xEF\xBF\xBD\":\"v\xEF\xBF\xBD\"}");
}

// ---------------------------------------------------------------- streams

TEST(GeminiStream, TextThenFunctionCall) {
    const StreamRun r = stream({
        R"({"candidates":[{"content":{"parts":[{"text":"Let me think.","thought":true}],"role":"model"},"index":0}],)"
        R"("usageMetadata":{"promptTokenCount":10,"totalTokenCount":10},"modelVersion":"gemini-2.5-flash","responseId":"abc123"})",
        R"({"candidates":[{"content":{"parts":[{"text":"I will"}],"role":"model"},"index":0}],)"
        R"("usageMetadata":{"promptTokenCount":10,"totalTokenCount":10},"modelVersion":"gemini-2.5-flash","responseId":"abc123"})",
        R"({"candidates":[{"content":{"parts":[{"text":" check."}],"role":"model"},"index":0}],)"
        R"("usageMetadata":{"promptTokenCount":10,"totalTokenCount":10},"modelVersion":"gemini-2.5-flash","responseId":"abc123"})",
        R"({"candidates":[{"content":{"parts":[{"functionCall":{"name":"get_weather","args":{"city":"Paris"}},"thoughtSignature":"c2ln"},)"
        R"({"functionCall":{"id":"g1","name":"get_time","args":{}}}],"role":"model"},"finishReason":"STOP","index":0}],)"
        R"("usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":15,"totalTokenCount":45,"thoughtsTokenCount":20,)"
        R"("cachedContentTokenCount":4},"modelVersion":"gemini-2.5-flash","responseId":"abc123"})",
    });
    const std::vector<std::string> want = {
        "Start id=abc123",
        "Reasoning Let me think.",
        "Usage p=10 c=0 cache=0 r=0",
        "Text I will",
        "Usage p=10 c=0 cache=0 r=0",
        "Text  check.",
        "Usage p=10 c=0 cache=0 r=0",
        "ToolStart 0 id=call_0 name=get_weather",
        R"(ToolArgs 0 {"city":"Paris"})",
        "ToolStart 1 id=g1 name=get_time",
        "ToolArgs 1 {}",
        "Usage p=10 c=35 cache=4 r=20",
        "Finish tool_calls",
    };
    EXPECT_EQ(r.events, want);
    EXPECT_EQ(r.steps, std::vector<ReadStep>(4, ReadStep::More));
    EXPECT_TRUE(r.complete);
}

TEST(GeminiStream, CallEarlierThenStopInLaterChunk) {
    const StreamRun r = stream({
        R"({"candidates":[{"content":{"parts":[{"functionCall":{"name":"f"}}]}}]})",
        R"({"candidates":[{"content":{"parts":[{"functionCall":{"name":"g","args":{"a":1}}}]}}]})",
        R"({"candidates":[{"content":{"parts":[{"text":""}]},"finishReason":"STOP"}]})",
    });
    const std::vector<std::string> want = {
        "Start id=", "ToolStart 0 id=call_0 name=f", "ToolArgs 0 {}", "ToolStart 1 id=call_1 name=g",
        R"(ToolArgs 1 {"a":1})", "Finish tool_calls"};
    EXPECT_EQ(r.events, want);
}

TEST(GeminiStream, UsageOutOfRangeIsMalformed) {
    const StreamRun r = stream({
        R"({"candidates":[{"content":{"parts":[{"text":"a"}],"role":"model"},"index":0}],)"
        R"("usageMetadata":{"promptTokenCount":40,"candidatesTokenCount":1}})",
        R"({"candidates":[{"content":{"parts":[{"text":"b"}],"role":"model"},"index":0}],)"
        R"("usageMetadata":{"promptTokenCount":40,"candidatesTokenCount":10.7}})",
        R"({"candidates":[{"content":{"parts":[{"text":"c"}],"role":"model"},"finishReason":"STOP","index":0}],)"
        R"("usageMetadata":{"promptTokenCount":1e30,"candidatesTokenCount":3}})",
    });
    const std::vector<std::string> want = {
        "Start id=", "Text a", "Usage p=40 c=1 cache=0 r=0",
        "Text b", "Usage p=40 c=0 cache=0 r=0 malformed",
        "Text c", "Usage p=0 c=3 cache=0 r=0 malformed", "Finish stop",
    };
    EXPECT_EQ(r.events, want);
}

TEST(GeminiStream, CompleteOnlyAfterFinishReason) {
    auto reader = make_gemini_reader();
    std::vector<StreamEventIR> out;
    std::string err;
    EXPECT_FALSE(reader->complete());
    EXPECT_EQ(reader->read_event(data_event(R"({"candidates":[{"content":{"parts":[{"text":"a"}]}}]})"), out, err),
            ReadStep::More);
    EXPECT_FALSE(reader->complete());
    EXPECT_EQ(reader->read_event(data_event(R"({"candidates":[{"content":{"parts":[{"text":"b"}]},"finishReason":"MAX_TOKENS"}]})"),
                      out, err),
            ReadStep::More);
    EXPECT_TRUE(reader->complete());
    ASSERT_EQ(out.size(), 4u);
    EXPECT_EQ(describe(out[3]), "Finish length");
    // An event without data (a comment) reads as nothing.
    out.clear();
    SseEvent comment;
    comment.lines.push_back(": keepalive");
    EXPECT_EQ(reader->read_event(comment, out, err), ReadStep::More);
    EXPECT_TRUE(out.empty());
}

TEST(GeminiStream, PromptBlocked) {
    const StreamRun r = stream({R"({"promptFeedback":{"blockReason":"PROHIBITED_CONTENT"},"usageMetadata":{"promptTokenCount":3},"responseId":"z"})"});
    EXPECT_EQ(r.events, (std::vector<std::string>{"Start id=z", "Usage p=3 c=0 cache=0 r=0", "Finish content_filter"}));
    EXPECT_TRUE(r.complete);
}

TEST(GeminiStream, Error) {
    const StreamRun r = stream({
        R"({"candidates":[{"content":{"parts":[{"text":"Hi"}]}}],"responseId":"q"})",
        R"({"error":{"code":503,"message":"The model is overloaded (key=AIzaSyA1234567890abcdefghijklmnopqrstu).","status":"UNAVAILABLE"}})",
    });
    EXPECT_EQ(r.events, (std::vector<std::string>{"Start id=q", "Text Hi",
                                "Error type=UNAVAILABLE The model is overloaded (key=[redacted])."}));
    EXPECT_EQ(r.steps, (std::vector<ReadStep>{ReadStep::More, ReadStep::Failed}));
    EXPECT_FALSE(r.complete);
    const StreamRun r2 = stream({R"({"error":{"code":500}})"});
    EXPECT_EQ(r2.events, (std::vector<std::string>{"Error type= upstream error without a message"}));
    EXPECT_EQ(r2.steps, (std::vector<ReadStep>{ReadStep::Failed}));
    const StreamRun r3 = stream({"{\"error\":{\"message\":\"bad \xff\",\"status\":7}}"});
    EXPECT_EQ(r3.events, (std::vector<std::string>{"Error type= bad \xEF\xBF\xBD"}));
}

TEST(GeminiStream, InvalidEvents) {
    const std::pair<std::string, const char*> cases[] = {
        {"[DONE]", "a stream event is not JSON"},
        {R"({"candidates":[)", "a stream event is not JSON"},
        {"\xff\xfe", "a stream event is not JSON"},
        {std::string(300, '{'), "a stream event is not JSON"},
        {"[1]", "a stream event is not a JSON object"},
        {"42", "a stream event is not a JSON object"},
        {R"({"candidates":"x"})", "candidates is not an array"},
        {R"({"candidates":[{"content":{"parts":[{"text":["x"]}]}}]})", "a part's text is not a string"},
        {R"({"candidates":[{"content":{"parts":[{"functionCall":{"name":null}}]}}]})", "a functionCall has no name"},
        {R"({"candidates":[{"finishReason":{}}]})", "finishReason is not a string"},
    };
    for (const auto& c : cases) {
        const StreamRun r = stream({c.first});
        EXPECT_EQ(r.steps, std::vector<ReadStep>{ReadStep::Invalid}) << c.first;
        EXPECT_EQ(r.err, c.second) << c.first;
        EXPECT_TRUE(r.events.empty()) << c.first;
        EXPECT_FALSE(r.complete);
    }
    // A chunk with neither candidates nor feedback is read as nothing but usage.
    const StreamRun r = stream({R"({"usageMetadata":{"promptTokenCount":2,"candidatesTokenCount":1}})"});
    EXPECT_EQ(r.events, (std::vector<std::string>{"Start id=", "Usage p=2 c=1 cache=0 r=0"}));
    EXPECT_FALSE(r.complete);
}

// ---------------------------------------------------------------- embeddings

namespace {

std::string embed_req(const std::string& json, std::size_t* batch_out = nullptr,
                      std::string_view model = "gemini-embedding-001") {
    rapidjson::Document d = parse(json);
    std::string body, err;
    std::size_t batch = 99;
    if (!gemini_embed_request_from_openai(d, model, batch, body, err)) return "400: " + err;
    if (batch_out) *batch_out = batch;
    return body;
}

std::string embed_resp(const std::string& body, std::size_t batch, bool base64, std::string* err_out = nullptr) {
    std::string out, err;
    Usage u;
    u.present = true;
    if (!openai_embeddings_from_gemini(body, batch, base64, "my-embed", out, u, err)) {
        EXPECT_TRUE(out.empty());
        return "invalid: " + err;
    }
    EXPECT_FALSE(u.present);
    if (err_out) *err_out = err;
    return out;
}

}  // namespace

TEST(GeminiEmbed, Requests) {
    std::size_t batch = 99;
    EXPECT_EQ(embed_req(R"({"model":"e","input":"hello","encoding_format":"base64","user":"u"})", &batch),
            R"({"content":{"parts":[{"text":"hello"}]}})");
    EXPECT_EQ(batch, 0u);
    EXPECT_EQ(embed_req(R"({"model":"e","input":"hello","dimensions":256})", &batch),
            R"({"content":{"parts":[{"text":"hello"}]},"outputDimensionality":256})");
    EXPECT_EQ(batch, 0u);
    EXPECT_EQ(embed_req(R"({"model":"e","input":["a","b"],"dimensions":768,"encoding_format":"float"})", &batch),
            R"({"requests":[{"model":"models/gemini-embedding-001","content":{"parts":[{"text":"a"}]},"outputDimensionality":768},)"
            R"({"model":"models/gemini-embedding-001","content":{"parts":[{"text":"b"}]},"outputDimensionality":768}]})");
    EXPECT_EQ(batch, 2u);
    EXPECT_EQ(embed_req(R"({"input":["only"]})", &batch),
            R"({"requests":[{"model":"models/gemini-embedding-001","content":{"parts":[{"text":"only"}]}}]})");
    EXPECT_EQ(batch, 1u);
    // Model and text are JSON-escaped and made valid UTF-8.
    EXPECT_EQ(embed_req("{\"input\":[\"\\\"q\\\"\\n\xff\"]}", nullptr, "m\"\xfe"),
            "{\"requests\":[{\"model\":\"models/m\\\"\xEF\xBF\xBD\",\"content\":{\"parts\":[{\"text\":\"\\\"q\\\"\\n\xEF\xBF\xBD\"}]}}]}");
}

TEST(GeminiEmbed, RequestRefusals) {
    const std::pair<const char*, const char*> cases[] = {
        {R"({"input":[1,2,3]})", "input as token ids is not supported by Gemini models"},
        {R"({"input":[[1,2],[3]]})", "input as token ids is not supported by Gemini models"},
        {R"({"input":["a",5]})", "input as token ids is not supported by Gemini models"},
        {R"({"input":[]})", "input must not be empty"},
        {R"({})", "input must be a string or an array of strings"},
        {R"({"input":null})", "input must be a string or an array of strings"},
        {R"({"input":5})", "input must be a string or an array of strings"},
        {R"({"input":{"a":1}})", "input must be a string or an array of strings"},
        {R"({"input":["a",null]})", "input must be a string or an array of strings"},
        {R"({"input":["a",{}]})", "input must be a string or an array of strings"},
        {R"({"input":"a","dimensions":0})", "dimensions must be an integer from 1 to 2147483647"},
        {R"({"input":"a","dimensions":"8"})", "dimensions must be an integer from 1 to 2147483647"},
        {R"({"input":"a","dimensions":1.5})", "dimensions must be an integer from 1 to 2147483647"},
        {R"({"input":"a","dimensions":99999999999999999999})", "dimensions must be an integer from 1 to 2147483647"},
        {R"({"input":"a","encoding_format":"int8"})", "encoding_format must be \"float\" or \"base64\""},
        {R"({"input":"a","encoding_format":1})", "encoding_format must be \"float\" or \"base64\""},
        {"[]", "request body must be a JSON object"},
    };
    for (const auto& c : cases) EXPECT_EQ(embed_req(c.first), std::string("400: ") + c.second) << c.first;
    EXPECT_EQ(embed_req(R"({"input":["a"]})", nullptr, ""), "400: model must not be empty");
}

TEST(GeminiEmbed, FloatResponses) {
    EXPECT_EQ(embed_resp(R"({"embedding":{"values":[0.013168523,-0.00871201,1,0,-2.5e-7]}})", 0, false),
            R"({"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.013168523,-0.00871201,1.0,0.0,-2.5e-7]}],)"
            R"("model":"my-embed","usage":{"prompt_tokens":0,"total_tokens":0}})");
    EXPECT_EQ(embed_resp(R"({"embeddings":[{"values":[0.5]},{"values":[-1,2]}]})", 2, false),
            R"({"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.5]},)"
            R"({"object":"embedding","index":1,"embedding":[-1.0,2.0]}],)"
            R"("model":"my-embed","usage":{"prompt_tokens":0,"total_tokens":0}})");
}

TEST(GeminiEmbed, Base64Responses) {
    EXPECT_EQ(embed_resp(R"({"embedding":{"values":[1.0,-2.0,0.5]}})", 0, true),
            R"({"object":"list","data":[{"object":"embedding","index":0,"embedding":"AACAPwAAAMAAAAA/"}],)"
            R"("model":"my-embed","usage":{"prompt_tokens":0,"total_tokens":0}})");
    EXPECT_EQ(embed_resp(R"({"embeddings":[{"values":[1.0]},{"values":[1.0,0.5]},{"values":[0.013168523,-0.00871201]},{"values":[]}]})",
                      4, true),
            R"({"object":"list","data":[{"object":"embedding","index":0,"embedding":"AACAPw=="},)"
            R"({"object":"embedding","index":1,"embedding":"AACAPwAAAD8="},)"
            R"({"object":"embedding","index":2,"embedding":"ysBXPNK8Drw="},)"
            R"({"object":"embedding","index":3,"embedding":""}],)"
            R"("model":"my-embed","usage":{"prompt_tokens":0,"total_tokens":0}})");
}

TEST(GeminiEmbed, MalformedAnswers) {
    struct Case {
        std::string body;
        std::size_t batch;   // 0: embedContent, else the inputs sent
        const char* err;
    };
    const Case cases[] = {
        {"", 0, "the answer is not JSON"},
        {R"({"embedding":{"values":[0.1,)", 0, "the answer is not JSON"},
        {R"({"embedding":{"values":[1e400]}})", 0, "the answer is not JSON"},
        {R"({"embedding":{"values":[NaN]}})", 0, "the answer is not JSON"},
        {R"({"embedding":{"values":[Infinity]}})", 0, "the answer is not JSON"},
        {std::string(300, '[') + std::string(300, ']'), 0, "the answer is not JSON"},
        {"[]", 0, "the answer is not a JSON object"},
        {"{}", 0, "the answer has no embedding"},
        {R"({"embeddings":[{"values":[1]}]})", 0, "the answer has no embedding"},
        {R"({"embedding":[1,2]})", 0, "an embedding is not an object"},
        {R"({"embedding":{}})", 0, "an embedding has no values array"},
        {R"({"embedding":{"values":{"0":1}}})", 0, "an embedding has no values array"},
        {R"({"embedding":{"values":[1,"2"]}})", 0, "an embedding value is not a finite float"},
        {R"({"embedding":{"values":[null]}})", 0, "an embedding value is not a finite float"},
        {R"({"embedding":{"values":[1e300]}})", 0, "an embedding value is not a finite float"},
        {R"({"embedding":{"values":[-3.5e38]}})", 0, "an embedding value is not a finite float"},
        {"{}", 2, "the answer has no embeddings array"},
        {R"({"embedding":{"values":[1]}})", 2, "the answer has no embeddings array"},
        {R"({"embeddings":{}})", 2, "the answer has no embeddings array"},
        {R"({"embeddings":[{"values":[1]},3]})", 2, "an embedding is not an object"},
        {R"({"embeddings":[{"values":[1]},{"values":[[1]]}]})", 2, "an embedding value is not a finite float"},
        {"{\"embedding\":{\"values\":[\"\xff\"]}}", 0, "an embedding value is not a finite float"},
        // Not as many vectors as inputs: the answer to some other request.
        {R"({"embeddings":[]})", 2, "the number of embeddings (0) is not the number of inputs (2)"},
        {R"({"embeddings":[{"values":[1]}]})", 2, "the number of embeddings (1) is not the number of inputs (2)"},
        {R"({"embeddings":[{"values":[1]},{"values":[2]},{"values":[3]}]})", 2, "the number of embeddings (3) is not the number of inputs (2)"},
        {R"({"embeddings":[{"values":[1]},{"values":[2]}]})", 1, "the number of embeddings (2) is not the number of inputs (1)"},
    };
    for (const auto& c : cases) {
        for (bool b64 : {false, true}) {
            EXPECT_EQ(embed_resp(c.body, c.batch, b64), std::string("invalid: ") + c.err) << c.body;
        }
    }
}

TEST(GeminiHuge, LargeBodiesPassThrough) {
    const std::string data(4 << 20, 'A');
    EXPECT_EQ(translate(R"({"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,)" +
                        data + R"("}}]}]})"),
            R"({"contents":[{"role":"user","parts":[{"inlineData":{"mimeType":"image/png","data":")" + data + R"("}}]}]})");
    ChatResponseIR ir;
    std::string err;
    ASSERT_TRUE(whole(R"({"candidates":[{"content":{"parts":[{"text":")" + data + R"("}]},"finishReason":"STOP"}]})", ir, err));
    EXPECT_EQ(ir.text, data);
    std::string values = "0.25";
    for (int i = 0; i < 100000; ++i) values += ",0.25";
    const std::string out = embed_resp(R"({"embedding":{"values":[)" + values + "]}}", 0, true);
    EXPECT_EQ(out.size(), std::string(R"({"object":"list","data":[{"object":"embedding","index":0,"embedding":""}],)"
                                      R"("model":"my-embed","usage":{"prompt_tokens":0,"total_tokens":0}})").size() +
                                  (100001 * 4 + 2) / 3 * 4);
}
