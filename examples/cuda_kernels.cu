// cuda_kernels.cu - a CUDA workload with known kernels for mlprof's GPU
// activity: each step copies a vector on the device, multiplies two matrices
// (a tiled GEMM in shared memory) and sums a vector (a reduction), inside CPU
// spans named after them, and the GEMMs are also timed as a GPU region.
//
//   cuda_kernels [--steps N] [--n MATRIX_SIZE] [--metrics]
//
// It turns GPU activity on itself (gpu=on, gpu_details=occupancy) unless
// MLPROF_GPU says otherwise, checks its results on the CPU and prints them.
// --metrics also measures each kernel's FLOPs, DRAM bytes, achieved
// occupancy and branch efficiency (CUPTI's range profiler): the GEMM does
// n^3 FMAs, 2 n^3 FLOPs, which its cuda_profiler_range events should show.
// Built with nvcc where CUDA is installed (the runtime linked shared, so
// that mlprof run's interposers and the GPU regions see it).
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mlprof/mlprof.h>
#include <mlprof/opcost.h>

#define TILE 16

__global__ void copy_kernel(const float *__restrict__ src, float *__restrict__ dst, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        dst[i] = src[i];
}

// C = A B for n x n row-major matrices, one TILE x TILE block of C per block.
__global__ void gemm_kernel(const float *a, const float *b, float *c, int n)
{
    __shared__ float as[TILE][TILE], bs[TILE][TILE];
    int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0.0f;
    for (int t = 0; t < n; t += TILE) {
        as[threadIdx.y][threadIdx.x] = row < n && t + threadIdx.x < n ? a[row * n + t + threadIdx.x] : 0.0f;
        bs[threadIdx.y][threadIdx.x] = col < n && t + threadIdx.y < n ? b[(t + threadIdx.y) * n + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < TILE; k++)
            acc += as[threadIdx.y][k] * bs[k][threadIdx.x];
        __syncthreads();
    }
    if (row < n && col < n)
        c[row * n + col] = acc;
}

// Sums x into *out: a tree in shared memory per block, then one atomic add.
__global__ void reduce_kernel(const float *x, float *out, int n)
{
    extern __shared__ float part[];
    int i = blockIdx.x * blockDim.x * 2 + threadIdx.x;
    float v = 0.0f;
    if (i < n)
        v += x[i];
    if (i + blockDim.x < n)
        v += x[i + blockDim.x];
    part[threadIdx.x] = v;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s)
            part[threadIdx.x] += part[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        atomicAdd(out, part[0]);
}

static void check(cudaError_t e, const char *what)
{
    if (e != cudaSuccess) {
        fprintf(stderr, "cuda_kernels: %s: %s\n", what, cudaGetErrorString(e));
        exit(1);
    }
}

int main(int argc, char **argv)
{
    int steps = 10, n = 512, metrics = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--steps") && i + 1 < argc)
            steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--n") && i + 1 < argc)
            n = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--metrics"))
            metrics = 1;
        else {
            fprintf(stderr, "usage: cuda_kernels [--steps N] [--n MATRIX_SIZE] [--metrics]\n");
            return 2;
        }
    }
    if (metrics && !getenv("MLPROF_GPU_METRICS"))
        mlprof_set_config("gpu_metrics", "roofline");
    if (metrics && !getenv("MLPROF_GPU_DETAILS"))
        mlprof_set_config("gpu_details", "occupancy,achieved_occupancy,branch_efficiency");
    if (!getenv("MLPROF_GPU"))
        mlprof_set_config("gpu", "on");
    if (!getenv("MLPROF_GPU_DETAILS"))
        mlprof_set_config("gpu_details", "occupancy");
    if (!getenv("MLPROF_FILENAME"))
        mlprof_set_config("filename", "cuda_trace.json");
    mlprof_set_state(MLPROF_STATE_RUN);

    mlprof_domain *d = mlprof_domain_create("example");
    mlprof_span *step_span = mlprof_task_create(d, "step");
    mlprof_span *copy_span = mlprof_task_create(d, "copy");
    mlprof_span *gemm_span = mlprof_task_create(d, "gemm");
    mlprof_span *reduce_span = mlprof_task_create(d, "reduce");
    mlprof_span *setup_span = mlprof_task_create(d, "setup");

    size_t vec = (size_t)n * n, bytes = vec * sizeof(float);
    float *ha = (float *)malloc(bytes), *hb = (float *)malloc(bytes), *hc = (float *)malloc(bytes);
    for (size_t i = 0; i < vec; i++) {
        ha[i] = (float)(i % 7) * 0.25f;
        hb[i] = (float)(i % 5) * 0.5f;
    }
    float *a, *b, *c, *copy, *sum;
    cudaStream_t stream;
    mlprof_begin(setup_span);
    check(cudaStreamCreate(&stream), "cudaStreamCreate");
    check(cudaMalloc(&a, bytes), "cudaMalloc");
    check(cudaMalloc(&b, bytes), "cudaMalloc");
    check(cudaMalloc(&c, bytes), "cudaMalloc");
    check(cudaMalloc(&copy, bytes), "cudaMalloc");
    check(cudaMalloc(&sum, sizeof(float)), "cudaMalloc");
    check(cudaMemcpy(a, ha, bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
    check(cudaMemcpy(b, hb, bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
    mlprof_end(setup_span);

    dim3 tile(TILE, TILE), tiles((n + TILE - 1) / TILE, (n + TILE - 1) / TILE);
    int threads = 256, copy_blocks = (int)((vec + threads - 1) / threads);
    int reduce_blocks = (int)((vec + 2 * threads - 1) / (2 * threads));
    float total = 0.0f;
    for (int s = 0; s < steps; s++) {
        mlprof_begin(step_span);
        mlprof_begin(copy_span);
        copy_kernel<<<copy_blocks, threads, 0, stream>>>(a, copy, (int)vec);
        check(cudaGetLastError(), "copy_kernel");
        mlprof_end(copy_span);

        mlprof_begin(gemm_span);
        mlprof_opcost cost; // n^3 FMAs: 2 n^3 FLOPs; A and B read, C written (mlprof/opcost.h)
        if (mlprof_opcost_gemm(1, n, n, n, sizeof(float), sizeof(float), sizeof(float), 0, &cost) == 0) {
            mlprof_arg_int("flops", cost.flops);
            mlprof_arg_int("bytes", cost.bytes);
        }
        {
            MLPROF_GPU_REGION("gemm", stream);
            gemm_kernel<<<tiles, tile, 0, stream>>>(copy, b, c, n);
            check(cudaGetLastError(), "gemm_kernel");
        }
        mlprof_end(gemm_span);

        mlprof_begin(reduce_span);
        check(cudaMemsetAsync(sum, 0, sizeof(float), stream), "cudaMemsetAsync");
        reduce_kernel<<<reduce_blocks, threads, threads * sizeof(float), stream>>>(c, sum, (int)vec);
        check(cudaGetLastError(), "reduce_kernel");
        check(cudaMemcpyAsync(&total, sum, sizeof(float), cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync");
        check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
        mlprof_end(reduce_span);
        mlprof_end(step_span);
    }

    // the result against the CPU: the sum of C = A B is sum_k colsum(A)_k rowsum(B)_k
    check(cudaMemcpy(hc, c, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
    double want = 0.0, got = 0.0;
    for (int k = 0; k < n; k++) {
        double col = 0.0, row = 0.0;
        for (int i = 0; i < n; i++) {
            col += ha[(size_t)i * n + k];
            row += hb[(size_t)k * n + i];
        }
        want += col * row;
    }
    for (size_t i = 0; i < vec; i++)
        got += hc[i];
    int ok = fabs(got - want) <= 1e-4 * fabs(want) && fabs(total - want) <= 1e-3 * fabs(want);
    printf("cuda_kernels: %d steps of copy, %dx%d GEMM and reduction; sum %.6g (GPU reduction %.6g, CPU %.6g): %s\n",
           steps, n, n, got, (double)total, want, ok ? "ok" : "WRONG");
    if (metrics)
        printf("cuda_kernels: each GEMM does %.6g FLOPs (2 n^3)\n", 2.0 * n * n * n);

    cudaFree(a);
    cudaFree(b);
    cudaFree(c);
    cudaFree(copy);
    cudaFree(sum);
    cudaStreamDestroy(stream);
    free(ha);
    free(hb);
    free(hc);
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    mlprof_dump(1);
    return ok ? 0 : 1;
}
