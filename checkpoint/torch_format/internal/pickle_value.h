// The values a pickle describes, as inert data: nothing is imported or called. A class the reader
// does not model (a DeepSpeed loss scaler, an enum, torch's tensor rebuild functions) becomes an
// Object placeholder that keeps the callable's name and its arguments, so callers can interpret
// the few they understand (checkpoint/torch_pickle.h does it for tensors).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tierzero::checkpoint {

enum class PyKind : uint8_t {
  kNone,
  kBool,
  kInt,
  kFloat,
  kString,
  kBytes,
  kTuple,
  kList,
  kDict,
  kSet,           // containers (kSet holds set and frozenset)
  kGlobal,        // a name `module.qualname` (GLOBAL / STACK_GLOBAL)
  kObject,        // a call of a global: REDUCE, NEWOBJ, INST, OBJ (+ BUILD state)
  kPersistentId,  // BINPERSID: the id value, resolved by the caller (torch: storages)
};

// One value. Values live in a PickleDocument's arena and point at each other; memoised values are
// shared, so a pickle may legally describe a cycle — walk only the structure you expect.
struct PyValue {
  PyKind kind = PyKind::kNone;
  uint64_t offset = 0;                                 // byte offset in the pickle of the opcode that made this value
  bool boolean = false;                                // kBool
  int64_t integer = 0;                                 // kInt
  double real = 0;                                     // kFloat
  std::string text;                                    // kString (UTF-8), kBytes; kGlobal: the module
  std::string name;                                    // kGlobal: the qualified name
  std::vector<PyValue*> items;                         // kTuple, kList, kSet; kObject: appended
  std::vector<std::pair<PyValue*, PyValue*>> entries;  // kDict (insertion order); kObject: set items
  PyValue* callable = nullptr;  // kObject: the called global; kDict: its class when made by a call
                                // (collections.OrderedDict), nullptr for a plain dict
  PyValue* args = nullptr;      // kObject: argument tuple; kPersistentId: the id
  PyValue* state = nullptr;     // kObject: BUILD state, as pickled; kDict: its attributes (a kDict
                                // name -> value that BUILD filled, as a dict subclass's __dict__)

  bool is(PyKind k) const { return kind == k; }
  // True for a kGlobal naming module.name, or a kObject whose callable does.
  bool is_global(std::string_view module, std::string_view qualname) const;
  // The value of string key `key` in a kDict, or nullptr (also when this is not a dict).
  const PyValue* get(std::string_view key) const;
  // Attribute `name` that BUILD set: a kDict's attributes (a torch state_dict's "_metadata"), or
  // a kObject's state when that is a dict or a (dict, slots) pair; nullptr when absent.
  const PyValue* attribute(std::string_view name) const;
  // A short description for error messages: "str 'abc'", "int 3", "list of 2", "object
  // deepspeed.runtime.zero.config.ZeroStageEnum(...)".
  std::string describe() const;
};

// The result of parsing one pickle: an arena of values and the root the STOP opcode returned.
class PickleDocument {
 public:
  PickleDocument() = default;
  PickleDocument(PickleDocument&&) = default;
  PickleDocument& operator=(PickleDocument&&) = default;

  const PyValue& root() const { return *root_; }
  // Makes a value of `kind` owned by this document.
  PyValue* make(PyKind kind, uint64_t offset);
  void set_root(PyValue* root) { root_ = root; }

 private:
  std::vector<std::unique_ptr<PyValue>> arena_;
  PyValue* root_ = nullptr;
};

}  // namespace tierzero::checkpoint
