#include <gtest/gtest.h>

#include <string>

#include "core/http/multipart.h"

namespace llmgw {
namespace {

std::string part(std::string_view b, std::string_view disposition, std::string_view value,
                 std::string_view extra_headers = "") {
    std::string s = "--" + std::string(b) + "\r\nContent-Disposition: " + std::string(disposition) + "\r\n";
    s += extra_headers;
    s += "\r\n";
    s += value;
    s += "\r\n";
    return s;
}

std::string close(std::string_view b) { return "--" + std::string(b) + "--\r\n"; }

const std::string kB = "----formdata-undici-0123456789";

TEST(FormDataBoundary, ExactMediaTypeAndBoundary) {
    EXPECT_EQ(form_data_boundary("multipart/form-data; boundary=abc"), "abc");
    EXPECT_EQ(form_data_boundary("Multipart/Form-Data;boundary=\"a b'c\""), "a b'c");
    EXPECT_EQ(form_data_boundary("multipart/form-data ; charset=utf-8; boundary=x-y"), "x-y");
    EXPECT_EQ(form_data_boundary("multipart/form-data"), "");
    EXPECT_EQ(form_data_boundary("multipart/form-data; boundary="), "");
    EXPECT_EQ(form_data_boundary("multipart/mixed; boundary=abc"), "");
    EXPECT_EQ(form_data_boundary("multipart/form-datax; boundary=abc"), "");
    EXPECT_EQ(form_data_boundary("application/json"), "");
    EXPECT_EQ(form_data_boundary("multipart/form-data; boundary=\"unclosed"), "");
    EXPECT_EQ(form_data_boundary("multipart/form-data; boundary=a; boundary=b"), "");
    EXPECT_EQ(form_data_boundary("multipart/form-data; boundary=" + std::string(71, 'a')), "");
    EXPECT_EQ(form_data_boundary("multipart/form-data; boundary=" + std::string(70, 'a')), std::string(70, 'a'));
    EXPECT_EQ(form_data_boundary("multipart/form-data; boundary=a\x01z"), "");
    EXPECT_EQ(form_data_boundary("multipart/form-data; boundary=\"trailing \""), "");
}

TEST(FormScan, FindsTheModelValueAndItsOffsets) {
    std::string body = part(kB, "form-data; name=\"file\"; filename=\"a.wav\"", std::string("RIFF\0\r\n--x", 11),
                            "Content-Type: audio/wav\r\n") +
                       part(kB, "form-data; name=\"model\"", "fast") + part(kB, "form-data; name=language", "en") +
                       close(kB);
    FormScan s = scan_form_data(body, kB);
    ASSERT_EQ(s.status, FormStatus::Ok);
    EXPECT_EQ(s.parts, 3u);
    EXPECT_EQ(s.model, "fast");
    EXPECT_EQ(body.substr(s.model_at, s.model_len), "fast");
    EXPECT_FALSE(s.model_truncated);
}

TEST(FormScan, PreambleEpilogueAndPadding) {
    std::string body = "preamble text\r\n" + part(kB, "form-data; name=\"model\"", "m1");
    body += "--" + kB + "--  trailing epilogue";
    FormScan s = scan_form_data(body, kB);
    ASSERT_EQ(s.status, FormStatus::Ok);
    EXPECT_EQ(s.model, "m1");
    std::string padded = "--" + kB + " \t\r\nContent-Disposition: form-data; name=model\r\n\r\nm2\r\n" + close(kB);
    s = scan_form_data(padded, kB);
    ASSERT_EQ(s.status, FormStatus::Ok);
    EXPECT_EQ(s.model, "m2");
}

TEST(FormScan, MissingEmptyAndDuplicateModel) {
    EXPECT_EQ(scan_form_data(part(kB, "form-data; name=\"file\"", "x") + close(kB), kB).status, FormStatus::NoModel);
    EXPECT_EQ(scan_form_data(part(kB, "form-data; name=\"model\"", "") + close(kB), kB).status, FormStatus::NoModel);
    std::string dup = part(kB, "form-data; name=\"model\"", "a") + part(kB, "form-data; name=\"model\"", "b") + close(kB);
    EXPECT_EQ(scan_form_data(dup, kB).status, FormStatus::DuplicateModel);
    // Field names are case-sensitive: "Model" is another field.
    EXPECT_EQ(scan_form_data(part(kB, "form-data; name=\"Model\"", "a") + close(kB), kB).status, FormStatus::NoModel);
}

TEST(FormScan, MalformedBodies) {
    const std::string ok = part(kB, "form-data; name=\"model\"", "m") + close(kB);
    EXPECT_EQ(scan_form_data(ok, kB).status, FormStatus::Ok);
    // Every strict prefix is truncated: never Ok.
    for (std::size_t n = 0; n + 2 < ok.size(); ++n) {
        EXPECT_EQ(scan_form_data(ok.substr(0, n), kB).status, FormStatus::Malformed) << n;
    }
    EXPECT_EQ(scan_form_data("", kB).status, FormStatus::Malformed);
    EXPECT_EQ(scan_form_data("{\"model\":\"m\"}", kB).status, FormStatus::Malformed);
    EXPECT_EQ(scan_form_data(ok, "other").status, FormStatus::Malformed);
    EXPECT_EQ(scan_form_data(ok, "").status, FormStatus::Malformed);
    // No parts at all.
    EXPECT_EQ(scan_form_data(close(kB), kB).status, FormStatus::Malformed);
    // A part without headers, without Content-Disposition, not form-data, without a name.
    EXPECT_EQ(scan_form_data("--" + kB + "\r\n\r\nm\r\n" + close(kB), kB).status, FormStatus::Malformed);
    EXPECT_EQ(scan_form_data("--" + kB + "\r\nContent-Type: text/plain\r\n\r\nm\r\n" + close(kB), kB).status,
              FormStatus::Malformed);
    EXPECT_EQ(scan_form_data(part(kB, "attachment; name=\"model\"", "m") + close(kB), kB).status, FormStatus::Malformed);
    EXPECT_EQ(scan_form_data(part(kB, "form-data", "m") + close(kB), kB).status, FormStatus::Malformed);
    EXPECT_EQ(scan_form_data(part(kB, "form-data; name=\"model", "m") + close(kB), kB).status, FormStatus::Malformed);
    EXPECT_EQ(scan_form_data(part(kB, "form-data; name=a; name=model", "m") + close(kB), kB).status,
              FormStatus::Malformed);
    // A header line without a colon, a folded line, two Content-Dispositions.
    EXPECT_EQ(scan_form_data(part(kB, "form-data; name=model", "m", "garbage\r\n") + close(kB), kB).status,
              FormStatus::Malformed);
    EXPECT_EQ(scan_form_data(part(kB, "form-data; name=model", "m", " folded: x\r\n") + close(kB), kB).status,
              FormStatus::Malformed);
    EXPECT_EQ(scan_form_data(part(kB, "form-data; name=model", "m", "Content-Disposition: form-data; name=x\r\n") +
                                 close(kB),
                             kB)
                  .status,
              FormStatus::Malformed);
    // The boundary followed by other characters is not a delimiter line.
    EXPECT_EQ(scan_form_data("--" + kB + "X\r\nContent-Disposition: form-data; name=model\r\n\r\nm\r\n" + close(kB), kB)
                  .status,
              FormStatus::Malformed);
    // LF-only line ends.
    EXPECT_EQ(scan_form_data("--" + kB + "\nContent-Disposition: form-data; name=model\n\nm\n--" + kB + "--\n", kB).status,
              FormStatus::Malformed);
    // A malformed part after a duplicate: malformed wins.
    std::string dup = part(kB, "form-data; name=model", "a") + part(kB, "form-data; name=model", "b") + "--" + kB +
                      "\r\nbroken\r\n\r\nx\r\n" + close(kB);
    EXPECT_EQ(scan_form_data(dup, kB).status, FormStatus::Malformed);
}

TEST(FormScan, BoundsOnHeadersPartsAndTheModelValue) {
    std::string big_header = "X-Pad: " + std::string(kMaxPartHeaderBytes, 'a') + "\r\n";
    EXPECT_EQ(scan_form_data(part(kB, "form-data; name=model", "m", big_header) + close(kB), kB).status,
              FormStatus::Malformed);
    std::string many;
    for (std::size_t i = 0; i <= kMaxFormParts; ++i) many += part(kB, "form-data; name=f", "x");
    EXPECT_EQ(scan_form_data(many + part(kB, "form-data; name=model", "m") + close(kB), kB).status,
              FormStatus::Malformed);
    std::string long_model(kMaxModelBytes + 10, 'q');
    FormScan s = scan_form_data(part(kB, "form-data; name=model", long_model) + close(kB), kB);
    ASSERT_EQ(s.status, FormStatus::Ok);
    EXPECT_TRUE(s.model_truncated);
    EXPECT_EQ(s.model.size(), kMaxModelBytes);
    EXPECT_EQ(s.model_len, long_model.size());
}

TEST(FormScan, BinaryAndInvalidUtf8ContentIsOpaque) {
    std::string blob;
    for (int i = 0; i < 4096; ++i) blob.push_back(static_cast<char>(i * 131 % 256));
    blob += "\r\n--" + kB.substr(0, 5);   // a near-delimiter inside the content
    std::string body = part(kB, "form-data; name=\"file\"; filename=\"\xff\xfe.bin\"", blob) +
                       part(kB, "form-data; name=model", "whisper-1") + close(kB);
    FormScan s = scan_form_data(body, kB);
    ASSERT_EQ(s.status, FormStatus::Ok);
    EXPECT_EQ(s.model, "whisper-1");
    EXPECT_EQ(s.parts, 2u);
}

}  // namespace
}  // namespace llmgw
