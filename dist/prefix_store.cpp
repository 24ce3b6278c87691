#include "dist/prefix_store.h"

namespace ember::dist {

PrefixStore::PrefixStore(std::string prefix, std::shared_ptr<Store> store)
    : prefix_(std::move(prefix)), store_(std::move(store)) {
  set_timeout(store_->timeout());
}

std::vector<std::string> PrefixStore::prefixed(const std::vector<std::string>& keys) const {
  std::vector<std::string> out;
  for (const auto& k : keys) out.push_back(prefixed(k));
  return out;
}

void PrefixStore::set(const std::string& key, const std::string& value) { store_->set(prefixed(key), value); }

std::string PrefixStore::get_present(const std::string& key) { return store_->get(prefixed(key)); }

void PrefixStore::wait(const std::vector<std::string>& keys, milliseconds timeout) {
  store_->wait(prefixed(keys), timeout);
}

int64_t PrefixStore::add(const std::string& key, int64_t delta) { return store_->add(prefixed(key), delta); }

std::string PrefixStore::compare_set(const std::string& key, const std::string& expected, const std::string& desired) {
  return store_->compare_set(prefixed(key), expected, desired);
}

bool PrefixStore::delete_key(const std::string& key) { return store_->delete_key(prefixed(key)); }

bool PrefixStore::check(const std::vector<std::string>& keys) { return store_->check(prefixed(keys)); }

}  // namespace ember::dist
