// Shape inference of Conv, pools and BatchNormalization. Expected shapes are hand-computed
// with OH = floor((H + pt + pb - ((k-1)*d+1)) / s) + 1 (the comments show the arithmetic) and
// were cross-checked against torch.nn.functional.conv2d / max_pool2d / avg_pool2d.
#include "test_infer_util.h"

using namespace kiln;
using namespace kiln::test_infer;

TEST_CASE("infer Conv: output shapes and explicit attributes") {
  Builder b;
  SUBCASE("stride 2, symmetric pads (ResNet stem)") {
    b.node("Conv", {b.in("x", {1, 3, 224, 224}), b.floats("w", {64, 3, 7, 7})});
    b.set_ints("strides", {2, 2});
    b.set_ints("pads", {3, 3, 3, 3});
    // (224 + 6 - 7) / 2 = 111.5 -> 111 + 1
    CHECK(b.shape() == Shape{1, 64, 112, 112});
    CHECK(attr_ints(b, "kernel_shape") == std::vector<int64_t>{7, 7});
    CHECK(attr_ints(b, "strides") == std::vector<int64_t>{2, 2});
    CHECK(attr_ints(b, "dilations") == std::vector<int64_t>{1, 1});
    CHECK(attr_ints(b, "pads") == std::vector<int64_t>{3, 3, 3, 3});
  }
  SUBCASE("defaults become explicit") {
    b.node("Conv", {b.in("x", {1, 2, 5, 6}), b.floats("w", {4, 2, 1, 3})});
    // H: 5 - 1 + 1 = 5; W: 6 - 3 + 1 = 4
    CHECK(b.shape() == Shape{1, 4, 5, 4});
    CHECK(attr_ints(b, "kernel_shape") == std::vector<int64_t>{1, 3});
    CHECK(attr_ints(b, "strides") == std::vector<int64_t>{1, 1});
    CHECK(attr_ints(b, "dilations") == std::vector<int64_t>{1, 1});
    CHECK(attr_ints(b, "pads") == std::vector<int64_t>{0, 0, 0, 0});
    CHECK(!b.last().has("auto_pad"));
  }
  SUBCASE("dilations") {
    b.node("Conv", {b.in("x", {2, 8, 20, 30}), b.floats("w", {16, 8, 3, 3})});
    b.set_ints("dilations", {2, 3});
    // effective kernel 5 x 7: 20 - 5 + 1 = 16, 30 - 7 + 1 = 24
    CHECK(b.shape() == Shape{2, 16, 16, 24});
  }
  SUBCASE("asymmetric pads and strides") {
    b.node("Conv", {b.in("x", {1, 1, 10, 11}), b.floats("w", {4, 1, 3, 3})});
    b.set_ints("pads", {1, 0, 2, 3});  // top, left, bottom, right
    b.set_ints("strides", {2, 3});
    // H: (10 + 1 + 2 - 3) / 2 = 5 -> 6; W: (11 + 0 + 3 - 3) / 3 = 3 -> 4
    CHECK(b.shape() == Shape{1, 4, 6, 4});
    CHECK(attr_ints(b, "pads") == std::vector<int64_t>{1, 0, 2, 3});
  }
  SUBCASE("SAME_UPPER puts the odd pad at the end") {
    b.node("Conv", {b.in("x", {1, 2, 7, 8}), b.floats("w", {3, 2, 3, 3})});
    b.set_s("auto_pad", "SAME_UPPER");
    b.set_ints("strides", {2, 2});
    // out = ceil(7/2) = 4, total H pad = 3*2 + 3 - 7 = 2; out = ceil(8/2) = 4, W pad = 6+3-8 = 1
    CHECK(b.shape() == Shape{1, 3, 4, 4});
    CHECK(attr_ints(b, "pads") == std::vector<int64_t>{1, 0, 1, 1});
    CHECK(!b.last().has("auto_pad"));
  }
  SUBCASE("SAME_LOWER puts the odd pad at the beginning") {
    b.node("Conv", {b.in("x", {1, 2, 7, 8}), b.floats("w", {3, 2, 3, 3})});
    b.set_s("auto_pad", "SAME_LOWER");
    b.set_ints("strides", {2, 2});
    CHECK(b.shape() == Shape{1, 3, 4, 4});
    CHECK(attr_ints(b, "pads") == std::vector<int64_t>{1, 1, 1, 0});
  }
  SUBCASE("SAME_UPPER with dilation keeps the size") {
    b.node("Conv", {b.in("x", {1, 1, 10, 10}), b.floats("w", {1, 1, 3, 3})});
    b.set_s("auto_pad", "SAME_UPPER");
    b.set_ints("dilations", {2, 2});
    // effective kernel 5: total pad 9 + 5 - 10 = 4 -> 2, 2
    CHECK(b.shape() == Shape{1, 1, 10, 10});
    CHECK(attr_ints(b, "pads") == std::vector<int64_t>{2, 2, 2, 2});
  }
  SUBCASE("VALID") {
    b.node("Conv", {b.in("x", {1, 1, 10, 10}), b.floats("w", {1, 1, 3, 3})});
    b.set_s("auto_pad", "VALID");
    b.set_ints("strides", {3, 3});
    // (10 - 3) / 3 = 2 -> 3
    CHECK(b.shape() == Shape{1, 1, 3, 3});
    CHECK(attr_ints(b, "pads") == std::vector<int64_t>{0, 0, 0, 0});
  }
  SUBCASE("groups") {
    b.node("Conv", {b.in("x", {1, 8, 5, 5}), b.floats("w", {16, 2, 3, 3}), b.floats("b", {16})});
    b.set_i("group", 4);
    b.set_ints("pads", {1, 1, 1, 1});
    CHECK(b.shape() == Shape{1, 16, 5, 5});
  }
  SUBCASE("depthwise, stride 2") {
    b.node("Conv", {b.in("x", {1, 32, 10, 10}), b.floats("w", {32, 1, 3, 3})});
    b.set_i("group", 32);
    b.set_ints("strides", {2, 2});
    b.set_ints("pads", {1, 1, 1, 1});
    // (10 + 2 - 3) / 2 = 4 -> 5
    CHECK(b.shape() == Shape{1, 32, 5, 5});
  }
  SUBCASE("kernel_shape matching the weights is accepted") {
    b.node("Conv", {b.in("x", {1, 3, 8, 8}), b.floats("w", {2, 3, 3, 3})});
    b.set_ints("kernel_shape", {3, 3});
    CHECK(b.shape() == Shape{1, 2, 6, 6});
  }
}

// (graph/rewrite_conv3d.cpp lowers it to 2-D convs before any kernel sees it.)
TEST_CASE("infer Conv: 3-D") {
  Builder b;
  b.node("Conv", {b.in("x", {2, 3, 9, 20, 24}), b.floats("w", {8, 3, 3, 5, 5})});
  b.set_ints("strides", {2, 2, 1});
  b.set_ints("dilations", {2, 1, 1});
  b.set_ints("pads", {1, 2, 0, 1, 2, 0});
  // D: 9 + 2 - 5 = 6 / 2 -> 4; H: 20 + 4 - 5 = 19 / 2 -> 10; W: 24 - 5 -> 20
  CHECK(b.shape() == Shape{2, 8, 4, 10, 20});
  CHECK(attr_ints(b, "kernel_shape") == std::vector<int64_t>{3, 5, 5});
}

TEST_CASE("infer Conv: grouped 3-D") {
  Builder b;
  b.node("Conv", {b.in("x", {1, 8, 5, 6, 7}), b.floats("w", {8, 1, 3, 3, 3})});
  b.set_i("group", 8);
  b.set_ints("pads", {1, 1, 1, 1, 1, 1});
  CHECK(b.shape() == Shape{1, 8, 5, 6, 7});
}

TEST_CASE("infer Conv: errors") {
  Builder b;
  SUBCASE("1-D conv is unsupported") {
    b.node("Conv", {b.in("x", {1, 3, 10}), b.floats("w", {2, 3, 3})});
    b.set_s("auto_pad", "SAME_UPPER");
    check_fails(b, Code::unsupported, "only 2-D");
  }
  SUBCASE("grouped 3-D conv: group must divide the channels") {
    b.node("Conv", {b.in("x", {1, 4, 4, 4, 4}), b.floats("w", {3, 2, 1, 1, 1})});
    b.set_i("group", 2);
    check_fails(b, Code::invalid_model, "does not divide");
  }
  SUBCASE("3-D conv weight rank") {
    b.node("Conv", {b.in("x", {1, 3, 4, 4, 4}), b.floats("w", {2, 3, 1, 1})});
    check_fails(b, Code::invalid_model, "expected rank 5");
  }
  SUBCASE("4-D conv is unsupported") {
    b.node("Conv", {b.in("x", {1, 3, 4, 4, 4, 4}), b.floats("w", {2, 3, 1, 1, 1, 1})});
    check_fails(b, Code::unsupported, "only 2-D");
  }
  SUBCASE("rank 2 input is invalid") {
    b.node("Conv", {b.in("x", {3, 10}), b.floats("w", {2, 3})});
    check_fails(b, Code::invalid_model, "rank >= 3");
  }
  SUBCASE("weight rank") {
    b.node("Conv", {b.in("x", {1, 3, 8, 8}), b.floats("w", {2, 3, 3})});
    check_fails(b, Code::invalid_model, "weight");
  }
  SUBCASE("group does not divide channels") {
    b.node("Conv", {b.in("x", {1, 6, 8, 8}), b.floats("w", {4, 3, 3, 3})});
    b.set_i("group", 4);
    check_fails(b, Code::invalid_model, "group 4");
  }
  SUBCASE("group < 1") {
    b.node("Conv", {b.in("x", {1, 6, 8, 8}), b.floats("w", {4, 6, 3, 3})});
    b.set_i("group", 0);
    check_fails(b, Code::invalid_model, "group 0");
  }
  SUBCASE("weight channels per group") {
    b.node("Conv", {b.in("x", {1, 6, 8, 8}), b.floats("w", {4, 6, 3, 3})});
    b.set_i("group", 2);
    check_fails(b, Code::invalid_model, "channels per group");
  }
  SUBCASE("kernel_shape disagrees with weights") {
    b.node("Conv", {b.in("x", {1, 3, 8, 8}), b.floats("w", {2, 3, 3, 3})});
    b.set_ints("kernel_shape", {5, 5});
    check_fails(b, Code::invalid_model, "kernel_shape");
  }
  SUBCASE("bias shape") {
    b.node("Conv", {b.in("x", {1, 3, 8, 8}), b.floats("w", {2, 3, 3, 3}), b.floats("b", {3})});
    check_fails(b, Code::invalid_model, "bias");
  }
  SUBCASE("stride 0") {
    b.node("Conv", {b.in("x", {1, 3, 8, 8}), b.floats("w", {2, 3, 3, 3})});
    b.set_ints("strides", {1, 0});
    check_fails(b, Code::invalid_model, "strides");
  }
  SUBCASE("dilation 0") {
    b.node("Conv", {b.in("x", {1, 3, 8, 8}), b.floats("w", {2, 3, 3, 3})});
    b.set_ints("dilations", {0, 1});
    check_fails(b, Code::invalid_model, "dilations");
  }
  SUBCASE("negative pad") {
    b.node("Conv", {b.in("x", {1, 3, 8, 8}), b.floats("w", {2, 3, 3, 3})});
    b.set_ints("pads", {0, -1, 0, 0});
    check_fails(b, Code::invalid_model, "pads");
  }
  SUBCASE("wrong number of pads") {
    b.node("Conv", {b.in("x", {1, 3, 8, 8}), b.floats("w", {2, 3, 3, 3})});
    b.set_ints("pads", {1, 1});
    check_fails(b, Code::invalid_model, "should have 4 values");
  }
  SUBCASE("unknown auto_pad") {
    b.node("Conv", {b.in("x", {1, 3, 8, 8}), b.floats("w", {2, 3, 3, 3})});
    b.set_s("auto_pad", "SAME");
    check_fails(b, Code::invalid_model, "auto_pad");
  }
  SUBCASE("kernel larger than the input") {
    b.node("Conv", {b.in("x", {1, 3, 2, 8}), b.floats("w", {2, 3, 3, 3})});
    check_fails(b, Code::invalid_model, "larger than the padded input");
  }
  SUBCASE("int64 input") {
    b.node("Conv", {b.in("x", {1, 3, 8, 8}, DType::i64), b.floats("w", {2, 3, 3, 3})});
    check_fails(b, Code::invalid_model, "'x' has dtype int64");
  }
  SUBCASE("attribute of the wrong kind") {
    b.node("Conv", {b.in("x", {1, 3, 8, 8}), b.floats("w", {2, 3, 3, 3})});
    b.set_i("strides", 2);
    check_fails(b, Code::invalid_model, "strides");
  }
}

TEST_CASE("infer MaxPool / AveragePool") {
  Builder b;
  SUBCASE("ResNet max pool") {
    b.node("MaxPool", {b.in("x", {1, 64, 112, 112})});
    b.set_ints("kernel_shape", {3, 3});
    b.set_ints("strides", {2, 2});
    b.set_ints("pads", {1, 1, 1, 1});
    // (112 + 2 - 3) / 2 = 55.5 -> 55 + 1
    CHECK(b.shape() == Shape{1, 64, 56, 56});
    CHECK(attr_ints(b, "dilations") == std::vector<int64_t>{1, 1});
  }
  SUBCASE("defaults become explicit") {
    b.node("AveragePool", {b.in("x", {2, 3, 4, 6})});
    b.set_ints("kernel_shape", {2, 3});
    CHECK(b.shape() == Shape{2, 3, 3, 4});
    CHECK(attr_ints(b, "strides") == std::vector<int64_t>{1, 1});
    CHECK(attr_ints(b, "pads") == std::vector<int64_t>{0, 0, 0, 0});
    CHECK(attr_ints(b, "dilations") == std::vector<int64_t>{1, 1});
  }
  SUBCASE("ceil_mode without drop: H=6, k=3, s=2, pad 1") {
    b.node("MaxPool", {b.in("x", {1, 1, 6, 6})});
    b.set_ints("kernel_shape", {3, 3});
    b.set_ints("strides", {2, 2});
    b.set_ints("pads", {1, 1, 1, 1});
    b.set_i("ceil_mode", 1);
    // ceil((6 + 2 - 3) / 2) + 1 = 3 + 1 = 4; last start (4-1)*2 = 6 < 6 + 1: kept
    CHECK(b.shape() == Shape{1, 1, 4, 4});
  }
  SUBCASE("same without ceil_mode") {
    b.node("MaxPool", {b.in("x", {1, 1, 6, 6})});
    b.set_ints("kernel_shape", {3, 3});
    b.set_ints("strides", {2, 2});
    b.set_ints("pads", {1, 1, 1, 1});
    CHECK(b.shape() == Shape{1, 1, 3, 3});  // floor(2.5) + 1
  }
  SUBCASE("ceil_mode drops a window starting in the end padding: H=5, k=2, s=2, pad 1") {
    b.node("MaxPool", {b.in("x", {1, 1, 5, 5})});
    b.set_ints("kernel_shape", {2, 2});
    b.set_ints("strides", {2, 2});
    b.set_ints("pads", {1, 1, 1, 1});
    b.set_i("ceil_mode", 1);
    // ceil((5 + 2 - 2) / 2) + 1 = 4, but (4-1)*2 = 6 >= 5 + 1: dropped -> 3
    CHECK(b.shape() == Shape{1, 1, 3, 3});
  }
  SUBCASE("ceil_mode drop without padding, per axis") {
    b.node("MaxPool", {b.in("x", {1, 1, 7, 9})});
    b.set_ints("kernel_shape", {3, 2});
    b.set_ints("strides", {2, 3});
    b.set_ints("pads", {1, 0, 1, 0});
    b.set_i("ceil_mode", 1);
    // H: ceil(6/2)+1 = 4, 3*2 = 6 < 8 kept. W: ceil(7/3)+1 = 4, 3*3 = 9 >= 9 dropped -> 3
    CHECK(b.shape() == Shape{1, 1, 4, 3});
  }
  SUBCASE("MaxPool dilations") {
    b.node("MaxPool", {b.in("x", {1, 1, 10, 10})});
    b.set_ints("kernel_shape", {3, 3});
    b.set_ints("dilations", {2, 2});
    CHECK(b.shape() == Shape{1, 1, 6, 6});  // effective 5: 10 - 5 + 1
  }
  SUBCASE("AveragePool SAME_UPPER, count_include_pad kept") {
    b.node("AveragePool", {b.in("x", {1, 1, 5, 5})});
    b.set_ints("kernel_shape", {3, 3});
    b.set_ints("strides", {2, 2});
    b.set_s("auto_pad", "SAME_UPPER");
    b.set_i("count_include_pad", 1);
    // out = ceil(5/2) = 3, total pad = 2*2 + 3 - 5 = 2 -> 1, 1
    CHECK(b.shape() == Shape{1, 1, 3, 3});
    CHECK(attr_ints(b, "pads") == std::vector<int64_t>{1, 1, 1, 1});
    CHECK(!b.last().has("auto_pad"));
    CHECK(b.last().attr_i("count_include_pad", 0) == 1);
  }
  SUBCASE("MaxPool with an omitted Indices output") {
    b.node("MaxPool", {b.in("x", {1, 1, 4, 4})}, 1);
    b.last().outputs.push_back(kNoValue);
    b.set_ints("kernel_shape", {2, 2});
    CHECK(b.shape() == Shape{1, 1, 3, 3});
  }
}

// (graph/rewrite_conv3d.cpp lowers it to 2-D pools before any kernel sees it.)
TEST_CASE("infer MaxPool: 3-D, ceil_mode") {
  Builder b;
  b.node("MaxPool", {b.in("x", {2, 4, 7, 11, 10})});
  b.set_ints("kernel_shape", {2, 3, 3});
  b.set_ints("strides", {2, 2, 1});
  b.set_ints("pads", {0, 1, 0, 0, 1, 0});
  b.set_i("ceil_mode", 1);
  // D: (7 - 2) / 2 ceil -> 3 + 1 = 4 (the last window starts at 6 < 7); H: 11 + 2 - 3 = 10 / 2
  // -> 6; W: 10 - 3 -> 8
  CHECK(b.shape() == Shape{2, 4, 4, 6, 8});
}

TEST_CASE("infer pools: errors") {
  Builder b;
  SUBCASE("kernel_shape missing") {
    b.node("MaxPool", {b.in("x", {1, 1, 4, 4})});
    check_fails(b, Code::invalid_model, "kernel_shape");
  }
  SUBCASE("kernel_shape of the wrong length") {
    b.node("AveragePool", {b.in("x", {1, 1, 4, 4})});
    b.set_ints("kernel_shape", {2});
    check_fails(b, Code::invalid_model, "kernel_shape");
  }
  SUBCASE("storage_order=1") {
    b.node("MaxPool", {b.in("x", {1, 1, 4, 4})});
    b.set_ints("kernel_shape", {2, 2});
    b.set_i("storage_order", 1);
    check_fails(b, Code::unsupported, "storage_order");
  }
  SUBCASE("Indices output") {
    b.node("MaxPool", {b.in("x", {1, 1, 4, 4})}, 2);
    b.set_ints("kernel_shape", {2, 2});
    check_fails(b, Code::unsupported, "Indices");
  }
  SUBCASE("pad as large as the kernel") {
    b.node("MaxPool", {b.in("x", {1, 1, 8, 8})});
    b.set_ints("kernel_shape", {3, 3});
    b.set_ints("pads", {0, 0, 3, 0});
    check_fails(b, Code::invalid_model, "smaller than the (effective) kernel");
  }
  SUBCASE("ceil_mode not 0/1") {
    b.node("MaxPool", {b.in("x", {1, 1, 8, 8})});
    b.set_ints("kernel_shape", {3, 3});
    b.set_i("ceil_mode", 2);
    check_fails(b, Code::invalid_model, "ceil_mode");
  }
  SUBCASE("AveragePool dilations") {
    b.node("AveragePool", {b.in("x", {1, 1, 8, 8})});
    b.set_ints("kernel_shape", {3, 3});
    b.set_ints("dilations", {2, 2});
    check_fails(b, Code::unsupported, "dilations");
  }
  SUBCASE("1-D pool") {
    b.node("AveragePool", {b.in("x", {1, 1, 8})});
    b.set_ints("kernel_shape", {3});
    check_fails(b, Code::unsupported, "only 2-D");
  }
  SUBCASE("kernel larger than the input") {
    b.node("MaxPool", {b.in("x", {1, 1, 2, 8})});
    b.set_ints("kernel_shape", {3, 3});
    check_fails(b, Code::invalid_model, "larger than the padded input");
  }
}

TEST_CASE("infer global pools") {
  Builder b;
  SUBCASE("GlobalAveragePool") {
    b.node("GlobalAveragePool", {b.in("x", {2, 3, 7, 9})});
    CHECK(b.shape() == Shape{2, 3, 1, 1});
  }
  SUBCASE("GlobalMaxPool rank 5") {
    b.node("GlobalMaxPool", {b.in("x", {1, 4, 2, 3, 5})});
    CHECK(b.shape() == Shape{1, 4, 1, 1, 1});
  }
  SUBCASE("rank 2 is invalid") {
    b.node("GlobalAveragePool", {b.in("x", {2, 3})});
    check_fails(b, Code::invalid_model, "rank >= 3");
  }
}

TEST_CASE("infer BatchNormalization") {
  Builder b;
  auto bn = [&](Shape x, int64_t c_mean) {
    b.node("BatchNormalization", {b.in("x", x), b.floats("s", {x.size() > 1 ? x[1] : 1}),
                                  b.floats("B", {x.size() > 1 ? x[1] : 1}), b.floats("m", {c_mean}),
                                  b.floats("v", {x.size() > 1 ? x[1] : 1})});
  };
  SUBCASE("same shape as x") {
    bn({2, 4, 5, 5}, 4);
    CHECK(b.shape() == Shape{2, 4, 5, 5});
  }
  SUBCASE("rank 2") {
    bn({3, 7}, 7);
    CHECK(b.shape() == Shape{3, 7});
  }
  SUBCASE("omitted training outputs") {
    bn({2, 4, 5, 5}, 4);
    b.last().outputs.push_back(kNoValue);
    b.last().outputs.push_back(kNoValue);
    CHECK(b.shape() == Shape{2, 4, 5, 5});
  }
  SUBCASE("mean of the wrong size") {
    bn({2, 4, 5, 5}, 3);
    check_fails(b, Code::invalid_model, "mean input 3 'm' has shape [3]");
  }
  SUBCASE("training statistics outputs") {  // (expanded after inference: test_function_ops.py)
    b.g.opset = 15;
    bn({2, 4, 5, 5}, 4);
    b.set_i("training_mode", 1);
    const ValueId mean = b.g.add_value("running_mean");
    b.last().outputs.push_back(mean);
    CHECK(b.shape() == Shape{2, 4, 5, 5});
    CHECK(b.g.value(mean).shape == Shape{4});
  }
  SUBCASE("a statistics output outside training mode") {
    b.g.opset = 15;
    bn({2, 4, 5, 5}, 4);
    b.last().outputs.push_back(b.g.add_value("running_mean"));
    check_fails(b, Code::invalid_model, "output 1 (a training statistic)");
  }
  SUBCASE("opset 14's training mode has no saved statistics") {
    b.g.opset = 15;
    bn({2, 4, 5, 5}, 4);
    b.set_i("training_mode", 1);
    for (const char* s : {"rm", "rv", "saved_mean"}) b.last().outputs.push_back(b.g.add_value(s));
    check_fails(b, Code::invalid_model, "defines at most 3");
  }
  SUBCASE("rank 1 input") {
    bn({4}, 1);
    check_fails(b, Code::invalid_model, "rank >= 2");
  }
}
