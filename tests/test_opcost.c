/*
 * test_opcost.c - every FLOP and byte formula of mlprof/opcost.h against
 * numbers worked out by hand (each derivation is in the comment beside it),
 * and the by-name entry for PyTorch's operators on the argument texts that
 * mlprof.torch and PyTorch's profiler write: same numbers as the formulas,
 * unknown operators left without a count.
 */
#include "mlprof/opcost.h"
#include "testutil.h"

static mlprof_opcost c;

#define COST(f, b) (c.flops == (f) && c.bytes == (b))
#define SAYS "got flops %lld bytes %lld", (long long)c.flops, (long long)c.bytes

static void formulas(void)
{
    /* GEMM 64x32x128 float: 2*64*32*128 = 524288 FLOPs;
     * bytes 4*(64*128 + 128*32 + 64*32) = 4*(8192+4096+2048) = 57344 */
    CHECK(mlprof_opcost_gemm(1, 64, 32, 128, 4, 4, 4, 0, &c) == 0 && COST(524288, 57344), SAYS);
    /* accumulated (beta != 0): C read too, + 4*64*32 = 8192 bytes; FLOPs the same */
    CHECK(mlprof_opcost_gemm(1, 64, 32, 128, 4, 4, 4, MLPROF_OPCOST_ACCUMULATE, &c) == 0 && COST(524288, 65536),
          SAYS);
    /* with a bias of N = 32 floats: + 128 bytes */
    CHECK(mlprof_opcost_gemm(1, 64, 32, 128, 4, 4, 4, MLPROF_OPCOST_BIAS, &c) == 0 && COST(524288, 57472), SAYS);
    /* batched 8 x (16x16x16) float: 8*2*4096 = 65536 FLOPs; 8*4*3*256 = 24576 bytes */
    CHECK(mlprof_opcost_gemm(8, 16, 16, 16, 4, 4, 4, 0, &c) == 0 && COST(65536, 24576), SAYS);
    /* mixed: half A (256x512), half B (512x256), float C (256x256):
     * 2*256*256*512 = 67108864; 2*131072 + 2*131072 + 4*65536 = 786432 */
    CHECK(mlprof_opcost_gemm(1, 256, 256, 512, 2, 2, 4, 0, &c) == 0 && COST(67108864, 786432), SAYS);

    /* GEMV 100x100 double: 2*10^4 FLOPs; 8*(10000 + 100 + 100) = 81600 bytes;
     * accumulated: y read as well, 8*100 more = 82400 */
    CHECK(mlprof_opcost_gemv(100, 100, 8, 0, &c) == 0 && COST(20000, 81600), SAYS);
    CHECK(mlprof_opcost_gemv(100, 100, 8, MLPROF_OPCOST_ACCUMULATE, &c) == 0 && COST(20000, 82400), SAYS);

    /* conv2d x [8,64,56,56], w [128,32,3,3] (groups 2: 64/32), y [8,128,28,28] (stride 2, pad 1), half:
     * FLOPs 2 * (8*128*28*28) * (32*3*3) = 2 * 802816 * 288 = 462422016;
     * bytes 2 * (1605632 + 36864 + 802816) = 4890624 (as tests/run_check.py's cuDNN span) */
    int64_t x[4] = {8, 64, 56, 56}, w[4] = {128, 32, 3, 3}, y[4] = {8, 128, 28, 28};
    CHECK(mlprof_opcost_conv(MLPROF_CONV_FORWARD, 4, x, w, y, 2, 0, &c) == 0 && COST(462422016, 4890624), SAYS);
    /* the backward passes do the same multiply-adds and touch the same tensors */
    CHECK(mlprof_opcost_conv(MLPROF_CONV_BACKWARD_DATA, 4, x, w, y, 2, 0, &c) == 0 && COST(462422016, 4890624),
          SAYS);
    CHECK(mlprof_opcost_conv(MLPROF_CONV_BACKWARD_FILTER, 4, x, w, y, 2, 0, &c) == 0 && COST(462422016, 4890624),
          SAYS);
    /* accumulated backward filter: dw (36864 halves) read too, + 73728 bytes; a bias in
     * the forward pass: 128 halves, + 256 bytes */
    CHECK(mlprof_opcost_conv(MLPROF_CONV_BACKWARD_FILTER, 4, x, w, y, 2, MLPROF_OPCOST_ACCUMULATE, &c) == 0 &&
              COST(462422016, 4890624 + 73728), SAYS);
    CHECK(mlprof_opcost_conv(MLPROF_CONV_FORWARD, 4, x, w, y, 2, MLPROF_OPCOST_BIAS, &c) == 0 &&
              COST(462422016, 4890624 + 256), SAYS);
    /* conv1d x [2,3,10], w [4,3,3], y [2,4,8]: 2*(2*4*8)*(3*3) = 1152; 4*(60+36+64) = 640 */
    int64_t x1[3] = {2, 3, 10}, w1[3] = {4, 3, 3}, y1[3] = {2, 4, 8};
    CHECK(mlprof_opcost_conv(MLPROF_CONV_FORWARD, 3, x1, w1, y1, 4, 0, &c) == 0 && COST(1152, 640), SAYS);
    /* conv3d x [1,2,4,4,4], w [3,2,2,2,2], y [1,3,3,3,3]: 2*81*16 = 2592; 4*(128+48+81) = 1028 */
    int64_t x3[5] = {1, 2, 4, 4, 4}, w3[5] = {3, 2, 2, 2, 2}, y3[5] = {1, 3, 3, 3, 3};
    CHECK(mlprof_opcost_conv(MLPROF_CONV_FORWARD, 5, x3, w3, y3, 4, 0, &c) == 0 && COST(2592, 1028), SAYS);
    CHECK(mlprof_opcost_conv(MLPROF_CONV_FORWARD, 2, x3, w3, y3, 4, 0, &c) == MLPROF_EINVAL, "2 dimensions");
    CHECK(mlprof_opcost_conv(7, 4, x, w, y, 4, 0, &c) == MLPROF_EINVAL, "pass 7");

    /* attention, 2x4 heads, Lq = Lk = 128, D = Dv = 64, half:
     * pairs 128*128 = 16384; per pair 2*64 + 2*64 + 6 = 262; 8*16384*262 = 34340864 FLOPs;
     * bytes 2 * 8 * 4 * 128*64 = 524288 */
    CHECK(mlprof_opcost_attention(8, 128, 128, 64, 64, 2, 0, &c) == 0 && COST(34340864, 524288), SAYS);
    /* causal: 128*129/2 = 8256 pairs: 8*8256*262 = 17304576; bytes unchanged */
    CHECK(mlprof_opcost_attention(8, 128, 128, 64, 64, 2, MLPROF_OPCOST_CAUSAL, &c) == 0 &&
              COST(17304576, 524288), SAYS);
    /* causal, Lq = 4 < Lk = 6: rows see 1, 2, 3, 4 keys = 10 pairs; D = Dv = 1: 10 * 10 = 100 FLOPs;
     * Lq = 6 > Lk = 4: 1+2+3+4+4+4 = 18 pairs: 180 FLOPs; bytes 4*(6+4+4+6) = 80 */
    CHECK(mlprof_opcost_attention(1, 4, 6, 1, 1, 4, MLPROF_OPCOST_CAUSAL, &c) == 0 && c.flops == 100, SAYS);
    CHECK(mlprof_opcost_attention(1, 6, 4, 1, 1, 4, MLPROF_OPCOST_CAUSAL, &c) == 0 && COST(180, 80), SAYS);

    /* elementwise: add of [1000] and a broadcast [1]: 1000 FLOPs, 4*(1001 + 1000) = 8004 bytes;
     * sigmoid of 1000 at 4 FLOPs each: 4000, 4*2000 = 8000 */
    CHECK(mlprof_opcost_elementwise(1000, 1001, 1, 4, &c) == 0 && COST(1000, 8004), SAYS);
    CHECK(mlprof_opcost_elementwise(1000, 1000, 4, 4, &c) == 0 && COST(4000, 8000), SAYS);

    /* sum of [5,128] over dim 0 into 128: 4 adds per output = 512; 4*(640+128) = 3072;
     * mean: + 128 divides = 640 */
    CHECK(mlprof_opcost_reduce(640, 128, 4, 0, &c) == 0 && COST(512, 3072), SAYS);
    CHECK(mlprof_opcost_reduce(640, 128, 4, MLPROF_OPCOST_MEAN, &c) == 0 && COST(640, 3072), SAYS);
    CHECK(mlprof_opcost_reduce(10, 20, 4, 0, &c) == MLPROF_EINVAL, "more outputs than inputs");

    /* softmax of [2,1000] floats: 5*2000 = 10000 FLOPs, 4*4000 = 16000 bytes */
    CHECK(mlprof_opcost_softmax(2000, 4, &c) == 0 && COST(10000, 16000), SAYS);

    /* layer norm of [2048,125] with gamma and beta (250), stats saved (2*2048):
     * 2048*125 = 256000 elements, 8 FLOPs each = 2048000;
     * bytes 4*(2*256000 + 250 + 4096) = 2065384 */
    CHECK(mlprof_opcost_norm(256000, 2048, 250, 4, MLPROF_OPCOST_SAVE_STATS, &c) == 0 && COST(2048000, 2065384),
          SAYS);
    /* batch norm inference of [8,16,4,4] (2048 elements), affine (32), running stats read (32):
     * 4 FLOPs each = 8192; 4*(4096 + 32 + 32) = 16640 */
    CHECK(mlprof_opcost_norm(2048, 16, 32, 4, MLPROF_OPCOST_RUNNING, &c) == 0 && COST(8192, 16640), SAYS);
    /* no affine, nothing saved: 6 FLOPs each */
    CHECK(mlprof_opcost_norm(2048, 16, 0, 4, 0, &c) == 0 && COST(12288, 16384), SAYS);

    /* bad input: negative sizes and overflow are errors, never a wrapped count */
    CHECK(mlprof_opcost_gemm(1, -1, 2, 3, 4, 4, 4, 0, &c) == MLPROF_EINVAL, "negative M");
    CHECK(mlprof_opcost_gemm(1, 1LL << 40, 1LL << 40, 1, 4, 4, 4, 0, &c) == MLPROF_EINVAL && c.flops == 0,
          "2^80 FLOPs");
    CHECK(mlprof_opcost_gemm(1, 2, 2, 2, 4, 4, 4, 0, NULL) == MLPROF_EINVAL, "no result");
}

/* The by-name entry: the same numbers as the formulas, from the texts. */
static void by_name(void)
{
    const int both = MLPROF_OPCOST_HAS_FLOPS | MLPROF_OPCOST_HAS_BYTES;
    /* mlprof.torch's form: tensors only, "float32,float32" */
    CHECK(mlprof_opcost_op("aten::mm", "[[64,128],[128,32]]", "float32,float32", NULL, NULL, &c) == both &&
              COST(524288, 57344), SAYS);
    /* PyTorch's: every argument; addmm(bias [32], [64,128], [128,32], beta, alpha): the bias read */
    CHECK(mlprof_opcost_op("aten::addmm", "[[32], [64, 128], [128, 32], [], []]",
                           "[\"float\", \"float\", \"float\", \"Scalar\", \"Scalar\"]", NULL, NULL, &c) == both &&
              COST(524288, 57344 + 128), SAYS);
    /* addmm into a full C [64,32]: as an accumulated GEMM */
    CHECK(mlprof_opcost_op("aten::addmm", "[[64,32],[64,128],[128,32]]", "float32,float32,float32", NULL, NULL, &c) &&
              COST(524288, 65536), SAYS);
    /* without types: FLOPs only */
    CHECK(mlprof_opcost_op("aten::mm", "[[64,128],[128,32]]", NULL, NULL, NULL, &c) == MLPROF_OPCOST_HAS_FLOPS &&
              c.flops == 524288, SAYS);
    CHECK(mlprof_opcost_op("aten::bmm", "[[8,16,16],[8,16,16]]", "float32,float32", NULL, NULL, &c) == both &&
              COST(65536, 24576), SAYS);
    /* baddbmm(self [8,16,16], b1, b2): accumulated: + 8*256*4 = 8192 */
    CHECK(mlprof_opcost_op("aten::baddbmm", "[[8,16,16],[8,16,16],[8,16,16]]", "float32,float32,float32", NULL, NULL,
                           &c) == both && COST(65536, 24576 + 8192), SAYS);
    /* matmul [2048,160,300] x [300,10]: one GEMM of 327680 rows: 2*327680*10*300 = 1966080000;
     * bytes 4*(98304000 + 3000 + 3276800) = 406335200 (the aten::mm under it in the sampled trace) */
    CHECK(mlprof_opcost_op("aten::matmul", "[[2048, 160, 300], [300, 10]]", "[\"float\", \"float\"]", NULL, NULL,
                           &c) == both && COST(1966080000LL, 406335200LL), SAYS);
    CHECK(mlprof_opcost_op("aten::mm", "[[327680, 300], [300, 10]]", "[\"float\", \"float\"]", NULL, NULL, &c) &&
              COST(1966080000LL, 406335200LL), SAYS);
    /* matmul broadcast [4,1,8,16] x [3,16,2]: batch 4*3 = 12: 2*12*8*2*16 = 6144;
     * bytes 4*(512 + 96 + 12*16) = 3200 */
    CHECK(mlprof_opcost_op("aten::matmul", "[[4,1,8,16],[3,16,2]]", "float32,float32", NULL, NULL, &c) == both &&
              COST(6144, 3200), SAYS);
    /* linear x [5,128], W [64,128], b [64]: 2*5*64*128 = 81920; 4*(640 + 8192 + 320 + 64) = 36864 */
    CHECK(mlprof_opcost_op("aten::linear", "[[5,128],[64,128],[64]]", "float32,float32,float32", NULL, NULL, &c) ==
              both && COST(81920, 36864), SAYS);
    /* mv [100,100] x [100], double: as the GEMV */
    CHECK(mlprof_opcost_op("aten::mv", "[[100,100],[100]]", "float64,float64", NULL, NULL, &c) == both &&
              COST(20000, 81600), SAYS);

    /* conv2d from PyTorch's form with Concrete Inputs: x [8,64,56,56] half, w [128,32,3,3], no bias,
     * stride 2, padding 1, dilation 1, groups 2: output 28x28 = (56 + 2 - 2 - 1)/2 + 1; as the formula */
    const char *dims = "[[8,64,56,56],[128,32,3,3],[],[],[],[],[]]";
    const char *types = "[\"c10::Half\",\"c10::Half\",\"\",\"ScalarList\",\"ScalarList\",\"ScalarList\",\"Scalar\"]";
    CHECK(mlprof_opcost_op("aten::conv2d", dims, types, NULL, "[\"\",\"\",\"\",\"[2, 2]\",\"[1, 1]\",\"[1, 1]\",\"2\"]",
                           &c) == both && COST(462422016, 4890624), SAYS);
    /* without the scalars nor the output, the output's size is not known: no count */
    CHECK(mlprof_opcost_op("aten::conv2d", dims, types, NULL, NULL, &c) == 0, "conv2d without stride");
    /* mlprof.torch's aten::convolution: tensors only, the output given, bias [8]:
     * x [4,3,8,8], w [8,3,3,3], y [4,8,8,8]: 2*(4*8*8*8)*27 = 110592; 4*(768 + 216 + 2048 + 8) = 12160 */
    CHECK(mlprof_opcost_op("aten::convolution", "[[4,3,8,8],[8,3,3,3],[8]]", "float32,float32,float32",
                           "[[4,8,8,8]]", NULL, &c) == both && COST(110592, 12160), SAYS);
    /* the same from the scalars (stride 1, padding 1): the output computed */
    CHECK(mlprof_opcost_op("aten::convolution", "[[4,3,8,8],[8,3,3,3],[8]]", "float32,float32,float32", NULL,
                           "[\"\",\"\",\"\",\"[1, 1]\",\"[1, 1]\",\"[1, 1]\",\"False\",\"[0, 0]\",\"1\"]", &c) == both &&
              COST(110592, 12160), SAYS);
    /* transposed: x [4,8,8,8], w [8,3,3,3] (C_in, C_out/G, k, k), y [4,3,8,8]:
     * each input element meets 3*9 weights: 2*2048*27 = 110592; bytes 4*(2048 + 216 + 768) = 12128 */
    CHECK(mlprof_opcost_op("aten::convolution", "[[4,8,8,8],[8,3,3,3]]", "float32,float32", NULL,
                           "[\"\",\"\",\"\",\"[1, 1]\",\"[1, 1]\",\"[1, 1]\",\"True\",\"[0, 0]\",\"1\"]", &c) == both &&
              COST(110592, 12128), SAYS);
    /* convolution_backward(dy [4,8,8,8], x [4,3,8,8], w [8,3,3,3], ..., mask [True, True, False]):
     * two passes of 110592: 221184 FLOPs; each 4*(2048 + 768 + 216) = 12128 bytes: 24256 */
    CHECK(mlprof_opcost_op("aten::convolution_backward", "[[4,8,8,8],[4,3,8,8],[8,3,3,3]]", "float32,float32,float32",
                           NULL, NULL, &c) == both && COST(221184, 24256), SAYS);
    /* with the bias gradient: a sum of 2048 into 8: its bytes 4*(2048 + 8), its adds not counted
     * (a bias's work is left out of FLOPs, as in the forward pass) */
    CHECK(mlprof_opcost_op("aten::convolution_backward", "[[4,8,8,8],[4,3,8,8],[8,3,3,3]]", "float32,float32,float32",
                           NULL, "[\"\",\"\",\"\",\"[8]\",\"[1, 1]\",\"[1, 1]\",\"[1, 1]\",\"False\",\"[0, 0]\",\"1\","
                                 "\"[True, True, True]\"]", &c) == both && COST(221184, 24256 + 8224), SAYS);

    /* attention [2,4,128,64] x3 half, causal at position 4 of the flash kernel: as the formula */
    CHECK(mlprof_opcost_op("aten::_scaled_dot_product_flash_attention",
                           "[[2,4,128,64],[2,4,128,64],[2,4,128,64],[],[],[],[]]",
                           "[\"c10::Half\",\"c10::Half\",\"c10::Half\",\"Scalar\",\"Scalar\",\"Scalar\",\"\"]", NULL,
                           "[\"\",\"\",\"\",\"0.\",\"True\",\"False\",\"\"]", &c) == both && COST(17304576, 524288), SAYS);
    CHECK(mlprof_opcost_op("aten::_scaled_dot_product_flash_attention_backward", "[[2,4,128,64]]", "float32", NULL,
                           NULL, &c) == 0, "attention backward is not counted");

    /* elementwise: add_ in place of [2048,128] and [2048,128] (+ alpha): 262144 FLOPs,
     * 4*(2*262144 + 262144) = 3145728 bytes; add of [2048,160,10] and a broadcast [10]:
     * 3276800 FLOPs, 4*(3276800 + 10 + 3276800) = 26214440 */
    CHECK(mlprof_opcost_op("aten::add_", "[[2048, 128], [2048, 128], []]", "[\"float\", \"float\", \"Scalar\"]", NULL,
                           NULL, &c) == both && COST(262144, 3145728), SAYS);
    CHECK(mlprof_opcost_op("aten::add", "[[2048,160,10],[10]]", "float32,float32", NULL, NULL, &c) == both &&
              COST(3276800, 26214440), SAYS);
    /* sigmoid [2048,125]: 4 * 256000 = 1024000; 4*512000 = 2048000; relu.default (an overload) */
    CHECK(mlprof_opcost_op("aten::sigmoid", "[[2048, 125]]", "[\"float\"]", NULL, NULL, &c) == both &&
              COST(1024000, 2048000), SAYS);
    CHECK(mlprof_opcost_op("aten::relu.default", "[[10]]", "float32", NULL, NULL, &c) == both && COST(10, 80), SAYS);
    /* sum [5,128] over [0] and mean over all ([] dims) */
    CHECK(mlprof_opcost_op("aten::sum", "[[5,128],[],[],[]]", "[\"float\",\"ScalarList\",\"Scalar\",\"\"]", NULL,
                           "[\"\",\"[0]\",\"True\",\"\"]", &c) == both && COST(512, 3072), SAYS);
    CHECK(mlprof_opcost_op("aten::mean", "[[5,128],[],[],[],[]]", "[\"float\",\"ScalarList\",\"Scalar\",\"\",\"float\"]",
                           NULL, "[\"\",\"[]\",\"False\",\"\",\"\"]", &c) == both && COST(640, 4 * 641), SAYS);
    CHECK(mlprof_opcost_op("aten::sum", "[[2048,110],[],[],[]]", "[\"float\",\"\",\"Scalar\",\"\"]", NULL, NULL, &c) == 0,
          "sum over dims that the trace does not give");
    /* softmax [2,1000] */
    CHECK(mlprof_opcost_op("aten::_softmax", "[[2,1000],[],[]]", "[\"float\",\"Scalar\",\"Scalar\"]", NULL, NULL, &c) ==
              both && COST(10000, 16000), SAYS);
    /* native_layer_norm [2048,125], normalized [125] by its weight: as the formula */
    CHECK(mlprof_opcost_op("aten::native_layer_norm", "[[2048, 125], [], [125], [125], []]",
                           "[\"float\", \"\", \"float\", \"float\", \"Scalar\"]", NULL, NULL, &c) == both &&
              COST(2048000, 2065384), SAYS);
    /* native_batch_norm [8,16,4,4], weight, bias, running stats, inference */
    CHECK(mlprof_opcost_op("aten::native_batch_norm", "[[8,16,4,4],[16],[16],[16],[16]]",
                           "float32,float32,float32,float32,float32", NULL,
                           "[\"\",\"\",\"\",\"\",\"\",\"False\",\"0.1\",\"1e-05\"]", &c) == both && COST(8192, 16640),
          SAYS);

    /* unknown operators and unusable shapes: no count at all */
    c.flops = c.bytes = 77;
    CHECK(mlprof_opcost_op("aten::copy_", "[[10],[10]]", "float32,float32", NULL, NULL, &c) == 0 && COST(77, 77),
          "copy_ is not counted, and the result is untouched");
    CHECK(mlprof_opcost_op("aten::mm", "[[2,3],[4,5]]", "float32,float32", NULL, NULL, &c) == 0, "K differs");
    CHECK(mlprof_opcost_op("aten::mm", "[[2,3", NULL, NULL, NULL, &c) == 0, "cut text");
    CHECK(mlprof_opcost_op("aten::layer_norm_", "[[2,3]]", NULL, NULL, NULL, &c) == 0, "no in-place norm");
    CHECK(mlprof_opcost_op("my::op", "[[2,3]]", NULL, NULL, NULL, &c) == 0, "not aten");

    CHECK(mlprof_opcost_type_size("c10::BFloat16") == 2 && mlprof_opcost_type_size("torch.float64") == 8 &&
              mlprof_opcost_type_size("Scalar") == 0 && mlprof_opcost_type_size(NULL) == 0,
          "type sizes");
}

/* Every cut and every one-byte change of the texts above: no count from a
 * broken text is required, only that the parser stays inside it (ASan) and
 * never returns a negative count. */
static void damaged(void)
{
    static const char *const texts[][4] = {
        {"aten::conv2d", "[[8,64,56,56],[128,32,3,3],[],[],[],[],[]]",
         "[\"c10::Half\",\"c10::Half\",\"\",\"ScalarList\",\"ScalarList\",\"ScalarList\",\"Scalar\"]",
         "[\"\",\"\",\"\",\"[2, 2]\",\"[1, 1]\",\"[1, 1]\",\"2\"]"},
        {"aten::sum", "[[5,128],[],[],[]]", "[\"float\",\"ScalarList\",\"Scalar\",\"\"]", "[\"\",\"[-1]\",\"True\",\"\"]"},
        {"aten::native_layer_norm", "[[2048, 1, 742], [], [1, 742], [1, 742], []]",
         "[\"float\", \"\", \"float\", \"float\", \"Scalar\"]", NULL},
        {"aten::matmul", "[[4,1,8,16],[3,16,2]]", "float32,float32", NULL},
    };
    static const char flips[] = "[],\"0-9 x";
    int bad = 0;
    for (size_t t = 0; t < sizeof texts / sizeof *texts; t++) {
        for (int which = 1; which < 4; which++) {
            const char *orig = texts[t][which];
            if (!orig)
                continue;
            size_t len = strlen(orig);
            for (size_t cut = 0; cut <= len; cut++) {
                for (size_t f = 0; f <= sizeof flips - 1; f++) {
                    char *buf = malloc(len + 1); /* exactly sized: ASan sees a read past the end */
                    memcpy(buf, orig, len + 1);
                    if (f == sizeof flips - 1)
                        buf[cut] = '\0'; /* cut short */
                    else if (cut < len)
                        buf[cut] = flips[f];
                    const char *arg[4] = {texts[t][0], texts[t][1], texts[t][2], texts[t][3]};
                    arg[which] = buf;
                    mlprof_opcost k = {0, 0};
                    if (mlprof_opcost_op(arg[0], arg[1], arg[2], NULL, arg[3], &k) && (k.flops < 0 || k.bytes < 0))
                        bad++;
                    free(buf);
                }
            }
        }
    }
    CHECK(bad == 0, "%d damaged texts gave a negative count", bad);
}

int main(int argc, char **argv)
{
    tu_init(argc, argv);
    formulas();
    by_name();
    damaged();
    return tu_finish("opcost");
}
