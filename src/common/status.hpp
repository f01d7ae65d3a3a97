// Errors as values for the offline tools (see STYLE.md): a Status says what went
// wrong in words a user can act on; Expected<T> carries either a T or that Status.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace hpc {

class Status {
public:
  Status() = default;  // OK
  static Status error(std::string message) { return Status(std::move(message)); }

  bool ok() const { return !failed_; }
  explicit operator bool() const { return ok(); }
  const std::string& message() const { return message_; }

  // Prefixes context, e.g. the file name: "a.hpcrun: offset 0x10: ...".
  Status& prepend(const std::string& context) {
    if (failed_) message_ = context + ": " + message_;
    return *this;
  }

private:
  explicit Status(std::string message) : message_(std::move(message)), failed_(true) {}
  std::string message_;
  bool failed_ = false;
};

template <typename T>
class Expected {
public:
  Expected(T value) : v_(std::move(value)) {}
  Expected(Status error) : v_(std::move(error)) { assert(!std::get<Status>(v_).ok()); }

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const Status& status() const {
    static const Status okStatus;
    return ok() ? okStatus : std::get<Status>(v_);
  }
  Status take_status() && { return ok() ? Status() : std::get<Status>(std::move(v_)); }

private:
  std::variant<T, Status> v_;
};

}  // namespace hpc

// Early return on error, in the manner of Perfetto's status_macros.h.
#define HPC_CONCAT_INNER(a, b) a##b
#define HPC_CONCAT(a, b) HPC_CONCAT_INNER(a, b)
#define HPC_RETURN_IF_ERROR(expr)                 \
  do {                                            \
    ::hpc::Status hpc_status_ = (expr);           \
    if (!hpc_status_.ok()) return hpc_status_;    \
  } while (0)
#define HPC_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return std::move(tmp).take_status(); \
  lhs = std::move(tmp).value()
#define HPC_ASSIGN_OR_RETURN(lhs, expr) \
  HPC_ASSIGN_OR_RETURN_IMPL(HPC_CONCAT(hpc_expected_, __LINE__), lhs, expr)
