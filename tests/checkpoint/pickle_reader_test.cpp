// The pickle reader on hand-assembled opcode streams: what real files use, and what must be refused.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "checkpoint/torch_format/internal/pickle_reader.h"
#include "tests/support/status_matchers.h"

namespace tierzero::checkpoint {
namespace {

// Parses a pickle given as hex (the streams below are Python's pickle.dumps output).
Result<PickleDocument> parse_hex(const std::string& hex) {
  std::vector<std::byte> bytes;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    bytes.push_back(static_cast<std::byte>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return parse_pickle(bytes, "test.pkl");
}

const PyValue& root_of(const Result<PickleDocument>& doc) {
  EXPECT_OK(doc);
  return doc.value().root();
}

TEST(PickleReader, Protocol2DictOfScalarsAndContainers) {
  // pickle.dumps({'i': -1, 'big': 2**40, 'f': 1.5, 't': (1, 'x', None), 'b': True, 'l': [1, 2]}, 2)
  const auto doc = parse_hex(
      "80027d71002858010000006971014affffffff580300000062696771028a060000000000015801000000667103473ff8000000"
      "00000058010000007471044b0158010000007871054e87710658010000006271078858010000006c71085d7109284b014b02"
      "65752e");
  const PyValue& r = root_of(doc);
  ASSERT_EQ(r.kind, PyKind::kDict);
  EXPECT_EQ(r.get("i")->integer, -1);
  EXPECT_EQ(r.get("big")->integer, int64_t{1} << 40);
  EXPECT_EQ(r.get("f")->real, 1.5);
  ASSERT_EQ(r.get("t")->items.size(), 3u);
  EXPECT_EQ(r.get("t")->items[1]->text, "x");
  EXPECT_EQ(r.get("t")->items[2]->kind, PyKind::kNone);
  EXPECT_TRUE(r.get("b")->boolean);
  ASSERT_EQ(r.get("l")->kind, PyKind::kList);
  ASSERT_EQ(r.get("l")->items.size(), 2u);
  EXPECT_EQ(r.get("l")->items[1]->integer, 2);
}

TEST(PickleReader, Protocol4SetsAndNegativeLong1) {
  // pickle.dumps((-129, {1, 2}, frozenset({3})), 4): FRAME, MEMOIZE, EMPTY_SET/ADDITEMS, FROZENSET.
  const auto doc = parse_hex("80049515000000000000004a7fffffff8f94284b014b0290284b03919487942e");
  const PyValue& r = root_of(doc);
  ASSERT_EQ(r.kind, PyKind::kTuple);
  EXPECT_EQ(r.items[0]->integer, -129);
  EXPECT_EQ(r.items[1]->kind, PyKind::kSet);
  EXPECT_EQ(r.items[1]->items.size(), 2u);
  EXPECT_EQ(r.items[2]->items[0]->integer, 3);
  const auto negative = parse_hex("80028a060000000000ff2e");  // LONG1 -(2**40)
  EXPECT_EQ(root_of(negative).integer, -(int64_t{1} << 40));
}

TEST(PickleReader, UnknownClassesStayOpaqueWithArgsAndState) {
  // pickle.dumps((ZeroStageEnum.weights, scaler, OrderedDict(), set(), b'\xff'), 2) with DeepSpeed's
  // module paths: GLOBAL+REDUCE, NEWOBJ+BUILD, OrderedDict, __builtin__.set, _codecs.encode.
  const auto doc = parse_hex(
      "800228636465657073706565642e72756e74696d652e7a65726f2e636f6e6669670a5a65726f5374616765456e756d0a7100"
      "4b03857101527102636465657073706565642e72756e74696d652e667031362e6c6f73735f7363616c65720a44796e616d69"
      "634c6f73735363616c65720a7103298171047d71055801000000737106474000000000000000736263636f6c6c656374696f"
      "6e730a4f726465726564446963740a710729527108635f5f6275696c74696e5f5f0a7365740a71095d710a85710b52710c63"
      "5f636f646563730a656e636f64650a710d5802000000c3bf710e58060000006c6174696e31710f8671105271117471122e");
  const PyValue& r = root_of(doc);
  ASSERT_EQ(r.items.size(), 5u);
  EXPECT_TRUE(r.items[0]->is_global("deepspeed.runtime.zero.config", "ZeroStageEnum"));
  EXPECT_EQ(r.items[0]->args->items[0]->integer, 3);
  EXPECT_TRUE(r.items[1]->is_global("deepspeed.runtime.fp16.loss_scaler", "DynamicLossScaler"));
  ASSERT_NE(r.items[1]->state, nullptr);
  EXPECT_EQ(r.items[1]->state->get("s")->real, 2.0);
  EXPECT_EQ(r.items[2]->kind, PyKind::kDict);
  EXPECT_EQ(r.items[3]->kind, PyKind::kSet);
  EXPECT_EQ(r.items[4]->kind, PyKind::kBytes);
  EXPECT_EQ(r.items[4]->text, "\xff");
}

TEST(PickleReader, BuildGivesAnOrderedDictAttributesAsPythonDoes) {
  // d = OrderedDict(a=1); d._metadata = {'': {'version': 1}}; pickle.dumps([d, d], 2): a torch
  // state_dict, whose _metadata is pickled with BUILD after its items; the memo shares it.
  const auto doc = parse_hex(
      "80025d71002863636f6c6c656374696f6e730a4f726465726564446963740a71012952710258010000006171034b01737d71"
      "0458090000005f6d6574616461746171057d7106580000000071077d7108580700000076657273696f6e71094b0173737362"
      "6802652e");
  const PyValue& r = root_of(doc);
  ASSERT_EQ(r.items.size(), 2u);
  const PyValue& d = *r.items[0];
  ASSERT_EQ(d.kind, PyKind::kDict);
  EXPECT_EQ(r.items[1], &d);
  ASSERT_EQ(d.entries.size(), 1u);  // the attribute is not an item
  EXPECT_EQ(d.get("a")->integer, 1);
  EXPECT_EQ(d.get("_metadata"), nullptr);
  const PyValue* metadata = d.attribute("_metadata");
  ASSERT_NE(metadata, nullptr);
  EXPECT_EQ(metadata->get("")->get("version")->integer, 1);

  // BUILD with a (dict, slots) pair sets both; a second BUILD adds to the attributes.
  // OrderedDict() BUILD(({'x': 1}, {'y': 2})) BUILD({'z': 3})
  // (Python: OrderedDict() with __dict__ {'x': 1, 'y': 2, 'z': 3}.)
  const auto slots = parse_hex(
      "800263636f6c6c656374696f6e730a4f726465726564446963740a29527d5801000000784b01737d5801000000794b02738662"
      "7d58010000007a4b0373622e");
  const PyValue& o = root_of(slots);
  ASSERT_EQ(o.kind, PyKind::kDict);
  EXPECT_TRUE(o.entries.empty());
  ASSERT_NE(o.attribute("x"), nullptr);
  EXPECT_EQ(o.attribute("x")->integer, 1);
  EXPECT_EQ(o.attribute("y")->integer, 2);
  EXPECT_EQ(o.attribute("z")->integer, 3);
}

TEST(PickleReader, RefusesBuildWherePythonWouldFail) {
  // EMPTY_DICT EMPTY_DICT BUILD: a plain dict has no __dict__ (Python raises AttributeError).
  const auto plain = parse_hex("80027d7d622e");
  EXPECT_ERROR(plain, ErrorCode::kCorrupt, "byte 4");
  EXPECT_ERROR(plain, ErrorCode::kCorrupt, "a plain dict");
  // OrderedDict() BUILD(int 1): the state of an instance without __setstate__ must be a dict.
  EXPECT_ERROR(parse_hex("800263636f6c6c656374696f6e730a4f726465726564446963740a29524b01622e"), ErrorCode::kCorrupt,
               "not a dict of attributes");
}

TEST(PickleReader, RefusesWithOffsets) {
  const auto unknown = parse_hex("80024b01ff2e");
  EXPECT_ERROR(unknown, ErrorCode::kCorrupt, "test.pkl: byte 4");
  EXPECT_ERROR(unknown, ErrorCode::kCorrupt, "unknown pickle opcode 0xff");

  // BINUNICODE of 16 bytes, 3 present
  EXPECT_ERROR(parse_hex("80025810000000616263"), ErrorCode::kCorrupt, "pickle ends inside an opcode");

  EXPECT_ERROR(parse_hex("80024b01"), ErrorCode::kCorrupt, "without a STOP");
  EXPECT_ERROR(parse_hex("800268072e"), ErrorCode::kCorrupt, "memo key 7 was never stored");
  EXPECT_ERROR(parse_hex("8002852e"), ErrorCode::kCorrupt, "empty stack");
  EXPECT_ERROR(parse_hex("80028a090000000000000000012e"), ErrorCode::kUnsupported, "exceeds 64 bits");
  EXPECT_ERROR(parse_hex("80025d4b014b02732e"), ErrorCode::kCorrupt, "not a dict");
}

}  // namespace
}  // namespace tierzero::checkpoint
