// The registry of typed operations.

#include <map>
#include <mutex>
#include <shared_mutex>
#include <utility>

#include <dpipe/core/error.hpp>
#include <dpipe/core/typed_op.hpp>

namespace dpipe::detail {
namespace {

using Key = std::pair<std::type_index, std::type_index>;  // (operation, node class or element type)

struct Registry {
  std::shared_mutex mutex;
  std::map<Key, ErasedFunction> functions;
};

Registry& registry() {
  static Registry instance;
  return instance;
}

}  // namespace

void register_typed_op(std::type_index op, std::type_index key, ErasedFunction function) {
  Registry& r = registry();
  const std::unique_lock lock(r.mutex);
  r.functions.insert_or_assign(Key{op, key}, function);
}

ErasedFunction find_typed_op(std::type_index op, const DataPipe& node) {
  Registry& r = registry();
  const std::shared_lock lock(r.mutex);
  if (auto it = r.functions.find(Key{op, typeid(node)}); it != r.functions.end()) return it->second;
  if (auto it = r.functions.find(Key{op, node.element_type_index()}); it != r.functions.end()) return it->second;
  return nullptr;
}

void throw_missing_typed_op(std::string_view op, const DataPipe& node) {
  DPIPE_THROW(NotSupportedError,
              "`{}` is not available for {} ({}): nothing registered it for this node or element type (see "
              "dpipe/core/typed_op.hpp)",
              op, node.label(), node.element_type());
}

}  // namespace dpipe::detail
