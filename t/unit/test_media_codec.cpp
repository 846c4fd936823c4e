// The media codec alone: images, speech, transcription to OpenAI-type providers.
#include <gtest/gtest.h>

#include "core/codec/codec.h"
#include "core/config/gwconfig.h"

using namespace llmgw;

namespace {

std::string drive(Codec& c, int status, const std::string& ct, const std::string& body, BodyEnd how = BodyEnd::Clean) {
    std::string out;
    c.head(status, ct);
    for (std::size_t i = 0; i < body.size(); i += 3) c.feed(std::string_view(body).substr(i, 3), out);
    c.finish(how, out);
    return out;
}

}  // namespace

TEST(MediaCodec, OnlyOpenAITypeProvidersServeMedia) {
    for (CodecKind k : {CodecKind::OpenAIImages, CodecKind::OpenAISpeech, CodecKind::OpenAITranscription}) {
        EXPECT_TRUE(codec_serves(k, ProviderType::OpenAI));
        EXPECT_FALSE(codec_serves(k, ProviderType::Anthropic));
        EXPECT_FALSE(codec_serves(k, ProviderType::Gemini));
        CodecOptions o;
        o.provider = ProviderType::Gemini;
        EXPECT_EQ(make_codec(k, o), nullptr);
    }
}

TEST(MediaCodec, JsonRoutesRewriteTheModel) {
    std::string err;
    auto doc = RequestDoc::parse(R"({"model":"tts","input":"hi","voice":"alloy"})", err);
    ASSERT_TRUE(doc);
    for (CodecKind k : {CodecKind::OpenAIImages, CodecKind::OpenAISpeech}) {
        auto c = make_codec(k, CodecOptions());
        CallerRequest in;
        in.doc = doc.get();
        in.upstream_model = "gpt-4o-mini-tts";
        in.provider_key = "pk";
        UpstreamRequest out;
        ASSERT_TRUE(c->build_request(in, out, err));
        EXPECT_EQ(out.path, k == CodecKind::OpenAIImages ? "/images/generations" : "/audio/speech");
        EXPECT_EQ(out.body, R"({"model":"gpt-4o-mini-tts","input":"hi","voice":"alloy"})");
        EXPECT_FALSE(out.caller_body);
        EXPECT_EQ(out.credential_header, "Authorization");
    }
}

TEST(MediaCodec, TranscriptionSplicesOnlyTheModelValue) {
    const std::string b = "bnd";
    std::string body = "--bnd\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.mp3\"\r\n\r\nID3\x01\x02"
                       "\r\n--bnd\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nstt\r\n--bnd--\r\n";
    FormScan form = scan_form_data(body, b);
    ASSERT_EQ(form.status, FormStatus::Ok);
    auto c = make_codec(CodecKind::OpenAITranscription, CodecOptions());
    CallerRequest in;
    in.body = body;
    in.form = &form;
    in.content_type = "multipart/form-data; boundary=bnd";
    in.upstream_model = "whisper-1";
    UpstreamRequest out;
    std::string err;
    ASSERT_TRUE(c->build_request(in, out, err));
    EXPECT_EQ(out.path, "/audio/transcriptions");
    EXPECT_TRUE(out.caller_body);
    EXPECT_EQ(out.splice_at, form.model_at);
    EXPECT_EQ(out.splice_len, 3u);
    EXPECT_EQ(out.body, "whisper-1");
    std::string sent = body.substr(0, out.splice_at) + out.body + body.substr(out.splice_at + out.splice_len);
    EXPECT_EQ(scan_form_data(sent, b).model, "whisper-1");
    // The provider's own id sent by the caller: nothing to splice.
    in.upstream_model = "stt";
    UpstreamRequest same;
    ASSERT_TRUE(c->build_request(in, same, err));
    EXPECT_EQ(same.splice_len, 0u);
    EXPECT_EQ(same.body, "");
    // Without a scanned form the request is not built.
    in.form = nullptr;
    UpstreamRequest none;
    EXPECT_FALSE(c->build_request(in, none, err));
}

TEST(MediaCodec, AnswersRelayedAsTheyCame) {
    const std::string audio("\xff\xfb\x90\x00\x00\r\n\x01", 8);
    auto speech = make_codec(CodecKind::OpenAISpeech, CodecOptions());
    EXPECT_EQ(drive(*speech, 200, "audio/mpeg", audio), audio);
    EXPECT_EQ(speech->result().end, EndState::Complete);
    EXPECT_FALSE(speech->event_stream());
    EXPECT_FALSE(speech->result().usage.present);

    auto cut = make_codec(CodecKind::OpenAISpeech, CodecOptions());
    EXPECT_EQ(drive(*cut, 200, "audio/mpeg", audio, BodyEnd::Cut), audio);   // no error event inside audio
    EXPECT_EQ(cut->result().end, EndState::Cut);

    auto img = make_codec(CodecKind::OpenAIImages, CodecOptions());
    const std::string json = R"({"created":1,"data":[{"b64_json":"aGk="}],"usage":{"input_tokens":5}})";
    EXPECT_EQ(drive(*img, 200, "application/json", json), json);
    EXPECT_EQ(img->result().end, EndState::Complete);
    EXPECT_FALSE(img->result().usage.present);   // media routes count requests only

    auto broken = make_codec(CodecKind::OpenAIImages, CodecOptions());
    drive(*broken, 200, "application/json", "{\"data\":[");
    EXPECT_EQ(broken->result().end, EndState::Invalid);
    EXPECT_EQ(broken->result().status, 502);

    auto text = make_codec(CodecKind::OpenAITranscription, CodecOptions());
    EXPECT_EQ(drive(*text, 200, "text/plain; charset=utf-8", "hello world"), "hello world");
    auto sse = make_codec(CodecKind::OpenAITranscription, CodecOptions());
    std::string out = drive(*sse, 200, "text/event-stream", "data: {\"type\":\"transcript.text.delta\"}\n\n", BodyEnd::Cut);
    EXPECT_TRUE(sse->event_stream());
    EXPECT_NE(out.find("event: error"), std::string::npos);

    auto err = make_codec(CodecKind::OpenAITranscription, CodecOptions());
    std::string e = drive(*err, 400, "application/json", R"({"error":{"message":"bad audio","type":"invalid_request_error"}})");
    EXPECT_EQ(err->result().end, EndState::UpstreamError);
    EXPECT_NE(e.find("bad audio"), std::string::npos);
}

// Audio's head goes out with its first bytes: cut or broken before them,
// nothing reached the caller and the answer is refused with the 502
// envelope, as a whole answer is; after them, the relayed bytes stay as
// they are (Cut, Invalid: the shell closes the connection).
TEST(MediaCodec, RelayedAnswerCutBeforeItsFirstBytes) {
    const std::string envelope = "{\"error\":{\"message\":\"the upstream provider sent an invalid response\","
                                 "\"type\":\"upstream_error\",\"code\":\"bad_gateway\",\"param\":null}}";
    for (CodecKind k : {CodecKind::OpenAISpeech, CodecKind::OpenAITranscription}) {
        auto c = make_codec(k, CodecOptions());
        EXPECT_EQ(c->head(200, "audio/mpeg"), BodyMode::Stream);
        EXPECT_TRUE(c->head_waits_for_bytes());
        std::string out;
        c->feed("", out);
        c->finish(BodyEnd::Cut, out);
        EXPECT_EQ(out, envelope);
        EXPECT_EQ(c->result().end, EndState::Invalid);
        EXPECT_EQ(c->result().status, 502);
        EXPECT_EQ(c->result().content_type, "application/json");
        EXPECT_EQ(c->result().text, "the response body ended before completion");
    }
    auto broken = make_codec(CodecKind::OpenAISpeech, CodecOptions());
    EXPECT_EQ(drive(*broken, 200, "audio/wav", "", BodyEnd::Invalid), envelope);
    EXPECT_EQ(broken->result().end, EndState::Invalid);
    EXPECT_EQ(broken->result().text, "invalid framing of the response body");
    // A complete empty answer is complete.
    auto empty = make_codec(CodecKind::OpenAISpeech, CodecOptions());
    EXPECT_EQ(drive(*empty, 200, "audio/mpeg", ""), "");
    EXPECT_EQ(empty->result().end, EndState::Complete);
    // After one byte: relayed as it came.
    auto late = make_codec(CodecKind::OpenAISpeech, CodecOptions());
    EXPECT_EQ(drive(*late, 200, "audio/mpeg", "\x01", BodyEnd::Cut), "\x01");
    EXPECT_EQ(late->result().end, EndState::Cut);
    auto late_broken = make_codec(CodecKind::OpenAISpeech, CodecOptions());
    EXPECT_EQ(drive(*late_broken, 200, "audio/mpeg", "\x01", BodyEnd::Invalid), "\x01");
    EXPECT_EQ(late_broken->result().end, EndState::Invalid);
    // An SSE transcription sends its head at once, and closes with its error event.
    auto sse = make_codec(CodecKind::OpenAITranscription, CodecOptions());
    EXPECT_EQ(sse->head(200, "text/event-stream"), BodyMode::Stream);
    EXPECT_FALSE(sse->head_waits_for_bytes());
    std::string out;
    sse->finish(BodyEnd::Cut, out);
    EXPECT_EQ(sse->result().end, EndState::Cut);
    EXPECT_EQ(out.rfind("event: error\n", 0), 0u) << out;
    // No other codec holds its head back.
    for (CodecKind k : {CodecKind::OpenAIChat, CodecKind::Passthrough, CodecKind::Relay}) {
        CodecOptions o;
        o.client_stream = true;
        auto c = make_codec(k, o);
        c->head(200, "text/event-stream");
        EXPECT_FALSE(c->head_waits_for_bytes()) << codec_kind_name(k);
    }
}

TEST(ProviderGroups, RestrictToGroupKeepsOpenTargets) {
    ProviderConf open, closed;
    open.name = "a";
    closed.name = "b";
    closed.restricted = true;
    closed.groups = {"team"};
    Resolution r;
    Target t1{&closed, "m", "b/m"}, t2{&open, "m", "a/m"};
    r.targets = {t1, t2};
    static_cast<Target&>(r) = t1;
    Resolution other = r;
    ASSERT_TRUE(restrict_to_group(other, "default"));
    EXPECT_EQ(other.provider, &open);
    EXPECT_EQ(other.targets.size(), 1u);
    Resolution mine = r;
    ASSERT_TRUE(restrict_to_group(mine, "team"));
    EXPECT_EQ(mine.provider, &closed);
    EXPECT_EQ(mine.targets.size(), 2u);
    Resolution none;
    none.targets = {t1};
    EXPECT_FALSE(restrict_to_group(none, "default"));
}
