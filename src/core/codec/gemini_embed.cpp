#include "core/codec/gemini_embed.h"

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "core/codec/gemini_json.h"

namespace llmgw {

namespace rj = rapidjson;
using gemini::JsonOut;
using gemini::get;
using gemini::sv;

namespace {

void content(JsonOut& o, std::string_view text) {
    o.key("content").begin_object().key("parts").begin_array();
    o.begin_object().key("text").str(text).end_object();
    o.end_array().end_object();
}

// A value a float32 can hold (finite), for the embedding vectors.
bool float_value(const rj::Value& v) {
    if (!v.IsNumber()) return false;
    const double d = v.GetDouble();
    return std::isfinite(d) && std::fabs(d) <= FLT_MAX;
}

void base64_floats(const rj::Value& values, std::string& out) {
    static const char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string bytes;
    bytes.reserve(values.Size() * 4);
    for (const rj::Value& v : values.GetArray()) {
        const float f = static_cast<float>(v.GetDouble());
        std::uint32_t u;
        std::memcpy(&u, &f, sizeof u);
        for (int i = 0; i < 4; ++i) bytes += static_cast<char>((u >> (8 * i)) & 0xff);
    }
    out.clear();
    out.reserve((bytes.size() + 2) / 3 * 4);
    std::size_t i = 0;
    for (; i + 3 <= bytes.size(); i += 3) {
        const std::uint32_t n = (static_cast<unsigned char>(bytes[i]) << 16) |
                                (static_cast<unsigned char>(bytes[i + 1]) << 8) | static_cast<unsigned char>(bytes[i + 2]);
        out += kAlphabet[(n >> 18) & 63];
        out += kAlphabet[(n >> 12) & 63];
        out += kAlphabet[(n >> 6) & 63];
        out += kAlphabet[n & 63];
    }
    if (i < bytes.size()) {
        std::uint32_t n = static_cast<unsigned char>(bytes[i]) << 16;
        if (i + 1 < bytes.size()) n |= static_cast<unsigned char>(bytes[i + 1]) << 8;
        out += kAlphabet[(n >> 18) & 63];
        out += kAlphabet[(n >> 12) & 63];
        out += i + 1 < bytes.size() ? kAlphabet[(n >> 6) & 63] : '=';
        out += '=';
    }
}

// embedding.values of one ContentEmbedding, checked; nullptr + err when broken.
const rj::Value* vector_of(const rj::Value& emb, std::string& err) {
    if (!emb.IsObject()) return err = "an embedding is not an object", nullptr;
    const rj::Value* values = get(emb, "values");
    if (values == nullptr || !values->IsArray()) return err = "an embedding has no values array", nullptr;
    for (const rj::Value& v : values->GetArray())
        if (!float_value(v)) return err = "an embedding value is not a finite float", nullptr;
    return values;
}

}  // namespace

bool gemini_embed_request_from_openai(const rj::Value& req, std::string_view model, std::size_t& batch,
        std::string& body, std::string& err) {
    try {
        body.clear();
        batch = 0;
        if (!req.IsObject()) return err = "request body must be a JSON object", false;
        const rj::Value* input = get(req, "input");
        if (input == nullptr || !(input->IsString() || input->IsArray()))
            return err = "input must be a string or an array of strings", false;
        if (input->IsArray()) {
            if (input->Empty()) return err = "input must not be empty", false;
            for (const rj::Value& v : input->GetArray()) {
                if (v.IsString()) continue;
                if (v.IsNumber() || v.IsArray()) return err = "input as token ids is not supported by Gemini models", false;
                return err = "input must be a string or an array of strings", false;
            }
        }
        std::int64_t dims = 0;
        if (const rj::Value* d = get(req, "dimensions")) {
            if (!d->IsInt64() || d->GetInt64() < 1 || d->GetInt64() > INT32_MAX)
                return err = "dimensions must be an integer from 1 to 2147483647", false;
            dims = d->GetInt64();
        }
        if (const rj::Value* f = get(req, "encoding_format")) {
            if (!f->IsString() || (sv(*f) != "float" && sv(*f) != "base64"))
                return err = "encoding_format must be \"float\" or \"base64\"", false;
        }
        JsonOut o;
        o.begin_object();
        if (input->IsString()) {
            content(o, sv(*input));
            if (dims > 0) o.key("outputDimensionality").i64(dims);
        } else {
            if (model.empty()) return err = "model must not be empty", false;
            std::string name = "models/";
            name.append(model);
            o.key("requests").begin_array();
            for (const rj::Value& v : input->GetArray()) {
                o.begin_object().key("model").str(name);
                content(o, sv(v));
                if (dims > 0) o.key("outputDimensionality").i64(dims);
                o.end_object();
            }
            o.end_array();
            batch = input->Size();
        }
        o.end_object();
        body = o.take();
        return true;
    } catch (const std::exception&) {
        return gemini::translation_failed(body, err, gemini::kCannotTranslate);
    }
}

bool openai_embeddings_from_gemini(std::string_view body, std::size_t batch, bool base64, std::string_view client_model,
        std::string& out, Usage& usage, std::string& err) {
    try {
        out.clear();
        usage = Usage();
        rj::Document doc;
        if (!gemini::parse_json(body, doc)) return err = "the answer is not JSON", false;
        if (!doc.IsObject()) return err = "the answer is not a JSON object", false;
        std::vector<const rj::Value*> vectors;
        if (batch > 0) {
            const rj::Value* list = get(doc, "embeddings");
            if (list == nullptr || !list->IsArray()) return err = "the answer has no embeddings array", false;
            // Vectors are matched to inputs by position: another number of
            // them answers some other request.
            if (list->Size() != batch) {
                err = "the number of embeddings (" + std::to_string(list->Size()) + ") is not the number of inputs (" +
                      std::to_string(batch) + ")";
                return false;
            }
            for (const rj::Value& e : list->GetArray()) {
                const rj::Value* v = vector_of(e, err);
                if (v == nullptr) return false;
                vectors.push_back(v);
            }
        } else {
            const rj::Value* e = get(doc, "embedding");
            if (e == nullptr) return err = "the answer has no embedding", false;
            const rj::Value* v = vector_of(*e, err);
            if (v == nullptr) return false;
            vectors.push_back(v);
        }
        JsonOut o;
        std::string b64;
        o.begin_object().key("object").str("list").key("data").begin_array();
        for (std::size_t i = 0; i < vectors.size(); ++i) {
            o.begin_object().key("object").str("embedding").key("index").i64(static_cast<std::int64_t>(i));
            o.key("embedding");
            if (base64) {
                base64_floats(*vectors[i], b64);
                o.str(b64);
            } else {
                o.begin_array();
                for (const rj::Value& v : vectors[i]->GetArray()) o.real(v.GetDouble());
                o.end_array();
            }
            o.end_object();
        }
        o.end_array().key("model").str(client_model);
        o.key("usage").begin_object().key("prompt_tokens").i64(0).key("total_tokens").i64(0).end_object();
        o.end_object();
        out = o.take();
        return true;
    } catch (const std::exception&) {
        return gemini::translation_failed(out, err, "the answer cannot be processed");
    }
}

}  // namespace llmgw
