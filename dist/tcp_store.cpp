#include "dist/tcp_store.h"

#include <optional>

#include "dist/error.h"
#include "dist/parse.h"
#include "dist/tcp_store_protocol.h"

namespace ember::dist {

namespace {

// How much longer than a wait's own timeout the client waits for the server's "timed out" reply.
constexpr milliseconds kReplyMargin = std::chrono::seconds(5);

std::string command(StoreCommand c) { return std::string(1, static_cast<char>(c)); }

}  // namespace

TCPStore::TCPStore(std::string host, int port, TCPStoreOptions options) : host_(std::move(host)), port_(port) {
  if (port < 0 || port > 65535) throw ValueError("TCPStore: port " + std::to_string(port) + " is not in [0, 65535]");
  set_timeout(options.timeout);
  if (options.is_server) {
    server_ = std::make_unique<TCPStoreServer>(port);
    port_ = server_->port();
  } else if (port == 0) {
    throw ValueError("TCPStore: a client needs the server's port, got 0 (only the server may ask for a free port)");
  }
  // The server's own client goes through loopback: the host name may not resolve to this machine.
  const std::string connect_host = options.is_server ? "127.0.0.1" : host_;
  try {
    socket_ = connect_with_retry(connect_host, port_, std::chrono::steady_clock::now() + options.timeout);
  } catch (const DistributedError& e) {
    throw DistributedError(describe() + ": " + e.what());
  }
}

TCPStore::~TCPStore() = default;

std::string TCPStore::describe() const { return "TCP store at " + host_port(host_, port_); }

std::vector<std::string> TCPStore::request(const std::vector<std::string>& fields, milliseconds reply_within) {
  std::lock_guard lock(mutex_);
  const auto deadline = std::chrono::steady_clock::now() + reply_within;
  std::optional<std::vector<std::string>> reply;
  try {
    if (!socket_.valid()) socket_ = connect_with_retry(host_, port_, std::chrono::steady_clock::now() + timeout());
    send_all(socket_, encode_message(fields), deadline, describe());
    const uint32_t len = decode_length(recv_exact(socket_, 4, deadline, describe()));
    if (len > kMaxStoreMessageBytes) throw DistributedError(describe() + " sent a malformed reply");
    reply = decode_fields(recv_exact(socket_, len, deadline, describe()));
    if (!reply || reply->empty() || (*reply)[0].size() != 1) throw DistributedError(describe() + " sent a malformed reply");
  } catch (const DistributedError&) {
    socket_.close();  // a reply may still be on its way: never read it as the next request's
    throw;
  }
  const auto status = static_cast<StoreStatus>((*reply)[0][0]);
  reply->erase(reply->begin());
  if (status == StoreStatus::error)
    throw ValueError(describe() + ": " + (reply->empty() ? std::string("request refused") : (*reply)[0]));
  if (status == StoreStatus::timeout) throw_wait_timeout(*reply, milliseconds(std::stoll(fields[1])));
  if (status == StoreStatus::missing) throw DistributedError(describe() + ": key '" + fields[1] + "' is not set");
  return std::move(*reply);
}

void TCPStore::set(const std::string& key, const std::string& value) {
  request({command(StoreCommand::set), key, value}, timeout());
}

std::string TCPStore::get_present(const std::string& key) {
  return request({command(StoreCommand::get), key}, timeout()).at(0);
}

void TCPStore::wait(const std::vector<std::string>& keys, milliseconds timeout) {
  std::vector<std::string> fields = {command(StoreCommand::wait), std::to_string(timeout.count())};
  fields.insert(fields.end(), keys.begin(), keys.end());
  request(fields, timeout + kReplyMargin);
}

int64_t TCPStore::add(const std::string& key, int64_t delta) {
  const auto reply = request({command(StoreCommand::add), key, std::to_string(delta)}, timeout());
  return parse_integer("store counter '" + key + "'", reply.at(0), INT64_MIN, INT64_MAX);
}

std::string TCPStore::compare_set(const std::string& key, const std::string& expected, const std::string& desired) {
  return request({command(StoreCommand::compare_set), key, expected, desired}, timeout()).at(0);
}

bool TCPStore::delete_key(const std::string& key) {
  return request({command(StoreCommand::delete_key), key}, timeout()).at(0) == "1";
}

bool TCPStore::check(const std::vector<std::string>& keys) {
  std::vector<std::string> fields = {command(StoreCommand::check)};
  fields.insert(fields.end(), keys.begin(), keys.end());
  return request(fields, timeout()).at(0) == "1";
}

}  // namespace ember::dist
