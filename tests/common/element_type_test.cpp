// The one element-type vocabulary: sizes, names and parsing.
#include "common/common.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

namespace tierzero {
namespace {

TEST(ElementType, SizesOfWholeByteTypes) {
  EXPECT_EQ(element_size(ElementType::kF32), 4u);
  EXPECT_EQ(element_size(ElementType::kBF16), 2u);
  EXPECT_EQ(element_size(ElementType::kF16), 2u);
  EXPECT_EQ(element_size(ElementType::kF64), 8u);
  EXPECT_EQ(element_size(ElementType::kI64), 8u);
  EXPECT_EQ(element_size(ElementType::kU8), 1u);
  EXPECT_EQ(element_size(ElementType::kBool), 1u);
  EXPECT_EQ(element_bits(ElementType::kF4), 4u);
  EXPECT_EQ(element_bits(ElementType::kF6E3M2), 6u);
}

TEST(ElementType, BytesOfPackedTypesMustBeWhole) {
  EXPECT_EQ(element_bytes(ElementType::kF4, 6), 3u);
  EXPECT_FALSE(element_bytes(ElementType::kF4, 3).has_value());
  EXPECT_EQ(element_bytes(ElementType::kF6E2M3, 4), 3u);
  EXPECT_FALSE(element_bytes(ElementType::kF6E2M3, 1).has_value());
  EXPECT_EQ(element_bytes(ElementType::kBF16, 5), 10u);
  EXPECT_FALSE(element_bytes(ElementType::kF64, std::numeric_limits<uint64_t>::max() / 4).has_value());
}

TEST(ElementType, IntegerTypes) {
  for (ElementType t : {ElementType::kBool, ElementType::kU8, ElementType::kI8, ElementType::kI16, ElementType::kU16,
                        ElementType::kI32, ElementType::kU32, ElementType::kI64, ElementType::kU64}) {
    EXPECT_TRUE(is_integer_type(t)) << element_type_name(t);
  }
  for (ElementType t : {ElementType::kF32, ElementType::kBF16, ElementType::kF16, ElementType::kF64,
                        ElementType::kF8E4M3, ElementType::kC64}) {
    EXPECT_FALSE(is_integer_type(t)) << element_type_name(t);
  }
}

TEST(ElementType, NamesAsTierzeroAndTorchSpellThem) {
  EXPECT_STREQ(element_type_name(ElementType::kF32), "fp32");
  EXPECT_STREQ(element_type_name(ElementType::kBF16), "bf16");
  EXPECT_STREQ(element_type_name(ElementType::kF16), "fp16");
  EXPECT_STREQ(torch_dtype_name(ElementType::kF32), "float32");
  EXPECT_STREQ(torch_dtype_name(ElementType::kBF16), "bfloat16");
  EXPECT_STREQ(torch_dtype_name(ElementType::kF16), "float16");
  EXPECT_STREQ(torch_dtype_name(ElementType::kI64), "int64");
  EXPECT_STREQ(torch_dtype_name(ElementType::kBool), "bool");
}

// Every type's two names parse back to it; so do the short aliases, in any case.
TEST(ElementType, ParsesEveryNameBack) {
  for (int i = 0; i <= static_cast<int>(ElementType::kU64); ++i) {
    const auto t = static_cast<ElementType>(i);
    EXPECT_EQ(parse_element_type(element_type_name(t)), t) << element_type_name(t);
    EXPECT_EQ(parse_element_type(torch_dtype_name(t)), t) << torch_dtype_name(t);
  }
  EXPECT_EQ(parse_element_type("f32"), ElementType::kF32);
  EXPECT_EQ(parse_element_type("F16"), ElementType::kF16);
  EXPECT_EQ(parse_element_type("BF16"), ElementType::kBF16);
  EXPECT_EQ(parse_element_type("BFloat16"), ElementType::kBF16);
  EXPECT_FALSE(parse_element_type("").has_value());
  EXPECT_FALSE(parse_element_type("fp8").has_value());
  EXPECT_FALSE(parse_element_type("float").has_value());
}

}  // namespace
}  // namespace tierzero
