/// @file
/// PrefixStore: a view of another store in which every key is "<prefix>/<key>", so that several
/// process groups (or jobs) can share one store without their keys meeting.
#pragma once

#include <memory>

#include "dist/store.h"

namespace ember::dist {

/// A view of `store` under a key prefix (see the file's description).
class PrefixStore : public Store {
 public:
  /// Keys of this view are "<prefix>/<key>" in `store`.
  PrefixStore(std::string prefix, std::shared_ptr<Store> store);

  void set(const std::string& key, const std::string& value) override;
  using Store::wait;
  void wait(const std::vector<std::string>& keys, milliseconds timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  std::string compare_set(const std::string& key, const std::string& expected, const std::string& desired) override;
  bool check(const std::vector<std::string>& keys) override;
  bool delete_key(const std::string& key) override;
  std::string describe() const override { return store_->describe(); }

 protected:
  std::string get_present(const std::string& key) override;

 private:
  std::string prefixed(const std::string& key) const { return prefix_ + "/" + key; }
  std::vector<std::string> prefixed(const std::vector<std::string>& keys) const;

  std::string prefix_;
  std::shared_ptr<Store> store_;
};

}  // namespace ember::dist
