#include "checkpoint/torch_format/internal/pickle_reader.h"

#include <bit>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tierzero::checkpoint {
namespace {

// The pickle virtual machine over one byte span. Each handler consumes its operand bytes and
// returns a status naming the opcode's offset on failure.
class Machine {
 public:
  Machine(std::span<const std::byte> bytes, const std::string& source, uint64_t base)
      : bytes_(bytes), source_(source), base_(base) {}

  Result<PickleDocument> run();

 private:
  Status fail(const std::string& what) const {
    return corrupt(source_ + ": byte " + std::to_string(op_at_) + " (file offset " + std::to_string(base_ + op_at_) +
                   "): " + what);
  }
  Status refuse(const std::string& what) const {
    return unsupported(source_ + ": byte " + std::to_string(op_at_) + " (file offset " +
                       std::to_string(base_ + op_at_) + "): " + what);
  }

  Status step(uint8_t op, bool& stop);
  Result<std::span<const std::byte>> take(uint64_t n);
  Result<uint64_t> take_uint(int width);
  Result<std::string_view> take_line();
  Result<PyValue*> pop();
  Result<PyValue*> top();
  Result<std::vector<PyValue*>> pop_mark();
  Status push_int_text(std::string_view text);
  Status push_long_bytes(std::span<const std::byte> le);
  Status push_string(PyKind kind, uint64_t length);
  Status push_global(std::string module, std::string name);
  Status call(PyValue* callable, PyValue* args);
  Status set_items(PyValue* target, const std::vector<PyValue*>& kv);
  Status append_items(PyValue* target, const std::vector<PyValue*>& items);
  Status build(PyValue* target, PyValue* state);
  Status memo_put(uint64_t index);
  Status memo_get(uint64_t index);
  PyValue* make(PyKind k) { return doc_.make(k, op_at_); }
  void push(PyValue* v) { stack_.push_back(v); }

  std::span<const std::byte> bytes_;
  const std::string& source_;
  uint64_t base_;
  uint64_t pos_ = 0;
  uint64_t op_at_ = 0;
  PickleDocument doc_;
  std::vector<PyValue*> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, PyValue*> memo_;
  std::unordered_map<const PyValue*, std::unordered_map<std::string, size_t>> key_index_;  // dict -> key -> entry
};

// A hashable identity for dict keys that Python compares by value (str, bytes, int, bool,
// None); nullopt for the rest, which only match themselves.
std::optional<std::string> key_identity(const PyValue* k) {
  switch (k->kind) {
    case PyKind::kString: return "s" + k->text;
    case PyKind::kBytes: return "b" + k->text;
    case PyKind::kInt: return "i" + std::to_string(k->integer);
    case PyKind::kBool: return "i" + std::to_string(k->boolean ? 1 : 0);  // True == 1 in Python
    case PyKind::kNone: return std::string("n");
    default: return std::nullopt;
  }
}

// Decodes UTF-8 text whose code points are all below 256 into those bytes (latin-1).
std::optional<std::string> utf8_to_latin1(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
    } else if ((c & 0xe0) == 0xc0 && c <= 0xc3 && i + 1 < s.size() &&
               (static_cast<unsigned char>(s[i + 1]) & 0xc0) == 0x80) {
      out.push_back(static_cast<char>(((c & 0x1f) << 6) | (static_cast<unsigned char>(s[i + 1]) & 0x3f)));
      ++i;
    } else {
      return std::nullopt;
    }
  }
  return out;
}

Result<std::span<const std::byte>> Machine::take(uint64_t n) {
  if (n > bytes_.size() - pos_) {
    return fail("pickle ends inside an opcode: it needs " + std::to_string(n) + " more bytes, " +
                std::to_string(bytes_.size() - pos_) + " left (truncated file?)");
  }
  auto s = bytes_.subspan(pos_, n);
  pos_ += n;
  return s;
}

Result<uint64_t> Machine::take_uint(int width) {
  TZ_ASSIGN_OR_RETURN(auto b, take(static_cast<uint64_t>(width)));
  uint64_t v = 0;
  for (int i = width - 1; i >= 0; --i) v = v << 8 | std::to_integer<uint64_t>(b[i]);
  return v;
}

Result<std::string_view> Machine::take_line() {
  const auto* begin = reinterpret_cast<const char*>(bytes_.data()) + pos_;
  const void* nl = std::memchr(begin, '\n', bytes_.size() - pos_);
  if (nl == nullptr) return fail("pickle ends inside a text operand (no newline)");
  const auto len = static_cast<uint64_t>(static_cast<const char*>(nl) - begin);
  pos_ += len + 1;
  return std::string_view(begin, len);
}

Result<PyValue*> Machine::pop() {
  if (stack_.empty() || (!marks_.empty() && stack_.size() <= marks_.back())) {
    return fail("pop from an empty stack (malformed pickle)");
  }
  PyValue* v = stack_.back();
  stack_.pop_back();
  return v;
}

Result<PyValue*> Machine::top() {
  if (stack_.empty() || (!marks_.empty() && stack_.size() <= marks_.back())) {
    return fail("the stack is empty where a value is needed (malformed pickle)");
  }
  return stack_.back();
}

Result<std::vector<PyValue*>> Machine::pop_mark() {
  if (marks_.empty()) return fail("no MARK on the stack (malformed pickle)");
  const size_t m = marks_.back();
  marks_.pop_back();
  std::vector<PyValue*> items(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
  stack_.resize(m);
  return items;
}

Status Machine::push_int_text(std::string_view text) {
  if (!text.empty() && text.back() == 'L') text.remove_suffix(1);
  if (text == "00" || text == "01") {
    PyValue* v = make(PyKind::kBool);
    v->boolean = text == "01";
    push(v);
    return {};
  }
  int64_t value = 0;
  const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || p != text.data() + text.size()) {
    return fail("bad or over-64-bit integer literal '" + std::string(text.substr(0, 32)) + "'");
  }
  PyValue* v = make(PyKind::kInt);
  v->integer = value;
  push(v);
  return {};
}

Status Machine::push_long_bytes(std::span<const std::byte> le) {
  if (le.size() > 8) return refuse("integer of " + std::to_string(le.size()) + " bytes exceeds 64 bits");
  uint64_t u = 0;
  for (size_t i = le.size(); i-- > 0;) u = u << 8 | std::to_integer<uint64_t>(le[i]);
  if (!le.empty() && le.size() < 8 && (std::to_integer<unsigned>(le.back()) & 0x80)) {
    u |= ~uint64_t{0} << (8 * le.size());  // sign-extend
  }
  PyValue* v = make(PyKind::kInt);
  v->integer = std::bit_cast<int64_t>(u);
  push(v);
  return {};
}

Status Machine::push_string(PyKind kind, uint64_t length) {
  TZ_ASSIGN_OR_RETURN(auto b, take(length));
  PyValue* v = make(kind);
  v->text.assign(reinterpret_cast<const char*>(b.data()), b.size());
  push(v);
  return {};
}

Status Machine::push_global(std::string module, std::string name) {
  PyValue* v = make(PyKind::kGlobal);
  v->text = std::move(module);
  v->name = std::move(name);
  push(v);
  return {};
}

// REDUCE / NEWOBJ: builds the few builtins we model, an opaque object otherwise.
Status Machine::call(PyValue* callable, PyValue* args) {
  if (args->kind != PyKind::kTuple) return fail("call arguments are " + args->describe() + ", not a tuple");
  const auto& a = args->items;
  if (callable->is_global("collections", "OrderedDict") && a.empty()) {
    PyValue* d = make(PyKind::kDict);
    d->callable = callable;  // a dict subclass: BUILD may give it attributes
    push(d);
    return {};
  }
  const bool builtins =
      callable->kind == PyKind::kGlobal && (callable->text == "builtins" || callable->text == "__builtin__");
  if (builtins && (callable->name == "set" || callable->name == "frozenset") &&
      (a.empty() || (a.size() == 1 && (a[0]->kind == PyKind::kList || a[0]->kind == PyKind::kTuple)))) {
    PyValue* s = make(PyKind::kSet);
    if (!a.empty()) s->items = a[0]->items;
    push(s);
    return {};
  }
  if (callable->is_global("_codecs", "encode") && a.size() == 2 && a[0]->kind == PyKind::kString &&
      a[1]->kind == PyKind::kString && a[1]->text == "latin1") {
    auto bytes = utf8_to_latin1(a[0]->text);
    if (!bytes) return fail("_codecs.encode argument is not latin-1 text");
    PyValue* b = make(PyKind::kBytes);
    b->text = std::move(*bytes);
    push(b);
    return {};
  }
  PyValue* obj = make(PyKind::kObject);
  obj->callable = callable;
  obj->args = args;
  push(obj);
  return {};
}

Status Machine::set_items(PyValue* target, const std::vector<PyValue*>& kv) {
  if (kv.size() % 2 != 0) return fail("SETITEMS with an odd number of stack items");
  if (target->kind != PyKind::kDict && target->kind != PyKind::kObject) {
    return fail("SETITEM(S) on " + target->describe() + ", not a dict");
  }
  // A later SETITEM of an equal key replaces the value in place, as Python's dict does; the
  // per-dict index keeps that linear in the number of items.
  auto& index = key_index_[target];
  for (size_t i = 0; i < kv.size(); i += 2) {
    std::optional<std::string> identity = key_identity(kv[i]);
    size_t at = target->entries.size();
    if (identity) {
      at = index.try_emplace(std::move(*identity), at).first->second;
    } else {
      for (size_t e = 0; e < target->entries.size(); ++e) {
        if (target->entries[e].first == kv[i]) at = e;
      }
    }
    if (at < target->entries.size()) {
      target->entries[at].second = kv[i + 1];
    } else {
      target->entries.emplace_back(kv[i], kv[i + 1]);
    }
  }
  return {};
}

Status Machine::append_items(PyValue* target, const std::vector<PyValue*>& items) {
  if (target->kind != PyKind::kList && target->kind != PyKind::kObject) {
    return fail("APPEND(S) on " + target->describe() + ", not a list");
  }
  target->items.insert(target->items.end(), items.begin(), items.end());
  return {};
}

// BUILD as Python's default (no __setstate__) does it for a dict subclass such as OrderedDict: the
// state is a dict of attributes, or a (dict or None, slots dict or None) pair, merged into the
// instance's attributes. An opaque object keeps its state as pickled, for the caller to read.
Status Machine::build(PyValue* target, PyValue* state) {
  if (target->kind == PyKind::kObject) {
    target->state = state;
    return {};
  }
  if (target->kind != PyKind::kDict || target->callable == nullptr) {
    return fail("BUILD on " + target->describe() + ": a plain dict, list, tuple or scalar has no attributes to set");
  }
  std::vector<PyValue*> parts{state};
  if (state->kind == PyKind::kTuple && state->items.size() == 2) parts = state->items;
  for (PyValue* part : parts) {
    if (part->kind == PyKind::kNone) continue;
    if (part->kind != PyKind::kDict) {
      return fail("BUILD state for " + target->describe() + " is " + part->describe() + ", not a dict of attributes");
    }
    if (target->state == nullptr) target->state = make(PyKind::kDict);
    std::vector<PyValue*> kv;
    for (const auto& [k, v] : part->entries) {
      kv.push_back(k);
      kv.push_back(v);
    }
    TZ_RETURN_IF_ERROR(set_items(target->state, kv));
  }
  return {};
}

Status Machine::memo_put(uint64_t index) {
  TZ_ASSIGN_OR_RETURN(PyValue * v, top());
  memo_[index] = v;
  return {};
}

Status Machine::memo_get(uint64_t index) {
  const auto it = memo_.find(index);
  if (it == memo_.end()) return fail("memo key " + std::to_string(index) + " was never stored");
  push(it->second);
  return {};
}

Status Machine::step(uint8_t op, bool& stop) {
  switch (op) {
    case 0x80: {  // PROTO
      TZ_ASSIGN_OR_RETURN(uint64_t proto, take_uint(1));
      if (proto > 5) return refuse("pickle protocol " + std::to_string(proto) + " is newer than 5");
      return {};
    }
    case 0x95: {  // FRAME: a length hint; the opcodes follow inline
      TZ_ASSIGN_OR_RETURN(uint64_t len, take_uint(8));
      if (len > bytes_.size() - pos_) {
        return fail("FRAME of " + std::to_string(len) + " bytes runs past the end (truncated file?)");
      }
      return {};
    }
    case '.': stop = true; return {};                      // STOP
    case '(': marks_.push_back(stack_.size()); return {};  // MARK
    case '0': return pop().status();                       // POP
    case '1': return pop_mark().status();                  // POP_MARK
    case '2': {                                            // DUP
      TZ_ASSIGN_OR_RETURN(PyValue * v, top());
      push(v);
      return {};
    }
    case 'N': push(make(PyKind::kNone)); return {};
    case 0x88:
    case 0x89: {  // NEWTRUE, NEWFALSE
      PyValue* v = make(PyKind::kBool);
      v->boolean = op == 0x88;
      push(v);
      return {};
    }
    case 'J': {  // BININT: signed 32-bit
      TZ_ASSIGN_OR_RETURN(uint64_t u, take_uint(4));
      PyValue* v = make(PyKind::kInt);
      v->integer = static_cast<int32_t>(static_cast<uint32_t>(u));
      push(v);
      return {};
    }
    case 'K':
    case 'M': {  // BININT1, BININT2: unsigned
      TZ_ASSIGN_OR_RETURN(uint64_t u, take_uint(op == 'K' ? 1 : 2));
      PyValue* v = make(PyKind::kInt);
      v->integer = static_cast<int64_t>(u);
      push(v);
      return {};
    }
    case 'I':
    case 'L': {  // INT, LONG (text)
      TZ_ASSIGN_OR_RETURN(std::string_view line, take_line());
      return push_int_text(line);
    }
    case 0x8a:
    case 0x8b: {  // LONG1, LONG4
      TZ_ASSIGN_OR_RETURN(uint64_t n, take_uint(op == 0x8a ? 1 : 4));
      TZ_ASSIGN_OR_RETURN(auto b, take(n));
      return push_long_bytes(b);
    }
    case 'G': {  // BINFLOAT: big-endian double
      TZ_ASSIGN_OR_RETURN(auto b, take(8));
      uint64_t u = 0;
      for (int i = 0; i < 8; ++i) u = u << 8 | std::to_integer<uint64_t>(b[i]);
      PyValue* v = make(PyKind::kFloat);
      v->real = std::bit_cast<double>(u);
      push(v);
      return {};
    }
    case 'F': {  // FLOAT (text)
      TZ_ASSIGN_OR_RETURN(std::string_view line, take_line());
      double d = 0;
      const auto [p, ec] = std::from_chars(line.data(), line.data() + line.size(), d);
      if (ec != std::errc() || p != line.data() + line.size()) return fail("bad float literal");
      PyValue* v = make(PyKind::kFloat);
      v->real = d;
      push(v);
      return {};
    }
    case 0x8c: {  // SHORT_BINUNICODE
      TZ_ASSIGN_OR_RETURN(uint64_t n, take_uint(1));
      return push_string(PyKind::kString, n);
    }
    case 'X': {  // BINUNICODE
      TZ_ASSIGN_OR_RETURN(uint64_t n, take_uint(4));
      return push_string(PyKind::kString, n);
    }
    case 0x8d: {  // BINUNICODE8
      TZ_ASSIGN_OR_RETURN(uint64_t n, take_uint(8));
      return push_string(PyKind::kString, n);
    }
    case 'U': {  // SHORT_BINSTRING (python 2 str: bytes read as latin-1 text)
      TZ_ASSIGN_OR_RETURN(uint64_t n, take_uint(1));
      return push_string(PyKind::kString, n);
    }
    case 'T': {  // BINSTRING
      TZ_ASSIGN_OR_RETURN(uint64_t n, take_uint(4));
      return push_string(PyKind::kString, n);
    }
    case 'C': {  // SHORT_BINBYTES
      TZ_ASSIGN_OR_RETURN(uint64_t n, take_uint(1));
      return push_string(PyKind::kBytes, n);
    }
    case 'B': {  // BINBYTES
      TZ_ASSIGN_OR_RETURN(uint64_t n, take_uint(4));
      return push_string(PyKind::kBytes, n);
    }
    case 0x8e:
    case 0x96: {  // BINBYTES8, BYTEARRAY8
      TZ_ASSIGN_OR_RETURN(uint64_t n, take_uint(8));
      return push_string(PyKind::kBytes, n);
    }
    case ')': push(make(PyKind::kTuple)); return {};  // EMPTY_TUPLE
    case ']': push(make(PyKind::kList)); return {};   // EMPTY_LIST
    case '}': push(make(PyKind::kDict)); return {};   // EMPTY_DICT
    case 0x8f: push(make(PyKind::kSet)); return {};   // EMPTY_SET
    case 't':
    case 'l':
    case 0x91: {  // TUPLE, LIST, FROZENSET
      TZ_ASSIGN_OR_RETURN(auto items, pop_mark());
      PyValue* v = make(op == 't' ? PyKind::kTuple : op == 'l' ? PyKind::kList : PyKind::kSet);
      v->items = std::move(items);
      push(v);
      return {};
    }
    case 0x85:
    case 0x86:
    case 0x87: {  // TUPLE1..3
      const size_t n = op - 0x84u;
      PyValue* v = make(PyKind::kTuple);
      v->items.resize(n);
      for (size_t i = n; i-- > 0;) {
        TZ_ASSIGN_OR_RETURN(v->items[i], pop());
      }
      push(v);
      return {};
    }
    case 'd': {  // DICT
      TZ_ASSIGN_OR_RETURN(auto kv, pop_mark());
      PyValue* v = make(PyKind::kDict);
      TZ_RETURN_IF_ERROR(set_items(v, kv));
      push(v);
      return {};
    }
    case 's': {  // SETITEM
      TZ_ASSIGN_OR_RETURN(PyValue * value, pop());
      TZ_ASSIGN_OR_RETURN(PyValue * key, pop());
      TZ_ASSIGN_OR_RETURN(PyValue * target, top());
      return set_items(target, {key, value});
    }
    case 'u': {  // SETITEMS
      TZ_ASSIGN_OR_RETURN(auto kv, pop_mark());
      TZ_ASSIGN_OR_RETURN(PyValue * target, top());
      return set_items(target, kv);
    }
    case 'a': {  // APPEND
      TZ_ASSIGN_OR_RETURN(PyValue * value, pop());
      TZ_ASSIGN_OR_RETURN(PyValue * target, top());
      return append_items(target, {value});
    }
    case 'e': {  // APPENDS
      TZ_ASSIGN_OR_RETURN(auto items, pop_mark());
      TZ_ASSIGN_OR_RETURN(PyValue * target, top());
      return append_items(target, items);
    }
    case 0x90: {  // ADDITEMS
      TZ_ASSIGN_OR_RETURN(auto items, pop_mark());
      TZ_ASSIGN_OR_RETURN(PyValue * target, top());
      if (target->kind != PyKind::kSet) return fail("ADDITEMS on " + target->describe() + ", not a set");
      target->items.insert(target->items.end(), items.begin(), items.end());
      return {};
    }
    case 'c': {  // GLOBAL
      TZ_ASSIGN_OR_RETURN(std::string_view module, take_line());
      TZ_ASSIGN_OR_RETURN(std::string_view name, take_line());
      return push_global(std::string(module), std::string(name));
    }
    case 0x93: {  // STACK_GLOBAL
      TZ_ASSIGN_OR_RETURN(PyValue * name, pop());
      TZ_ASSIGN_OR_RETURN(PyValue * module, pop());
      if (name->kind != PyKind::kString || module->kind != PyKind::kString) {
        return fail("STACK_GLOBAL needs two strings, got " + module->describe() + " and " + name->describe());
      }
      return push_global(module->text, name->text);
    }
    case 'R':
    case 0x81: {  // REDUCE, NEWOBJ
      TZ_ASSIGN_OR_RETURN(PyValue * args, pop());
      TZ_ASSIGN_OR_RETURN(PyValue * callable, pop());
      return call(callable, args);
    }
    case 0x92: {  // NEWOBJ_EX: keyword arguments are kept in the object's state slot
      TZ_ASSIGN_OR_RETURN(PyValue * kwargs, pop());
      TZ_ASSIGN_OR_RETURN(PyValue * args, pop());
      TZ_ASSIGN_OR_RETURN(PyValue * cls, pop());
      if (args->kind != PyKind::kTuple) return fail("NEWOBJ_EX arguments are not a tuple");
      PyValue* obj = make(PyKind::kObject);
      obj->callable = cls;
      obj->args = args;
      obj->state = kwargs;
      push(obj);
      return {};
    }
    case 'i': {  // INST: module, name lines; arguments since MARK
      TZ_ASSIGN_OR_RETURN(std::string_view module, take_line());
      TZ_ASSIGN_OR_RETURN(std::string_view name, take_line());
      TZ_ASSIGN_OR_RETURN(auto items, pop_mark());
      TZ_RETURN_IF_ERROR(push_global(std::string(module), std::string(name)));
      PyValue* cls = stack_.back();
      stack_.pop_back();
      PyValue* args = make(PyKind::kTuple);
      args->items = std::move(items);
      PyValue* obj = make(PyKind::kObject);
      obj->callable = cls;
      obj->args = args;
      push(obj);
      return {};
    }
    case 'o': {  // OBJ: class and arguments since MARK
      TZ_ASSIGN_OR_RETURN(auto items, pop_mark());
      if (items.empty()) return fail("OBJ without a class");
      PyValue* args = make(PyKind::kTuple);
      args->items.assign(items.begin() + 1, items.end());
      PyValue* obj = make(PyKind::kObject);
      obj->callable = items[0];
      obj->args = args;
      push(obj);
      return {};
    }
    case 'b': {  // BUILD
      TZ_ASSIGN_OR_RETURN(PyValue * state, pop());
      TZ_ASSIGN_OR_RETURN(PyValue * target, top());
      return build(target, state);
    }
    case 'Q': {  // BINPERSID
      TZ_ASSIGN_OR_RETURN(PyValue * id, pop());
      PyValue* v = make(PyKind::kPersistentId);
      v->args = id;
      push(v);
      return {};
    }
    case 'P': {  // PERSID (text id)
      TZ_ASSIGN_OR_RETURN(std::string_view line, take_line());
      PyValue* id = make(PyKind::kString);
      id->text = std::string(line);
      PyValue* v = make(PyKind::kPersistentId);
      v->args = id;
      push(v);
      return {};
    }
    case 'p': {  // PUT (text index)
      TZ_ASSIGN_OR_RETURN(std::string_view line, take_line());
      uint64_t index = 0;
      const auto [p, ec] = std::from_chars(line.data(), line.data() + line.size(), index);
      if (ec != std::errc() || p != line.data() + line.size()) return fail("bad PUT index");
      return memo_put(index);
    }
    case 'q': {  // BINPUT
      TZ_ASSIGN_OR_RETURN(uint64_t index, take_uint(1));
      return memo_put(index);
    }
    case 'r': {  // LONG_BINPUT
      TZ_ASSIGN_OR_RETURN(uint64_t index, take_uint(4));
      return memo_put(index);
    }
    case 0x94: return memo_put(memo_.size());  // MEMOIZE
    case 'g': {                                // GET (text index)
      TZ_ASSIGN_OR_RETURN(std::string_view line, take_line());
      uint64_t index = 0;
      const auto [p, ec] = std::from_chars(line.data(), line.data() + line.size(), index);
      if (ec != std::errc() || p != line.data() + line.size()) return fail("bad GET index");
      return memo_get(index);
    }
    case 'h': {  // BINGET
      TZ_ASSIGN_OR_RETURN(uint64_t index, take_uint(1));
      return memo_get(index);
    }
    case 'j': {  // LONG_BINGET
      TZ_ASSIGN_OR_RETURN(uint64_t index, take_uint(4));
      return memo_get(index);
    }
    case 'S':
    case 'V': return refuse("protocol-0 text string opcode; torch.save writes protocol 2 — re-save the file");
    case 0x82:
    case 0x83:
    case 0x84: return refuse("copyreg extension-registry opcode (EXT1/2/4) is not supported");
    case 0x97:
    case 0x98: return refuse("out-of-band buffer opcode (protocol 5 NEXT_BUFFER/READONLY_BUFFER) is not supported");
    default: {
      char buf[8];
      std::snprintf(buf, sizeof buf, "0x%02x", op);
      return fail(std::string("unknown pickle opcode ") + buf + " (not a pickle, or damaged)");
    }
  }
}

Result<PickleDocument> Machine::run() {
  bool stop = false;
  while (!stop) {
    if (pos_ >= bytes_.size()) {
      op_at_ = pos_;
      return fail("pickle ends without a STOP opcode (truncated file?)");
    }
    op_at_ = pos_;
    const auto op = std::to_integer<uint8_t>(bytes_[pos_++]);
    TZ_RETURN_IF_ERROR(step(op, stop));
  }
  if (stack_.empty()) return fail("STOP with an empty stack");
  doc_.set_root(stack_.back());
  return std::move(doc_);
}

}  // namespace

Result<PickleDocument> parse_pickle(std::span<const std::byte> bytes, const std::string& source, uint64_t base_offset) {
  return Machine(bytes, source, base_offset).run();
}

}  // namespace tierzero::checkpoint
