// dpipe::Tensor, its encoding, tensor_collate, the host allocators and DLPack export.

#include <array>
#include <cstdint>
#include <cstring>
#include <dlfcn.h>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <dpipe/dpipe.hpp>

#include "support/battery.hpp"
#include "support/counting_allocator.hpp"
#include "support/message.hpp"

namespace tensor_test {

using dpipe::DType;
using dpipe::Tensor;

struct Row {
  std::array<std::array<std::uint8_t, 2>, 3> rgb{};
  float weight = 0;
  std::vector<std::int32_t> tokens;
  Tensor feature;
  DPIPE_FIELDS(rgb, weight, tokens, feature)
};

Row make_row(int id, std::size_t tokens) {
  Row row;
  for (std::size_t i = 0; i < 3; ++i) {
    for (std::size_t j = 0; j < 2; ++j)
      row.rgb[i][j] = static_cast<std::uint8_t>(static_cast<std::size_t>(id) * 10 + i * 2 + j);
  }
  row.weight = 0.5F * static_cast<float>(id);
  for (std::size_t i = 0; i < tokens; ++i) row.tokens.push_back(id * 100 + static_cast<int>(i));
  row.feature = Tensor::from<double>({id + 0.25, id + 0.5}, {2, 1});
  return row;
}

template <class T>
std::vector<T> values_of(const Tensor& tensor) {
  const auto values = tensor.values<T>();
  return {values.begin(), values.end()};
}

std::vector<std::int64_t> shape_of(const Tensor& tensor) { return {tensor.shape().begin(), tensor.shape().end()}; }
std::vector<std::int64_t> strides_of(const Tensor& tensor) {
  return {tensor.strides().begin(), tensor.strides().end()};
}

bool aligned(const Tensor& tensor) { return reinterpret_cast<std::uintptr_t>(tensor.data()) % 64 == 0; }

}  // namespace tensor_test

using namespace tensor_test;

TEST_CASE("Tensor: shape strides values and describe") {
  const auto tensor = Tensor::from<std::int16_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(tensor.defined());
  CHECK(tensor.dtype() == DType::kInt16);
  CHECK(shape_of(tensor) == std::vector<std::int64_t>{2, 3});
  CHECK(strides_of(tensor) == std::vector<std::int64_t>{3, 1});
  CHECK(tensor.numel() == 6);
  CHECK(tensor.nbytes() == 12);
  CHECK(values_of<std::int16_t>(tensor) == std::vector<std::int16_t>{1, 2, 3, 4, 5, 6});
  CHECK(tensor.describe() == "int16[2, 3]");
  CHECK(aligned(tensor));
  CHECK(Tensor().describe() == "undefined");
  CHECK_FALSE(Tensor().defined());

  const auto copy = tensor;  // shares the buffer
  CHECK(copy.data() == tensor.data());
  const auto cloned = tensor.clone();
  CHECK(cloned.data() != tensor.data());
  CHECK(cloned == tensor);
  cloned.values<std::int16_t>()[0] = 9;
  CHECK_FALSE(cloned == tensor);

  CHECK(dpipe::dtype_of<std::uint8_t>() == DType::kUInt8);
  CHECK(dpipe::dtype_of<long>() == DType::kInt64);
  CHECK(dpipe::dtype_of<bool>() == DType::kBool);
  CHECK(dpipe::dtype_of<double>() == DType::kFloat64);
  CHECK(dpipe::dtype_name(DType::kFloat32) == "float32");
}

TEST_CASE("Tensor: bad shapes and types are errors") {
  CHECK_THROWS_MATCHES(Tensor(DType::kFloat32, {2, -1}), dpipe::InvalidArgument,
                       Catch::Message("Tensor: dimension 1 is -1, negative"));
  CHECK_THROWS_MATCHES(Tensor(DType::kFloat32, {1, 1, 1, 1, 1, 1, 1, 1, 1}), dpipe::InvalidArgument,
                       Catch::Message("Tensor: 9 dimensions, at most 8 are supported"));
  CHECK_THROWS_MATCHES(Tensor(DType::kUInt8, {std::numeric_limits<std::int64_t>::max(), 2}), dpipe::InvalidArgument,
                       Catch::Message("Tensor: a shape of 9223372036854775807 x 2 elements of 1 bytes overflows"));
  CHECK_THROWS_MATCHES(Tensor(DType::kUInt8, {0, std::int64_t{1} << 62, std::int64_t{1} << 62}), dpipe::InvalidArgument,
                       Catch::Message("Tensor: a shape of 0 x 4611686018427387904 x 4611686018427387904 elements of 1 "
                                      "bytes overflows"));
  CHECK(strides_of(Tensor(DType::kInt32, {2, 0, 3})) == std::vector<std::int64_t>{3, 3, 1});
  CHECK_THROWS_MATCHES(
      Tensor(DType::kFloat64, {std::int64_t{1} << 40, std::int64_t{1} << 40}), dpipe::InvalidArgument,
      Catch::Message("Tensor: a shape of 1099511627776 x 1099511627776 elements of 8 bytes overflows"));
  const auto tensor = Tensor::from<float>({1.0F, 2.0F});
  CHECK_THROWS_MATCHES((void)tensor.values<double>(), dpipe::InvalidArgument,
                       Catch::Message("Tensor: asked for float64 values of a float32[2] tensor"));
  CHECK_THROWS_MATCHES(Tensor::from<float>({1.0F, 2.0F, 3.0F}, {2, 2}), dpipe::InvalidArgument,
                       Catch::Message("Tensor: 3 values for the shape [2, 2] of 4 elements"));
}

TEST_CASE("Tensor: the encoding round-trips and decodes into one buffer of the current allocator") {
  const auto tensor = Tensor::from<std::uint16_t>({7, 8, 9, 10, 11, 12}, {3, 2});
  const auto bytes = dpipe::to_bytes(tensor);
  // defined, dtype, rank, two int64 dimensions, 12 bytes of values
  REQUIRE(bytes.size() == 1 + 1 + 1 + 16 + 12);
  CHECK(bytes[1] == std::byte{3});  // kUInt16
  CHECK(bytes[2] == std::byte{2});
  CHECK(std::memcmp(bytes.data() + 19, tensor.data(), 12) == 0);

  auto counting = std::make_shared<dpipe::testing::CountingAllocator>();
  {
    const dpipe::ScopedHostAllocator scope(counting);
    const auto decoded = dpipe::from_bytes<Tensor>(bytes);
    CHECK(decoded == tensor);
    CHECK(decoded.storage()->allocator() == counting);
    CHECK(counting->allocations == 1);
  }
  CHECK(counting->live == 0);
  CHECK(dpipe::from_bytes<Tensor>(dpipe::to_bytes(Tensor())) == Tensor());
  const auto empty = Tensor(DType::kInt32, {0, 4});
  CHECK(dpipe::from_bytes<Tensor>(dpipe::to_bytes(empty)) == empty);
}

TEST_CASE("Tensor: corrupt encodings are SerializationErrors and allocate nothing") {
  auto bytes = dpipe::to_bytes(Tensor::from<std::uint8_t>({1, 2, 3, 4}, {2, 2}));
  auto counting = std::make_shared<dpipe::testing::CountingAllocator>();
  const dpipe::ScopedHostAllocator scope(counting);
  SECTION("a dtype out of range") {
    bytes[1] = std::byte{200};
    CHECK_THROWS_MATCHES(dpipe::from_bytes<Tensor>(bytes), dpipe::SerializationError,
                         Catch::Message("corrupt input: 200 is not a tensor dtype"));
  }
  SECTION("a shape larger than the input") {
    const std::int64_t huge = std::int64_t{1} << 40;
    std::memcpy(bytes.data() + 3, &huge, sizeof(huge));
    CHECK_THROWS_MATCHES(
        dpipe::from_bytes<Tensor>(bytes), dpipe::SerializationError,
        Catch::Message("corrupt input: a tensor of shape [1099511627776, 2] exceeds the 4 bytes left"));
  }
  SECTION("an empty shape whose strides overflow") {
    auto empty = dpipe::to_bytes(Tensor(DType::kUInt8, {0, 1, 1}));
    const std::int64_t huge = std::int64_t{1} << 62;
    std::memcpy(empty.data() + 11, &huge, sizeof(huge));
    std::memcpy(empty.data() + 19, &huge, sizeof(huge));
    CHECK_THROWS_MATCHES(dpipe::from_bytes<Tensor>(empty), dpipe::SerializationError,
                         Catch::Message("corrupt input: a tensor of shape [0, 4611686018427387904, "
                                        "4611686018427387904] overflows"));
  }
  SECTION("a negative dimension") {
    const std::int64_t negative = -3;
    std::memcpy(bytes.data() + 11, &negative, sizeof(negative));
    CHECK_THROWS_MATCHES(dpipe::from_bytes<Tensor>(bytes), dpipe::SerializationError,
                         Catch::Message("corrupt input: a tensor of shape [2, -3]"));
  }
  CHECK(counting->allocations == 0);
}

TEST_CASE("Tensor: a reference to a tensor arena this process does not map is a SerializationError") {
  // What a worker process writes for a tensor in its arena: kReference, the dtype, the shape, the
  // arena's id and the block's offset. No arena of this process has id 7.
  std::vector<std::byte> reference;
  dpipe::ByteWriter writer(reference);
  writer.write(std::uint8_t{2});
  writer.write(static_cast<std::uint8_t>(DType::kUInt8));
  writer.write(std::uint8_t{1});
  writer.write(std::int64_t{4});
  writer.write(std::uint64_t{7});
  writer.write(std::uint64_t{64});
  CHECK_THROWS_MATCHES(dpipe::from_bytes<Tensor>(reference), dpipe::SerializationError,
                       Catch::Message("a tensor of shape [4] in the tensor arena of a worker process that this process "
                                      "does not map (its loader is gone, or the bytes come from another process)"));
  auto bytes = dpipe::to_bytes(Tensor::from<std::uint8_t>({1, 2}));
  bytes[0] = std::byte{9};
  CHECK_THROWS_MATCHES(dpipe::from_bytes<Tensor>(bytes), dpipe::SerializationError,
                       Catch::Message("corrupt input: 9 does not start a tensor"));
}

TEST_CASE("Tensor: a tensor over a storage of your own shares it and gives it back once") {
  auto counting = std::make_shared<dpipe::testing::CountingAllocator>();
  {
    auto storage = std::make_shared<dpipe::TensorStorage>(counting, counting->allocate(64), 64);
    const auto tensor = Tensor::from_storage(DType::kInt32, std::array<std::int64_t, 2>{4, 4}, storage);
    CHECK(tensor.data() == storage->data());
    CHECK(tensor.storage() == storage);
    CHECK(strides_of(tensor) == std::vector<std::int64_t>{4, 1});
    CHECK_THROWS_MATCHES(Tensor::from_storage(DType::kInt64, std::array<std::int64_t, 1>{9}, storage),
                         dpipe::InvalidArgument,
                         Catch::Message("Tensor: a storage of 64 bytes cannot hold int64[9] (72 bytes)"));
    CHECK_THROWS_MATCHES(Tensor::from_storage(DType::kInt64, std::array<std::int64_t, 1>{1}, nullptr),
                         dpipe::InvalidArgument, Catch::Message("Tensor: the storage is null"));
    CHECK_THROWS_MATCHES(dpipe::TensorStorage(nullptr, nullptr, 0), dpipe::InvalidArgument,
                         Catch::Message("TensorStorage: the allocator is null"));
    CHECK(counting->live == 1);
  }
  CHECK(counting->allocations == 1);
  CHECK(counting->live == 0);
}

TEST_CASE("tensor_collate: a batch past the caches is written with streaming stores byte for byte") {
  // Three rows of 3 MiB and 5 bytes: a batch of over 8 MiB, whose rows 1 and 2 start unaligned.
  constexpr std::int64_t kRowBytes = (std::int64_t{3} << 20) + 5;
  struct Blob {
    Tensor bytes;
    DPIPE_FIELDS(bytes)
  };
  std::vector<Blob> rows;
  std::vector<std::uint8_t> expected;
  for (int row = 0; row < 3; ++row) {
    Blob blob{Tensor(DType::kUInt8, {kRowBytes})};
    auto values = blob.bytes.values<std::uint8_t>();
    for (std::size_t i = 0; i < values.size(); ++i)
      values[i] = static_cast<std::uint8_t>(i * 7 + static_cast<std::size_t>(row) * 13);
    expected.insert(expected.end(), values.begin(), values.end());
    rows.push_back(std::move(blob));
  }
  const auto batch = dpipe::tensor_collate<Blob>()(rows);
  const Tensor& stacked = batch[&Blob::bytes];
  CHECK(shape_of(stacked) == std::vector<std::int64_t>{3, kRowBytes});
  CHECK(values_of<std::uint8_t>(stacked) == expected);
}

TEST_CASE("tensor_collate: each field kind stacks into one aligned buffer") {
  const std::vector<Row> rows{make_row(1, 2), make_row(2, 2), make_row(3, 2)};
  const auto batch = dpipe::tensor_collate<Row>()(rows);
  REQUIRE(batch.size() == 3);

  const Tensor& rgb = batch[&Row::rgb];
  CHECK(rgb.dtype() == DType::kUInt8);
  CHECK(shape_of(rgb) == std::vector<std::int64_t>{3, 3, 2});
  CHECK(strides_of(rgb) == std::vector<std::int64_t>{6, 2, 1});
  CHECK(values_of<std::uint8_t>(rgb) ==
        std::vector<std::uint8_t>{10, 11, 12, 13, 14, 15, 20, 21, 22, 23, 24, 25, 30, 31, 32, 33, 34, 35});

  const Tensor& weight = batch.get<1>();
  CHECK(shape_of(weight) == std::vector<std::int64_t>{3});
  CHECK(values_of<float>(weight) == std::vector<float>{0.5F, 1.0F, 1.5F});

  const Tensor& tokens = batch[&Row::tokens];
  CHECK(tokens.dtype() == DType::kInt32);
  CHECK(shape_of(tokens) == std::vector<std::int64_t>{3, 2});
  CHECK(values_of<std::int32_t>(tokens) == std::vector<std::int32_t>{100, 101, 200, 201, 300, 301});

  const Tensor& feature = batch[&Row::feature];
  CHECK(shape_of(feature) == std::vector<std::int64_t>{3, 2, 1});
  CHECK(strides_of(feature) == std::vector<std::int64_t>{2, 1, 1});
  CHECK(values_of<double>(feature) == std::vector<double>{1.25, 1.5, 2.25, 2.5, 3.25, 3.5});

  for (const auto& tensor : batch.tensors()) CHECK(aligned(tensor));
  for (const auto& lengths : batch.lengths()) CHECK_FALSE(lengths.defined());
  CHECK_THROWS_MATCHES(
      (void)batch.lengths(&Row::tokens), dpipe::InvalidArgument,
      Catch::Message("TensorBatch<tensor_test::Row>: field 'tokens' was not padded, so it has no lengths"));
}

namespace tensor_test {
struct Viewed {
  std::span<const double> values;
  bool flag = false;
  DPIPE_FIELDS(values, flag)
};
}  // namespace tensor_test

TEST_CASE("tensor_collate: spans and bools") {
  const std::vector<double> first{1.0, 2.0};
  const std::vector<double> second{3.0, 4.0};
  const auto batch = dpipe::tensor_collate<Viewed>()({Viewed{first, true}, Viewed{second, false}});
  CHECK(values_of<double>(batch[&Viewed::values]) == std::vector<double>{1.0, 2.0, 3.0, 4.0});
  CHECK(values_of<bool>(batch[&Viewed::flag]) == std::vector<bool>{true, false});
}

TEST_CASE("tensor_collate: padding to the longest row with a lengths column") {
  const std::vector<Row> rows{make_row(1, 2), make_row(2, 4), make_row(3, 0)};
  const auto batch = dpipe::tensor_collate<Row>().pad(&Row::tokens, -1)(rows);
  const Tensor& tokens = batch[&Row::tokens];
  CHECK(shape_of(tokens) == std::vector<std::int64_t>{3, 4});
  CHECK(values_of<std::int32_t>(tokens) ==
        std::vector<std::int32_t>{100, 101, -1, -1, 200, 201, 202, 203, -1, -1, -1, -1});
  const Tensor& lengths = batch.lengths(&Row::tokens);
  CHECK(lengths.dtype() == DType::kInt64);
  CHECK(values_of<std::int64_t>(lengths) == std::vector<std::int64_t>{2, 4, 0});

  SECTION("a zero pad and a tensor field") {
    std::vector<Row> ragged{make_row(1, 1), make_row(2, 1)};
    ragged[1].feature = Tensor::from<double>({7.0, 8.0, 9.0, 10.0}, {4, 1});
    const auto padded = dpipe::tensor_collate<Row>().pad(&Row::feature, 0)(ragged);
    CHECK(shape_of(padded[&Row::feature]) == std::vector<std::int64_t>{2, 4, 1});
    CHECK(values_of<double>(padded[&Row::feature]) == std::vector<double>{1.25, 1.5, 0.0, 0.0, 7.0, 8.0, 9.0, 10.0});
    CHECK(values_of<std::int64_t>(padded.lengths(&Row::feature)) == std::vector<std::int64_t>{2, 4});
  }
}

TEST_CASE("tensor_collate: rows that differ are errors naming the field the row and both shapes") {
  SECTION("a vector of another length") {
    CHECK_THROWS_MATCHES(
        dpipe::tensor_collate<Row>()({make_row(1, 2), make_row(2, 2), make_row(3, 5)}), dpipe::InvalidArgument,
        Catch::Message(
            "tensor_collate<tensor_test::Row>: field 'tokens' of row 2 has shape [5], row 0 has shape [2]; the rows "
            "of a batch must have the same shape, or pad the field with "
            "tensor_collate<tensor_test::Row>().pad(&tensor_test::Row::tokens, value)"));
  }
  SECTION("a tensor of another dtype") {
    std::vector<Row> rows{make_row(1, 2), make_row(2, 2)};
    rows[1].feature = Tensor::from<float>({1.0F, 2.0F}, {2, 1});
    CHECK_THROWS_MATCHES(
        dpipe::tensor_collate<Row>()(rows), dpipe::InvalidArgument,
        Catch::Message(
            "tensor_collate<tensor_test::Row>: field 'feature' of row 1 is float32[2, 1], row 0 is float64[2, 1]"));
  }
  SECTION("padding extends the first dimension only") {
    std::vector<Row> rows{make_row(1, 2), make_row(2, 2)};
    rows[1].feature = Tensor::from<double>({1.0, 2.0}, {1, 2});
    CHECK_THROWS_MATCHES(
        dpipe::tensor_collate<Row>().pad(&Row::feature, 0)(rows), dpipe::InvalidArgument,
        Catch::Message("tensor_collate<tensor_test::Row>: field 'feature' of row 1 has shape [1, 2], row "
                       "0 has shape [2, 1]; padding extends the first dimension only"));
  }
  SECTION("a scalar cannot be padded") {
    CHECK_THROWS_MATCHES(
        dpipe::tensor_collate<Row>().pad(&Row::weight, 0)({make_row(1, 2)}), dpipe::InvalidArgument,
        Catch::Message(
            "tensor_collate<tensor_test::Row>: field 'weight' is a scalar; only fields with dimensions can be padded"));
  }
  SECTION("a pad value the field's type cannot hold") {
    CHECK_THROWS_MATCHES(
        dpipe::tensor_collate<Row>().pad(&Row::rgb, -1)({make_row(1, 2)}), dpipe::InvalidArgument,
        Catch::Message("tensor_collate<tensor_test::Row>: the pad value -1 of field 'rgb' does not fit "
                       "its type uint8"));
  }
  SECTION("an undefined tensor") {
    std::vector<Row> rows{make_row(1, 2)};
    rows[0].feature = Tensor();
    CHECK_THROWS_MATCHES(dpipe::tensor_collate<Row>()(rows), dpipe::InvalidArgument,
                         Catch::Message("tensor_collate: a row holds an undefined Tensor"));
  }
}

TEST_CASE("tensor_collate: an empty batch has the fields' dtypes and row shapes") {
  const auto batch = dpipe::tensor_collate<Row>().pad(&Row::tokens, 0)(std::vector<Row>{});
  CHECK(batch.size() == 0);
  CHECK(batch[&Row::rgb].describe() == "uint8[0, 3, 2]");
  CHECK(batch[&Row::weight].describe() == "float32[0]");
  CHECK(batch[&Row::tokens].describe() == "int32[0, 0]");
  CHECK(batch.lengths(&Row::tokens).describe() == "int64[0]");
  CHECK(batch[&Row::feature].describe() == "uint8[0]");
}

TEST_CASE("tensor_collate: the standard battery of a collate node") {
  std::vector<Row> rows;
  for (int id = 0; id < 10; ++id) rows.push_back(make_row(id, static_cast<std::size_t>(id % 3)));
  const auto make = [rows] {
    return dpipe::iter::from(rows).batch(3).collate(dpipe::tensor_collate<Row>().pad(&Row::tokens, 0));
  };
  // Each batch, built by hand from the rows' values.
  std::vector<dpipe::TensorBatch<Row>> expected;
  for (std::size_t first = 0; first < rows.size(); first += 3) {
    const std::size_t count = std::min<std::size_t>(3, rows.size() - first);
    std::vector<std::uint8_t> rgb;
    std::vector<float> weight;
    std::vector<double> feature;
    std::int64_t longest = 0;
    for (std::size_t i = first; i < first + count; ++i)
      longest = std::max(longest, static_cast<std::int64_t>(rows[i].tokens.size()));
    std::vector<std::int32_t> tokens;
    std::vector<std::int64_t> lengths;
    for (std::size_t i = first; i < first + count; ++i) {
      for (const auto& pair : rows[i].rgb) rgb.insert(rgb.end(), pair.begin(), pair.end());
      weight.push_back(rows[i].weight);
      auto padded = rows[i].tokens;
      padded.resize(static_cast<std::size_t>(longest), 0);
      tokens.insert(tokens.end(), padded.begin(), padded.end());
      lengths.push_back(static_cast<std::int64_t>(rows[i].tokens.size()));
      feature.push_back(static_cast<double>(i) + 0.25);
      feature.push_back(static_cast<double>(i) + 0.5);
    }
    const auto n = static_cast<std::int64_t>(count);
    const std::int64_t rgb_shape[] = {n, 3, 2};
    const std::int64_t token_shape[] = {n, longest};
    const std::int64_t feature_shape[] = {n, 2, 1};
    expected.emplace_back(count,
                          std::vector<Tensor>{Tensor::from<std::uint8_t>(rgb, rgb_shape), Tensor::from<float>(weight),
                                              Tensor::from<std::int32_t>(tokens, token_shape),
                                              Tensor::from<double>(feature, feature_shape)},
                          std::vector<Tensor>{Tensor(), Tensor(), Tensor::from<std::int64_t>(lengths), Tensor()});
  }
  dpipe::testing::check_battery(make, expected, 4);
}

TEST_CASE("tensor_batch: the standard battery gives the batches of batch and tensor_collate") {
  std::vector<Row> rows;
  for (int id = 0; id < 10; ++id) rows.push_back(make_row(id, 2));
  for (const bool drop_last : {false, true}) {
    INFO("drop_last " << drop_last);
    const auto two_nodes =
        dpipe::testing::collect(dpipe::iter::from(rows).batch(3, drop_last).collate(dpipe::tensor_collate<Row>()));
    REQUIRE(two_nodes.size() == (drop_last ? 3U : 4U));
    CHECK(two_nodes.back().size() == (drop_last ? 3U : 1U));
    const auto make = [rows, drop_last] {
      return dpipe::iter::from(rows) | dpipe::iter::tensor_batch(3, dpipe::tensor_collate<Row>(), drop_last);
    };
    dpipe::testing::check_battery(make, two_nodes, two_nodes.size());
  }
}

TEST_CASE("tensor_batch: a padded field gathers the batch first and pads as tensor_collate does") {
  std::vector<Row> rows;
  for (int id = 0; id < 7; ++id) rows.push_back(make_row(id, static_cast<std::size_t>(id % 3)));
  const auto collate = dpipe::tensor_collate<Row>().pad(&Row::tokens, -1);
  const auto two_nodes = dpipe::testing::collect(dpipe::iter::from(rows).batch(4).collate(collate));
  REQUIRE(two_nodes.size() == 2);
  CHECK(dpipe::testing::collect(dpipe::iter::from(rows) | dpipe::iter::tensor_batch(4, collate)) == two_nodes);
}

TEST_CASE("tensor_batch: a row that differs is tensor_collate's error and the next batch starts after its batch") {
  std::vector<Row> rows;
  for (int id = 0; id < 9; ++id) rows.push_back(make_row(id, 2));
  rows[4].tokens.push_back(7);  // row 1 of the second batch
  const auto pipe = dpipe::iter::from(rows) | dpipe::iter::tensor_batch(3, dpipe::tensor_collate<Row>());
  auto& node = *pipe.ptr();
  node.reset();
  CHECK(node.next()->size() == 3);
  CHECK_THROWS_MATCHES(
      node.next(), dpipe::InvalidArgument,
      Catch::Message("tensor_collate<tensor_test::Row>: field 'tokens' of row 1 has shape [3], row 0 has shape [2]; "
                     "the rows of a batch must have the same shape, or pad the field with "
                     "tensor_collate<tensor_test::Row>().pad(&tensor_test::Row::tokens, value)"));
  // batch() took the whole second batch before the collate failed: so does tensor_batch.
  CHECK(node.next() == dpipe::tensor_collate<Row>()({rows[6], rows[7], rows[8]}));
  CHECK_FALSE(node.next().has_value());
}

TEST_CASE("tensor_batch: a bad row in a short last batch with drop_last is dropped unread as batch drops it") {
  std::vector<Row> rows;
  for (int id = 0; id < 8; ++id) rows.push_back(make_row(id, 2));
  rows[7].tokens.push_back(7);  // row 1 of the short last batch [6, 7]
  const auto two_nodes = dpipe::testing::collect(
      dpipe::iter::from(rows).batch(3, /*drop_last=*/true).collate(dpipe::tensor_collate<Row>()));
  REQUIRE(two_nodes.size() == 2);
  CHECK(dpipe::testing::collect(dpipe::iter::from(rows) | dpipe::iter::tensor_batch(3, dpipe::tensor_collate<Row>(),
                                                                                    /*drop_last=*/true)) == two_nodes);
  CHECK_THROWS_MATCHES(
      dpipe::testing::collect(dpipe::iter::from(rows) | dpipe::iter::tensor_batch(3, dpipe::tensor_collate<Row>())),
      dpipe::InvalidArgument, dpipe::testing::MessageContains({"field 'tokens' of row 1 has shape [3]"}));
}

TEST_CASE("tensor_batch: a batch past the caches and a short last batch hold the samples byte for byte") {
  // Rows of 1 MiB and 3 bytes: batches of 9 are streamed past the caches; the last has 2 rows.
  constexpr std::int64_t kRowBytes = (std::int64_t{1} << 20) + 3;
  struct Blob {
    Tensor bytes;
    std::int32_t id = 0;
    DPIPE_FIELDS(bytes, id)
  };
  std::vector<Blob> rows;
  std::vector<std::uint8_t> expected;
  for (int row = 0; row < 11; ++row) {
    Blob blob{Tensor(DType::kUInt8, {kRowBytes}), row};
    auto values = blob.bytes.values<std::uint8_t>();
    for (std::size_t i = 0; i < values.size(); ++i)
      values[i] = static_cast<std::uint8_t>(i * 3 + static_cast<std::size_t>(row) * 11);
    expected.insert(expected.end(), values.begin(), values.end());
    rows.push_back(std::move(blob));
  }
  const auto batches =
      dpipe::testing::collect(dpipe::iter::from(rows) | dpipe::iter::tensor_batch(9, dpipe::tensor_collate<Blob>()));
  REQUIRE(batches.size() == 2);
  CHECK(shape_of(batches[0][&Blob::bytes]) == std::vector<std::int64_t>{9, kRowBytes});
  CHECK(shape_of(batches[1][&Blob::bytes]) == std::vector<std::int64_t>{2, kRowBytes});
  CHECK(values_of<std::int32_t>(batches[1][&Blob::id]) == std::vector<std::int32_t>{9, 10});
  std::vector<std::uint8_t> got = values_of<std::uint8_t>(batches[0][&Blob::bytes]);
  const auto last = values_of<std::uint8_t>(batches[1][&Blob::bytes]);
  got.insert(got.end(), last.begin(), last.end());
  CHECK(got == expected);
}

TEST_CASE("tensor_collate: batches come from the given allocator") {
  auto counting = std::make_shared<dpipe::testing::CountingAllocator>();
  {
    const auto batch =
        dpipe::tensor_collate<Row>().allocator(counting).pad(&Row::tokens, 0)({make_row(1, 1), make_row(2, 2)});
    CHECK(counting->allocations == 5);  // four fields and one lengths column
    for (const auto& tensor : batch.tensors()) CHECK(tensor.storage()->allocator() == counting);
  }
  CHECK(counting->live == 0);
}

TEST_CASE("recycling_allocator: a freed block serves the next allocation of its size class") {
  auto counting = std::make_shared<dpipe::testing::CountingAllocator>();
  auto pool = dpipe::recycling_allocator(counting, 1 << 20);
  void* first = pool->allocate(100000);
  pool->deallocate(first, 100000);
  void* again = pool->allocate(99000);  // the same class: 98304 < size <= 106496
  CHECK(again == first);
  void* other = pool->allocate(200000);
  CHECK(other != first);
  CHECK(counting->allocations == 2);
  pool->deallocate(again, 99000);
  pool->deallocate(other, 200000);
  CHECK(counting->live == 2);           // kept for reuse
  void* big = pool->allocate(2 << 20);  // over the pool's limit: given back, not kept
  pool->deallocate(big, 2 << 20);
  CHECK(counting->live == 2);
  pool.reset();
  CHECK(counting->live == 0);
  CHECK_THROWS_MATCHES(dpipe::recycling_allocator(nullptr, 1), dpipe::InvalidArgument,
                       Catch::Message("recycling_allocator: the upstream allocator is null"));
}

TEST_CASE("cuda_host_allocator: a missing runtime is a clear error") {
  CHECK_THROWS_MATCHES(
      dpipe::cuda_host_allocator("/nonexistent/libcudart.so"), dpipe::NotSupportedError,
      Catch::Message("pinned memory needs the CUDA runtime, and none loaded: /nonexistent/libcudart.so: "
                     "cannot open shared object file: No such file or directory (set DPIPE_CUDA_RUNTIME to its "
                     "path, or pin_memory = false)"));
}

TEST_CASE("cuda_host_allocator: a runtime that cannot pin is a clear error") {
  CHECK_THROWS_MATCHES(
      dpipe::cuda_host_allocator(DPIPE_FAKE_CUDART_NO_DEVICE), dpipe::NotSupportedError,
      Catch::Message(std::string("pinned memory: cudaHostAlloc of 4096 bytes failed in ") +
                     DPIPE_FAKE_CUDART_NO_DEVICE + ": no CUDA-capable device is detected (CUDA error 100)"));
}

TEST_CASE("cuda_host_allocator: pins through the runtime and recycles") {
  auto pinned = dpipe::cuda_host_allocator(DPIPE_FAKE_CUDART);
  void* handle = dlopen(DPIPE_FAKE_CUDART, RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(handle != nullptr);
  auto* live = reinterpret_cast<std::int64_t (*)()>(dlsym(handle, "fake_cudart_live_blocks"));
  REQUIRE(live != nullptr);
  const auto before = live();
  CHECK(pinned->pinned());
  CHECK(pinned->name() == "cuda-host");
  {
    const Tensor tensor(DType::kFloat32, {256, 256}, pinned);
    CHECK(live() == before + 1);
    CHECK(tensor.storage()->allocator()->pinned());
  }
  CHECK(live() == before + 1);  // kept by the pool
  pinned.reset();
  CHECK(live() == before);
  dlclose(handle);
}

TEST_CASE("to_dlpack: no copy and one deleter call that releases the buffer") {
  auto counting = std::make_shared<dpipe::testing::CountingAllocator>();
  DLManagedTensor* managed = nullptr;
  const void* data = nullptr;
  {
    const auto batch = dpipe::tensor_collate<Row>().allocator(counting)({make_row(1, 2), make_row(2, 2)});
    data = batch[&Row::tokens].data();
    auto exported = dpipe::to_dlpack(batch);
    REQUIRE(exported.size() == 4);
    managed = exported[2].release();
    CHECK(managed->dl_tensor.data == data);
    CHECK(managed->dl_tensor.ndim == 2);
    CHECK(managed->dl_tensor.shape[0] == 2);
    CHECK(managed->dl_tensor.shape[1] == 2);
    CHECK(managed->dl_tensor.strides[0] == 2);
    CHECK(managed->dl_tensor.strides[1] == 1);
    CHECK(managed->dl_tensor.dtype.code == kDLInt);
    CHECK(managed->dl_tensor.dtype.bits == 32);
    CHECK(managed->dl_tensor.dtype.lanes == 1);
    CHECK(managed->dl_tensor.device.device_type == kDLCPU);
    CHECK(managed->dl_tensor.byte_offset == 0);
    CHECK(exported[1]->dl_tensor.dtype.code == kDLFloat);
    CHECK(exported[0]->dl_tensor.dtype.code == kDLUInt);
  }
  // The batch and the other exports are gone; the released one keeps its buffer.
  CHECK(counting->live == 1);
  CHECK(static_cast<const std::int32_t*>(managed->dl_tensor.data)[3] == 201);
  managed->deleter(managed);
  CHECK(counting->live == 0);

  CHECK_THROWS_MATCHES(dpipe::to_dlpack(Tensor()), dpipe::InvalidArgument,
                       Catch::Message("to_dlpack: the tensor is undefined"));
}

TEST_CASE("to_dlpack: a column moves in without a copy") {
  std::vector<float> column{1.0F, 2.0F, 3.0F};
  const float* data = column.data();
  auto exported = dpipe::to_dlpack(std::move(column));
  CHECK(exported->dl_tensor.data == data);
  CHECK(exported->dl_tensor.shape[0] == 3);
  CHECK(exported->dl_tensor.dtype.code == kDLFloat);
  CHECK(static_cast<const float*>(exported->dl_tensor.data)[2] == 3.0F);
}
