/* Many small OpenCL kernels on one queue, for the wrapper overhead benchmark:
 *   opencl_small_kernels [KERNELS] [BATCH] [PAUSE_MS]
 * enqueues KERNELS (default 5000) tiny kernels, a clFinish every BATCH (default 100) followed
 * by a sleep of PAUSE_MS milliseconds (default 0: none; the record-reuse test), and
 * prints "loop_ns N" (the wall time of the enqueue/finish loop alone, after the program
 * build) and a checksum. Exit status 3 when OpenCL is unusable. */
#define CL_TARGET_OPENCL_VERSION 120
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static const char* kSource =
    "__kernel void inc(__global int* a) { a[get_global_id(0)] += 1; }\n";

static long long nowNs(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

int main(int argc, char** argv) {
  int kernels = argc > 1 ? atoi(argv[1]) : 5000;
  int batch = argc > 2 ? atoi(argv[2]) : 100;
  int pauseMs = argc > 3 ? atoi(argv[3]) : 0;
  cl_platform_id plat;
  cl_device_id dev;
  cl_uint n = 0;
  cl_int rc;
  if (clGetPlatformIDs(1, &plat, &n) != CL_SUCCESS || n == 0) return 3;
  if (clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 1, &dev, &n) != CL_SUCCESS || n == 0) return 3;
  cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &rc);
  cl_command_queue q = clCreateCommandQueue(ctx, dev, 0, &rc);
  cl_program prog = clCreateProgramWithSource(ctx, 1, &kSource, NULL, &rc);
  if (rc != CL_SUCCESS || clBuildProgram(prog, 1, &dev, "", NULL, NULL) != CL_SUCCESS) return 3;
  cl_kernel k = clCreateKernel(prog, "inc", &rc);
  enum { kElems = 64 };
  int host[kElems] = {0};
  cl_mem buf = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof host, host, &rc);
  clSetKernelArg(k, 0, sizeof buf, &buf);
  size_t global = kElems;
  long long t0 = nowNs();
  for (int i = 0; i < kernels; ++i) {
    if (clEnqueueNDRangeKernel(q, k, 1, NULL, &global, NULL, 0, NULL, NULL) != CL_SUCCESS) return 1;
    if ((i + 1) % batch == 0) {
      clFinish(q);
      if (pauseMs > 0) {
        struct timespec p = {pauseMs / 1000, (long)(pauseMs % 1000) * 1000000L};
        nanosleep(&p, NULL);
      }
    }
  }
  clFinish(q);
  long long t1 = nowNs();
  clEnqueueReadBuffer(q, buf, CL_TRUE, 0, sizeof host, host, 0, NULL, NULL);
  long sum = 0;
  for (int i = 0; i < kElems; ++i) sum += host[i];
  printf("loop_ns %lld\nchecksum %ld\n", t1 - t0, sum);
  clReleaseMemObject(buf);
  clReleaseKernel(k);
  clReleaseProgram(prog);
  clReleaseCommandQueue(q);
  clReleaseContext(ctx);
  return sum == (long)kernels * kElems ? 0 : 1;
}
