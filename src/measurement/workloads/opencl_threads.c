/* Two application threads, each with its own OpenCL command queue, launching a known number
 * of kernels and copies of known sizes (the hpcrun -e gpu=opencl end-to-end test):
 *   thread t (0, 1): writes kWrite[t] bytes (one clEnqueueWriteBuffer), runs kKernels[t]
 *   kernels from enqueue_kernels(), fills kFill[t] bytes of a second buffer and copies
 *   kCopy[t] bytes into it in fill_and_copy(), reads kRead[t] bytes back twice from
 *   copy_out(). Thread 0 creates its queue with clCreateCommandQueue, thread 1 with
 *   clCreateCommandQueueWithProperties; both print the queue properties they see.
 * Usage: opencl_threads [SCALE]   (SCALE multiplies the kernels' inner loop; default 1)
 * Prints one checksum line per thread; exit status 0, or 3 when OpenCL is unusable. */
#define CL_TARGET_OPENCL_VERSION 200
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char* kSource =
    "__kernel void spin(__global float* a, int iters) {\n"
    "  size_t i = get_global_id(0);\n"
    "  float x = a[i];\n"
    "  for (int k = 0; k < iters; ++k) x = x * 0.999f + 0.001f * (float)k;\n"
    "  a[i] = x;\n"
    "}\n";

enum { kElems = 4096 };
static const int kKernels[2] = {12, 20};
static const size_t kWrite[2] = {kElems * sizeof(float), kElems * sizeof(float) / 2};
static const size_t kRead[2] = {kElems * sizeof(float) / 4, kElems * sizeof(float)};
static const size_t kFill[2] = {1024, 2048};
static const size_t kCopy[2] = {4096, 512};

static cl_context gCtx;
static cl_device_id gDev;
static cl_program gProg;
static int gIters = 2000;

struct Job {
  int t;
  double sum;
  int err;
  cl_command_queue_properties props;
};

__attribute__((noinline)) static cl_int copy_in(cl_command_queue q, cl_mem buf, const float* host, size_t bytes) {
  return clEnqueueWriteBuffer(q, buf, CL_TRUE, 0, bytes, host, 0, NULL, NULL);
}

__attribute__((noinline)) static cl_int enqueue_kernels(cl_command_queue q, cl_kernel k, int n) {
  size_t global = kElems;
  for (int i = 0; i < n; ++i) {
    cl_int rc = clEnqueueNDRangeKernel(q, k, 1, NULL, &global, NULL, 0, NULL, NULL);
    if (rc != CL_SUCCESS) return rc;
  }
  return clFinish(q);
}

__attribute__((noinline)) static cl_int fill_and_copy(cl_command_queue q, cl_mem src, cl_mem dst, int t) {
  float zero = 0;
  cl_int rc = clEnqueueFillBuffer(q, dst, &zero, sizeof zero, 0, kFill[t], 0, NULL, NULL);
  if (rc == CL_SUCCESS) rc = clEnqueueCopyBuffer(q, src, dst, 0, 0, kCopy[t], 0, NULL, NULL);
  if (rc == CL_SUCCESS) rc = clFinish(q);
  return rc;
}

__attribute__((noinline)) static cl_int copy_out(cl_command_queue q, cl_mem buf, float* host, size_t bytes) {
  cl_event ev;  /* the app's own event: hpcrun must hand it back untouched */
  cl_int rc = clEnqueueReadBuffer(q, buf, CL_FALSE, 0, bytes, host, 0, NULL, &ev);
  if (rc != CL_SUCCESS) return rc;
  rc = clWaitForEvents(1, &ev);
  clReleaseEvent(ev);
  return rc;
}

static void* worker(void* p) {
  struct Job* job = p;
  int t = job->t;
  cl_int rc;
  cl_command_queue q;
  if (t == 0) {
    q = clCreateCommandQueue(gCtx, gDev, 0, &rc);
  } else {
    cl_queue_properties props[] = {0};
    q = clCreateCommandQueueWithProperties(gCtx, gDev, props, &rc);
  }
  if (rc != CL_SUCCESS) { job->err = rc; return NULL; }
  clGetCommandQueueInfo(q, CL_QUEUE_PROPERTIES, sizeof job->props, &job->props, NULL);
  cl_kernel k = clCreateKernel(gProg, "spin", &rc);
  cl_mem buf = clCreateBuffer(gCtx, CL_MEM_READ_WRITE, kElems * sizeof(float), NULL, &rc);
  cl_mem buf2 = clCreateBuffer(gCtx, CL_MEM_READ_WRITE, kElems * sizeof(float), NULL, &rc);
  float* host = calloc(kElems, sizeof(float));
  for (int i = 0; i < kElems; ++i) host[i] = (float)(i % 97) * (float)(t + 1);
  rc = copy_in(q, buf, host, kWrite[t]);
  clSetKernelArg(k, 0, sizeof buf, &buf);
  clSetKernelArg(k, 1, sizeof gIters, &gIters);
  if (rc == CL_SUCCESS) rc = enqueue_kernels(q, k, kKernels[t]);
  if (rc == CL_SUCCESS) rc = fill_and_copy(q, buf, buf2, t);
  if (rc == CL_SUCCESS) rc = copy_out(q, buf, host, kRead[t]);
  if (rc == CL_SUCCESS) rc = copy_out(q, buf, host, kRead[t]);
  double sum = 0;
  for (size_t i = 0; i < kRead[t] / sizeof(float); ++i) sum += host[i];
  job->sum = sum;
  job->err = rc;
  free(host);
  clReleaseMemObject(buf);
  clReleaseMemObject(buf2);
  clReleaseKernel(k);
  clReleaseCommandQueue(q);
  return NULL;
}

int main(int argc, char** argv) {
  if (argc > 1) gIters = (int)(2000 * atof(argv[1]));
  cl_platform_id plat;
  cl_uint n = 0;
  if (clGetPlatformIDs(1, &plat, &n) != CL_SUCCESS || n == 0) return 3;
  if (clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 1, &gDev, &n) != CL_SUCCESS || n == 0) return 3;
  cl_int rc;
  gCtx = clCreateContext(NULL, 1, &gDev, NULL, NULL, &rc);
  if (rc != CL_SUCCESS) return 3;
  gProg = clCreateProgramWithSource(gCtx, 1, &kSource, NULL, &rc);
  if (rc != CL_SUCCESS || clBuildProgram(gProg, 1, &gDev, "", NULL, NULL) != CL_SUCCESS) return 3;
  pthread_t th[2];
  struct Job jobs[2] = {{0, 0, 0, 0}, {1, 0, 0, 0}};
  for (int t = 0; t < 2; ++t) pthread_create(&th[t], NULL, worker, &jobs[t]);
  for (int t = 0; t < 2; ++t) pthread_join(th[t], NULL);
  int status = 0;
  for (int t = 0; t < 2; ++t) {
    printf("thread %d: kernels %d write %zu read %zu fill %zu copy %zu checksum %.6e queue properties %lu err %d\n",
           t, kKernels[t], kWrite[t], 2 * kRead[t], kFill[t], kCopy[t], jobs[t].sum, (unsigned long)jobs[t].props,
           jobs[t].err);
    if (jobs[t].err != CL_SUCCESS) status = 1;
  }
  clReleaseProgram(gProg);
  clReleaseContext(gCtx);
  return status;
}
