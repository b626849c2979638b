// The s3:// backend: S3's REST API over libcurl, signed with libcurl's own
// AWS Signature V4 (CURLOPT_AWS_SIGV4).
//
// What libcurl 7.88's signer leaves to the caller, and this file does:
// - it does not add x-amz-content-sha256, which S3 requires: every request
//   carries the hex SHA-256 of its body, which the signer then signs;
// - it signs the query string as written, without sorting or encoding it:
//   every query here is built sorted by name and encoded (RFC 3986), and a
//   parameter without a value is written "name=" ("?uploads=");
// - it signs the headers it is given, so none may be suppressed (an empty
//   "Expect:" is signed but not sent, and the signature no longer matches).
#include <curl/curl.h>
#include <glog/logging.h>
#include <openssl/evp.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <utility>

#include "base/xml.h"
#include "io/s3_xml.h"
#include "io/storage.h"

namespace keel {
namespace {

// S3's bounds on a part of a multipart upload (all but the last part).
constexpr uint64_t kMinPartSize = uint64_t{5} << 20;
constexpr uint64_t kMaxPartSize = uint64_t{5} << 30;

constexpr char kEmptySha256[] = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

std::string HexSha256(std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_Digest(data.data(), data.size(), digest, &length, EVP_sha256(), nullptr) != 1) {
    throw MakeError("SHA-256 of ", data.size(), " bytes failed in libcrypto");
  }
  static const char kHex[] = "0123456789abcdef";
  std::string text;
  for (unsigned int i = 0; i < length; ++i) {
    text += kHex[digest[i] >> 4];
    text += kHex[digest[i] & 15];
  }
  return text;
}

// RFC 3986 percent-encoding, as SigV4 wants it; '/' is kept when `keep_slash`.
std::string Encode(std::string_view text, bool keep_slash) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const char c : text) {
    const unsigned char byte = static_cast<unsigned char>(c);
    if (std::isalnum(byte) || c == '-' || c == '_' || c == '.' || c == '~' ||
        (keep_slash && c == '/')) {
      out += c;
    } else {
      out += '%';
      out += kHex[byte >> 4];
      out += kHex[byte & 15];
    }
  }
  return out;
}

std::string Lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

std::string Trim(std::string_view text) {
  size_t begin = 0, end = text.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(text[begin]))) ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(text[end - 1]))) --end;
  return std::string(text.substr(begin, end - begin));
}

void InitializeCurl() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
      throw MakeError("libcurl: global initialization failed");
    }
  });
}

struct Request {
  std::string method;  // GET, HEAD, PUT, POST, DELETE
  std::string object;  // the object's full name in the bucket; empty: the bucket
  std::vector<std::pair<std::string, std::string>> query;
  std::string_view body;
  std::vector<std::string> headers;  // "Name: value"
};

struct Response {
  long status = 0;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // names lower case

  std::string Header(const std::string& name) const {
    for (const auto& [key, value] : headers) {
      if (key == name) return value;
    }
    return "";
  }
};

// Upload state for CURLOPT_READFUNCTION.
struct Upload {
  std::string_view data;
  size_t position = 0;
};

size_t ReadBody(char* buffer, size_t size, size_t count, void* user) {
  Upload* upload = static_cast<Upload*>(user);
  const size_t n = std::min(size * count, upload->data.size() - upload->position);
  std::memcpy(buffer, upload->data.data() + upload->position, n);
  upload->position += n;
  return n;
}

int SeekBody(void* user, curl_off_t offset, int origin) {
  Upload* upload = static_cast<Upload*>(user);
  if (origin != SEEK_SET || offset < 0 || static_cast<size_t>(offset) > upload->data.size()) {
    return CURL_SEEKFUNC_CANTSEEK;
  }
  upload->position = static_cast<size_t>(offset);
  return CURL_SEEKFUNC_OK;
}

size_t WriteBody(char* data, size_t size, size_t count, void* user) {
  static_cast<Response*>(user)->body.append(data, size * count);
  return size * count;
}

size_t WriteHeader(char* data, size_t size, size_t count, void* user) {
  Response* response = static_cast<Response*>(user);
  const std::string_view line(data, size * count);
  if (line.rfind("HTTP/", 0) == 0) {
    response->headers.clear();  // a new response (after "100 Continue")
  } else if (const size_t colon = line.find(':'); colon != std::string_view::npos) {
    response->headers.emplace_back(Lower(std::string(line.substr(0, colon))),
                                   Trim(line.substr(colon + 1)));
  }
  return size * count;
}

class S3Storage : public Storage {
 public:
  S3Storage(std::string bucket, std::string prefix, S3Options options)
      : bucket_(std::move(bucket)), prefix_(std::move(prefix)), options_(std::move(options)) {
    InitializeCurl();
    std::string endpoint = options_.endpoint;
    while (!endpoint.empty() && endpoint.back() == '/') endpoint.pop_back();
    if (endpoint.empty()) endpoint = "https://s3." + options_.region + ".amazonaws.com";
    const size_t scheme = endpoint.find("://");
    if (scheme == std::string::npos) endpoint = "https://" + endpoint;
    const bool path_style =
        options_.addressing == S3Options::Addressing::kPath ||
        (options_.addressing == S3Options::Addressing::kAuto && !options_.endpoint.empty());
    path_style_ = path_style;
    if (path_style) {
      base_url_ = endpoint + "/" + Encode(bucket_, false);
    } else {
      const size_t host = endpoint.find("://") + 3;
      base_url_ = endpoint.substr(0, host) + bucket_ + "." + endpoint.substr(host);
    }
    if (!options_.access_key_id.empty() && !options_.secret_access_key.empty()) {
      signer_ = "aws:amz:" + options_.region + ":s3";
    }
  }

  ~S3Storage() override {
    for (CURL* handle : idle_) curl_easy_cleanup(handle);
  }

  void Put(const std::string& key, std::string_view data) override {
    if (data.size() > options_.multipart_threshold) {
      PutPieces(key, [data](const PieceSink& sink) { sink(data); });
      return;
    }
    const Response response = Perform(Request{"PUT", ObjectOf(key), {}, data, {}}, UriOf(key));
    if (response.status != 200) Fail("PUT", UriOf(key), response);
  }

  // Holds at most max(multipart_threshold, part_size) bytes of the object:
  // one PUT while it stays within the threshold, else a multipart upload
  // whose parts go up as they fill (a piece that covers a whole part is sent
  // from the producer's memory, not copied). Any failure aborts the upload.
  void PutPieces(const std::string& key,
                 const std::function<void(const PieceSink&)>& produce) override {
    PieceUpload upload{key, ObjectOf(key), UriOf(key)};
    try {
      produce([this, &upload](std::string_view piece) { AddPiece(&upload, piece); });
      if (upload.failed) throw MakeError(upload.uri, ": a part failed, the upload is abandoned");
      FinishPieces(&upload);
    } catch (...) {
      if (!upload.upload_id.empty()) Abort(upload.uri, upload.object, upload.upload_id);
      throw;
    }
  }

  std::string Get(const std::string& key) override {
    Response response = Perform(Request{"GET", ObjectOf(key), {}, {}, {}}, UriOf(key));
    if (response.status != 200) Fail("GET", UriOf(key), response);
    return std::move(response.body);
  }

  std::string GetRange(const std::string& key, uint64_t offset, uint64_t length) override {
    if (length == 0) return "";
    const uint64_t last = length > UINT64_MAX - offset ? UINT64_MAX - 1 : offset + length - 1;
    Request request{"GET", ObjectOf(key), {}, {}, {}};
    request.headers.push_back("Range: bytes=" + std::to_string(offset) + "-" +
                              std::to_string(last));
    Response response = Perform(request, UriOf(key));
    if (response.status == 416) return "";  // the range starts past the end
    if (response.status == 206) return std::move(response.body);
    if (response.status == 200) {  // a store that ignores Range sends everything
      if (offset >= response.body.size()) return "";
      return response.body.substr(offset, length);
    }
    Fail("GET", UriOf(key), response);
  }

  std::vector<ObjectInfo> List(const std::string& prefix) override {
    std::vector<ObjectInfo> objects;
    std::string token;
    do {
      Request request{"GET", "", {}, {}, {}};
      request.query = {{"list-type", "2"},
                       {"max-keys", std::to_string(options_.list_page_size)},
                       {"prefix", prefix_ + prefix}};
      if (!token.empty()) request.query.emplace_back("continuation-token", token);
      const Response response = Perform(request, UriOf(prefix));
      if (response.status != 200) Fail("LIST", UriOf(prefix), response);
      for (const std::string_view contents : XmlElements(response.body, "Contents")) {
        const std::string name = XmlText(contents, "Key");
        if (name.compare(0, prefix_.size(), prefix_) != 0) {
          throw MakeError(UriOf(prefix), ": listing returned key '", name, "' outside the prefix");
        }
        ObjectInfo info{name.substr(prefix_.size()), 0, ""};
        info.size = std::strtoull(XmlText(contents, "Size").c_str(), nullptr, 10);
        info.version = XmlText(contents, "ETag") + " " + XmlText(contents, "LastModified");
        objects.push_back(std::move(info));
      }
      const bool truncated = XmlText(response.body, "IsTruncated") == "true";
      const std::string next = truncated ? XmlText(response.body, "NextContinuationToken") : "";
      if (truncated && (next.empty() || next == token)) {
        throw MakeError(UriOf(prefix),
                        ": listing is truncated but gives no new continuation token");
      }
      token = next;
    } while (!token.empty());
    std::sort(objects.begin(), objects.end(),
              [](const ObjectInfo& a, const ObjectInfo& b) { return a.key < b.key; });
    return objects;
  }

  void Delete(const std::string& key) override {
    const Response response = Perform(Request{"DELETE", ObjectOf(key), {}, {}, {}}, UriOf(key));
    // S3 answers 204 whether or not the object was there; a store that says
    // NoSuchKey agrees that it is gone.
    if (response.status == 204 || response.status == 200) return;
    if (response.status == 404 && ErrorCode(response) == "NoSuchKey") return;
    Fail("DELETE", UriOf(key), response);
  }

  std::string UriOf(const std::string& key) const override {
    return "s3://" + bucket_ + "/" + prefix_ + key;
  }

 private:
  std::string ObjectOf(const std::string& key) const {
    if (key.empty()) throw MakeError(UriOf(""), ": empty object key");
    return prefix_ + key;
  }

  static std::string ErrorCode(const Response& response) { return XmlText(response.body, "Code"); }

  // Throws the error an unexpected response means: NotFoundError for 404,
  // else an Error with S3's code and message.
  [[noreturn]] void Fail(const std::string& operation, const std::string& uri,
                         const Response& response) const {
    const std::string code = ErrorCode(response);
    const std::string message = XmlText(response.body, "Message");
    std::string detail = "HTTP " + std::to_string(response.status);
    if (!code.empty()) detail += " " + code;
    if (!message.empty()) detail += ": " + message;
    if (response.status == 404) {
      if (code == "NoSuchBucket") {
        throw NotFoundError(uri + ": no such bucket '" + bucket_ + "' (" + detail + ")");
      }
      throw NotFoundError(uri + ": no such object (" + detail + ")");
    }
    if (response.status == 403) {
      throw MakeError(uri, ": ", operation, " refused by S3, check the credentials and the ",
                      "permissions on bucket '", bucket_, "' (", detail, ")");
    }
    throw MakeError(uri, ": ", operation, " failed (", detail, ")");
  }

  // S3 stores at most this many parts of an object.
  static constexpr int kMaxParts = 10000;

  // An object PutPieces is writing: the bytes not sent yet and, once it
  // outgrew the multipart threshold, its multipart upload.
  struct PieceUpload {
    std::string key, object, uri;
    std::string pending = {};
    std::string upload_id = {};   // empty: no multipart upload (yet)
    int parts = 0;                // sent
    std::string completion = {};  // the <Part> elements of CompleteMultipartUpload
    bool failed = false;          // a part failed (the sink threw)
  };

  void AddPiece(PieceUpload* upload, std::string_view piece) {
    if (upload->failed) throw MakeError(upload->uri, ": a part failed, the upload is abandoned");
    try {
      const uint64_t part_size = options_.part_size;
      while (!piece.empty()) {
        if (upload->upload_id.empty()) {
          // Gathering for a single PUT, until the object outgrows the threshold.
          const size_t take = static_cast<size_t>(std::min<uint64_t>(
              piece.size(), options_.multipart_threshold - upload->pending.size()));
          upload->pending.append(piece.substr(0, take));
          piece.remove_prefix(take);
          if (!piece.empty()) StartMultipart(upload);
        } else if (upload->pending.empty() && piece.size() >= part_size) {
          PutPart(upload, piece.substr(0, part_size));
          piece.remove_prefix(part_size);
        } else {
          const size_t take = static_cast<size_t>(
              std::min<uint64_t>(piece.size(), part_size - upload->pending.size()));
          upload->pending.append(piece.substr(0, take));
          piece.remove_prefix(take);
          if (upload->pending.size() == part_size) {
            PutPart(upload, upload->pending);
            upload->pending.clear();  // keeps its capacity for the next part
          }
        }
      }
    } catch (...) {
      upload->failed = true;
      throw;
    }
  }

  // Starts the multipart upload and sends the whole parts gathered so far.
  void StartMultipart(PieceUpload* upload) {
    const Response started =
        Perform(Request{"POST", upload->object, {{"uploads", ""}}, {}, {}}, upload->uri);
    if (started.status != 200) Fail("multipart upload start", upload->uri, started);
    upload->upload_id = XmlText(started.body, "UploadId");
    if (upload->upload_id.empty()) {
      throw MakeError(upload->uri, ": multipart upload start returned no UploadId");
    }
    size_t sent = 0;
    for (; upload->pending.size() - sent >= options_.part_size; sent += options_.part_size) {
      PutPart(upload, std::string_view(upload->pending).substr(sent, options_.part_size));
    }
    upload->pending.erase(0, sent);
  }

  // UploadPart of the next part, tried again as every request is (Perform).
  void PutPart(PieceUpload* upload, std::string_view bytes) {
    const int number = upload->parts + 1;
    if (number > kMaxParts) {
      throw MakeError(upload->uri, ": more than ", kMaxParts, " parts of ", options_.part_size,
                      " bytes (S3's limit); set KEEL_S3_PART_SIZE higher");
    }
    const std::string name = upload->uri + ", part " + std::to_string(number);
    Request part{"PUT", upload->object, {}, bytes, {}};
    part.query = {{"partNumber", std::to_string(number)}, {"uploadId", upload->upload_id}};
    const Response response = Perform(part, name);
    if (response.status != 200) {
      Fail("upload of part " + std::to_string(number), upload->uri, response);
    }
    const std::string etag = response.Header("etag");
    if (etag.empty()) throw MakeError(name, ": stored without an ETag");
    upload->completion += "<Part><PartNumber>" + std::to_string(number) + "</PartNumber><ETag>" +
                          XmlEscape(etag) + "</ETag></Part>";
    upload->parts = number;
  }

  // The single PUT, or the last part and CompleteMultipartUpload.
  void FinishPieces(PieceUpload* upload) {
    if (upload->upload_id.empty()) {
      const Response response =
          Perform(Request{"PUT", upload->object, {}, upload->pending, {}}, upload->uri);
      if (response.status != 200) Fail("PUT", upload->uri, response);
      return;
    }
    if (!upload->pending.empty() || upload->parts == 0) PutPart(upload, upload->pending);
    const std::string parts =
        "<CompleteMultipartUpload>" + upload->completion + "</CompleteMultipartUpload>";
    Request complete{"POST", upload->object, {{"uploadId", upload->upload_id}}, parts, {}};
    complete.headers.push_back("Content-Type: application/xml");
    const Response response = Perform(complete, upload->uri);
    // S3 may answer 200 and report the failure in the body.
    if (response.status != 200 || !XmlElements(response.body, "Error").empty()) {
      Response failed = response;
      if (failed.status == 200) failed.status = 500;
      Fail("multipart upload completion", upload->uri, failed);
    }
  }

  void Abort(const std::string& uri, const std::string& object, const std::string& upload_id) {
    try {
      const Response response =
          Perform(Request{"DELETE", object, {{"uploadId", upload_id}}, {}, {}}, uri);
      if (response.status != 204 && response.status != 200) {
        LOG(WARNING) << uri << ": abort of a failed multipart upload answered HTTP "
                     << response.status << " " << ErrorCode(response);
      }
    } catch (const Error& error) {
      LOG(WARNING) << "abort of a failed multipart upload failed: " << error.what();
    }
  }

  // Sends `request`, again after a connection failure or a 5xx/429 answer,
  // up to max_retries times. Returns the last response; throws Error naming
  // `uri` if no response came.
  Response Perform(const Request& request, const std::string& uri) {
    double backoff = options_.initial_backoff_s;
    for (int attempt = 0;; ++attempt) {
      std::string transport_error;
      Response response = Attempt(request, &transport_error);
      const bool retryable =
          !transport_error.empty() || response.status >= 500 || response.status == 429;
      if (!retryable) return response;
      const std::string problem =
          transport_error.empty()
              ? "HTTP " + std::to_string(response.status) + " " + ErrorCode(response)
              : transport_error;
      if (attempt >= options_.max_retries) {
        if (!transport_error.empty()) {
          throw MakeError(uri, ": ", request.method, " failed after ", attempt + 1,
                          " attempts: ", problem);
        }
        return response;
      }
      LOG(WARNING) << uri << ": " << request.method << " attempt " << attempt + 1 << " failed ("
                   << problem << "), trying again in " << backoff << " s";
      std::this_thread::sleep_for(std::chrono::duration<double>(backoff));
      backoff = std::min(backoff * 2, options_.max_backoff_s);
    }
  }

  // One HTTP exchange. Sets *transport_error (curl's description, which never
  // holds the credentials) if no response came.
  Response Attempt(const Request& request, std::string* transport_error) {
    // What may throw comes before the handle is taken, so none is lost.
    const std::string url = UrlOf(request);
    const std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> headers(
        HeadersOf(request), curl_slist_free_all);
    CURL* handle = Acquire();
    Response response;
    Upload upload{request.body, 0};
    SetTransfer(handle, url, headers.get(), &response);
    SetMethod(handle, request, &upload);
    char error_buffer[CURL_ERROR_SIZE] = {0};
    curl_easy_setopt(handle, CURLOPT_ERRORBUFFER, error_buffer);
    const CURLcode code = curl_easy_perform(handle);
    if (code != CURLE_OK) {
      *transport_error = std::string(curl_easy_strerror(code));
      if (error_buffer[0] != '\0') *transport_error += ": " + std::string(error_buffer);
    } else {
      curl_easy_getinfo(handle, CURLINFO_RESPONSE_CODE, &response.status);
    }
    Release(handle, code == CURLE_OK);
    return response;
  }

  // The request's URL: the object's encoded path and the query, sorted by name
  // and encoded as SigV4 wants it (libcurl signs it as written).
  std::string UrlOf(const Request& request) const {
    std::string url = base_url_;
    // A bucket request's path is "/bucket" (path-style; no trailing '/', as
    // stores that rebuild the canonical path from the bucket name expect) or "/".
    if (!request.object.empty()) {
      url += "/" + Encode(request.object, true);
    } else if (!path_style_) {
      url += "/";
    }
    std::vector<std::pair<std::string, std::string>> query = request.query;
    std::sort(query.begin(), query.end());
    for (size_t i = 0; i < query.size(); ++i) {
      url += i == 0 ? '?' : '&';
      url += Encode(query[i].first, false) + "=" + Encode(query[i].second, false);
    }
    return url;
  }

  // The request's headers with the body's SHA-256 (and the session token when
  // signing); the caller frees them (curl_slist_free_all).
  curl_slist* HeadersOf(const Request& request) const {
    curl_slist* headers = nullptr;
    const std::string hash =
        request.body.empty() ? std::string(kEmptySha256) : HexSha256(request.body);
    headers = curl_slist_append(headers, ("x-amz-content-sha256: " + hash).c_str());
    if (!options_.session_token.empty() && !signer_.empty()) {
      headers =
          curl_slist_append(headers, ("x-amz-security-token: " + options_.session_token).c_str());
    }
    for (const std::string& header : request.headers) {
      headers = curl_slist_append(headers, header.c_str());
    }
    return headers;
  }

  // Where the exchange goes, its timeouts, where the answer goes, and the signer.
  void SetTransfer(CURL* handle, const std::string& url, curl_slist* headers,
                   Response* response) const {
    curl_easy_setopt(handle, CURLOPT_URL, url.c_str());
    curl_easy_setopt(handle, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(handle, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(handle, CURLOPT_CONNECTTIMEOUT_MS,
                     static_cast<long>(options_.connect_timeout_s * 1000));
    curl_easy_setopt(handle, CURLOPT_LOW_SPEED_LIMIT, 1024L);
    curl_easy_setopt(handle, CURLOPT_LOW_SPEED_TIME,
                     std::max(1L, static_cast<long>(options_.stall_timeout_s)));
    curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, WriteBody);
    curl_easy_setopt(handle, CURLOPT_WRITEDATA, response);
    curl_easy_setopt(handle, CURLOPT_HEADERFUNCTION, WriteHeader);
    curl_easy_setopt(handle, CURLOPT_HEADERDATA, response);
    if (!signer_.empty()) {
      curl_easy_setopt(handle, CURLOPT_AWS_SIGV4, signer_.c_str());
      curl_easy_setopt(handle, CURLOPT_USERNAME, options_.access_key_id.c_str());
      curl_easy_setopt(handle, CURLOPT_PASSWORD, options_.secret_access_key.c_str());
    }
  }

  // The HTTP method, and the body to send from *upload.
  static void SetMethod(CURL* handle, const Request& request, Upload* upload) {
    if (request.method == "PUT") {
      curl_easy_setopt(handle, CURLOPT_UPLOAD, 1L);
      curl_easy_setopt(handle, CURLOPT_READFUNCTION, ReadBody);
      curl_easy_setopt(handle, CURLOPT_READDATA, upload);
      curl_easy_setopt(handle, CURLOPT_SEEKFUNCTION, SeekBody);
      curl_easy_setopt(handle, CURLOPT_SEEKDATA, upload);
      curl_easy_setopt(handle, CURLOPT_INFILESIZE_LARGE,
                       static_cast<curl_off_t>(request.body.size()));
    } else if (request.method == "POST") {
      curl_easy_setopt(handle, CURLOPT_POST, 1L);
      curl_easy_setopt(handle, CURLOPT_POSTFIELDS, request.body.data());
      curl_easy_setopt(handle, CURLOPT_POSTFIELDSIZE_LARGE,
                       static_cast<curl_off_t>(request.body.size()));
    } else if (request.method == "HEAD") {
      curl_easy_setopt(handle, CURLOPT_NOBODY, 1L);
    } else if (request.method != "GET") {
      curl_easy_setopt(handle, CURLOPT_CUSTOMREQUEST, request.method.c_str());
    }
  }

  // An easy handle, reused when one is idle (it keeps its connection alive).
  CURL* Acquire() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!idle_.empty()) {
        CURL* handle = idle_.back();
        idle_.pop_back();
        return handle;
      }
    }
    CURL* handle = curl_easy_init();
    if (handle == nullptr) throw MakeError("s3://", bucket_, ": libcurl cannot create a handle");
    return handle;
  }

  void Release(CURL* handle, bool healthy) {
    if (!healthy) {
      curl_easy_cleanup(handle);
      return;
    }
    curl_easy_reset(handle);
    std::lock_guard<std::mutex> lock(mutex_);
    idle_.push_back(handle);
  }

  const std::string bucket_;
  const std::string prefix_;  // "" or ending in '/'
  const S3Options options_;
  std::string base_url_;  // up to the bucket: "http://host:port/bucket" or "https://bucket.host"
  bool path_style_ = true;
  std::string signer_;  // CURLOPT_AWS_SIGV4's value; empty: unsigned requests
  std::mutex mutex_;
  std::vector<CURL*> idle_;
};

std::string Variable(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? "" : value;
}

uint64_t ByteCount(const char* name, uint64_t fallback) {
  const std::string text = Variable(name);
  if (text.empty()) return fallback;
  char* end = nullptr;
  const unsigned long long value = std::strtoull(text.c_str(), &end, 10);
  if (*end != '\0' || value == 0 || text[0] == '-') {
    throw MakeError(name, "='", text, "': expected a positive number of bytes");
  }
  return value;
}

}  // namespace

S3Options S3Options::FromEnvironment() {
  S3Options options;
  options.access_key_id = Variable("AWS_ACCESS_KEY_ID");
  options.secret_access_key = Variable("AWS_SECRET_ACCESS_KEY");
  options.session_token = Variable("AWS_SESSION_TOKEN");
  if (const std::string region = Variable("AWS_REGION"); !region.empty()) {
    options.region = region;
  } else if (const std::string fallback = Variable("AWS_DEFAULT_REGION"); !fallback.empty()) {
    options.region = fallback;
  }
  options.endpoint = Variable("AWS_ENDPOINT_URL");
  if (options.endpoint.empty()) options.endpoint = Variable("KEEL_S3_ENDPOINT");
  const std::string addressing = Variable("KEEL_S3_ADDRESSING");
  if (addressing == "path") {
    options.addressing = Addressing::kPath;
  } else if (addressing == "virtual") {
    options.addressing = Addressing::kVirtualHost;
  } else if (!addressing.empty()) {
    throw MakeError("KEEL_S3_ADDRESSING='", addressing, "': expected path or virtual");
  }
  options.multipart_threshold =
      ByteCount("KEEL_S3_MULTIPART_THRESHOLD", options.multipart_threshold);
  options.part_size = ByteCount("KEEL_S3_PART_SIZE", options.part_size);
  if (const std::string retries = Variable("KEEL_S3_RETRIES"); !retries.empty()) {
    char* end = nullptr;
    const long value = std::strtol(retries.c_str(), &end, 10);
    if (*end != '\0' || value < 0 || value > 100) {
      throw MakeError("KEEL_S3_RETRIES='", retries, "': expected a count from 0 to 100");
    }
    options.max_retries = static_cast<int>(value);
  }
  return options;
}

std::unique_ptr<Storage> OpenS3Storage(const std::string& uri, const S3Options& options) {
  const std::string kScheme = "s3://";
  if (uri.compare(0, kScheme.size(), kScheme) != 0) {
    throw MakeError("storage '", uri, "': not an s3:// URI");
  }
  const std::string rest = uri.substr(kScheme.size());
  const size_t slash = rest.find('/');
  const std::string bucket = rest.substr(0, slash);
  if (bucket.empty())
    throw MakeError("storage '", uri, "': s3:// needs a bucket (s3://BUCKET/PREFIX)");
  for (const char c : bucket) {
    if (!(std::islower(static_cast<unsigned char>(c)) ||
          std::isdigit(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_' ||
          std::isupper(static_cast<unsigned char>(c)))) {
      throw MakeError("storage '", uri, "': bad bucket name '", bucket, "'");
    }
  }
  std::string prefix = slash == std::string::npos ? "" : rest.substr(slash + 1);
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  if (!prefix.empty()) prefix += '/';
  if (options.list_page_size < 1 || options.list_page_size > 1000) {
    throw MakeError("storage '", uri, "': list page size ", options.list_page_size,
                    " is not in [1, 1000]");
  }
  if (options.max_retries < 0) throw MakeError("storage '", uri, "': negative retry count");
  if (options.part_size < kMinPartSize || options.part_size > kMaxPartSize) {
    throw MakeError("storage '", uri, "': part size ", options.part_size,
                    " bytes is outside S3's limits, 5 MiB to 5 GiB (KEEL_S3_PART_SIZE)");
  }
  return std::make_unique<S3Storage>(bucket, prefix, options);
}

}  // namespace keel
