// kernprof's check on a GPU machine: one kernel launched 3 times and one copy each way, so the
// report must list add_one(float*, int) with 3 calls, [memcpy HtoD] and [memcpy DtoH] with 1.
//   nvcc -gencode=arch=compute_90a,code=sm_90a bench/kernprof/selftest.cu -o /tmp/selftest
//   bench/kernprof/kernprof.sh /tmp/k.md -- /tmp/selftest && cat /tmp/k.md
#include <cstdio>

__global__ void add_one(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1.0f;
}

static int check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) fprintf(stderr, "selftest: %s: %s\n", what, cudaGetErrorString(e));
  return e != cudaSuccess;
}

int main() {
  const int n = 1 << 20;
  float *host = nullptr, *dev = nullptr;  // pinned host memory: one DMA per copy, one record
  if (check(cudaMallocHost(&host, n * sizeof(float)), "cudaMallocHost")) return 1;
  if (check(cudaMalloc(&dev, n * sizeof(float)), "cudaMalloc")) return 1;
  for (int i = 0; i < n; ++i) host[i] = 0.0f;
  if (check(cudaMemcpy(dev, host, n * sizeof(float), cudaMemcpyHostToDevice), "HtoD")) return 1;
  for (int k = 0; k < 3; ++k) add_one<<<(n + 255) / 256, 256>>>(dev, n);
  if (check(cudaGetLastError(), "add_one")) return 1;
  if (check(cudaMemcpy(host, dev, n * sizeof(float), cudaMemcpyDeviceToHost), "DtoH")) return 1;
  bool ok = host[0] == 3.0f && host[n - 1] == 3.0f;
  if (!ok) fprintf(stderr, "selftest: expected 3, got %g\n", host[0]);
  cudaFree(dev);
  cudaFreeHost(host);
  if (!ok) return 1;
  printf("selftest: ok (expect add_one(float*, int) x3, [memcpy HtoD] x1, [memcpy DtoH] x1)\n");
  return 0;
}
