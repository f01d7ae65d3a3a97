// Source of gpu_loops_sm90_nvcc13.cubin, built (as /tmp/cu/mine.cu, the path its line table
// names) by `nvcc -cubin -arch=sm_90 -lineinfo -O3` of CUDA 13.0. nvdisasm13_cfg_sm90.dot is
// what CUDA 13.0's nvdisasm printed for `nvdisasm -cfg -poff -fun 11` of that cubin on an
// H100 machine. The compiler made four copies of the r loop (line 3), one of which holds the
// k loop (line 5): five loops, as a dominator-based loop finder run over that graph by hand
// found too.
// (The cubin's line numbers count from the first line of the source as compiled, which had
// no comment: line 1 is the kernel's signature.)
__global__ void axpy_loop(float* y, const float* x, float a, int n, int reps) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  for (int r = 0; r < reps; ++r) {
    if (i < n) y[i] = a * x[i] + y[i];
    for (int k = 0; k < n; k += 7) y[i] += x[k % n];
  }
}
