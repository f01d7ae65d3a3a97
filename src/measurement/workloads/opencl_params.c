/* One thread, one OpenCL queue, every kind of operation hpcrun -e gpu=opencl measures with
 * known parameters (the launch-parameter, map/unmap, rect-copy and allocation test):
 *   launch_scale   3 x scale  global 1024, local 64,  __local arg 256 B; then
 *                  2 x scale  global 1024, local 128, __local arg 512 B (argument set again)
 *   launch_bump    2 x bump   global 256, no local size
 *   launch_2d      1 x halve  global 64 x 8, local 8 x 4
 *   launch_2d_auto 1 x halve  global 64 x 8, no local size
 *   launch_pair    1 x pair   global 4, local 1, __local float2 arg 8 B, a NULL __global arg
 *   rect_copies    write rect 32 x 4 B, read rect 24 x 3 B, copy rect 16 x 2 B
 *   map_unmap      map 512 B for reading (unmap), 256 B write-invalidate (unmap), 128 B for
 *                  writing (unmap)
 *   alloc_buffers  device 4096 B, ALLOC_HOST_PTR 1024 B, USE_HOST_PTR 2048 B, released by
 *                  release_buffers (the first retained once more: released twice)
 * Prints the kernels' static local and private memory and work-group limit as OpenCL reports
 * them, then checksums; exit status 0, 1 on an OpenCL error, 3 when OpenCL is unusable. */
#define CL_TARGET_OPENCL_VERSION 200
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char* kSource =
    "__kernel void scale(__global float* a, __local float* tmp, float f) {\n"
    "  __local float st[64];\n"
    "  size_t l = get_local_id(0);\n"
    "  tmp[l] = a[get_global_id(0)];\n"
    "  st[l % 64] = f;\n"
    "  barrier(CLK_LOCAL_MEM_FENCE);\n"
    "  a[get_global_id(0)] = tmp[l] * st[l % 64];\n"
    "}\n"
    "__kernel void bump(__global float* a) {\n"
    "  a[get_global_id(0)] += 1.0f;\n"
    "}\n"
    "__kernel void halve(__global float* a, int w) {\n"
    "  a[get_global_id(1) * w + get_global_id(0)] *= 0.5f;\n"
    "}\n"
    "__kernel void pair(__global float* a, __local float2* t, __global float* maybe) {\n"
    "  size_t i = get_global_id(0);\n"
    "  t[0] = (float2)(a[i], 2.0f);\n"
    "  barrier(CLK_LOCAL_MEM_FENCE);\n"
    "  a[i] = t[0].x * t[0].y + (maybe ? maybe[i] : 0.0f);\n"
    "}\n";

enum { kElems = 1024 };

static cl_context gCtx;
static cl_device_id gDev;
static cl_command_queue gQ;
static int gErr;

#define CHECK(x)                                               \
  do {                                                         \
    cl_int rc_ = (x);                                          \
    if (rc_ != CL_SUCCESS && !gErr) {                          \
      fprintf(stderr, "%s:%d: %s = %d\n", __FILE__, __LINE__, #x, rc_); \
      gErr = rc_;                                              \
    }                                                          \
  } while (0)

__attribute__((noinline)) static void launch_scale(cl_kernel k, cl_mem a) {
  float f = 1.5f;
  size_t global = kElems, local = 64;
  CHECK(clSetKernelArg(k, 0, sizeof a, &a));
  CHECK(clSetKernelArg(k, 1, 64 * sizeof(float), NULL));
  CHECK(clSetKernelArg(k, 2, sizeof f, &f));
  for (int i = 0; i < 3; ++i) CHECK(clEnqueueNDRangeKernel(gQ, k, 1, NULL, &global, &local, 0, NULL, NULL));
  local = 128;
  CHECK(clSetKernelArg(k, 1, 128 * sizeof(float), NULL));
  for (int i = 0; i < 2; ++i) CHECK(clEnqueueNDRangeKernel(gQ, k, 1, NULL, &global, &local, 0, NULL, NULL));
  CHECK(clFinish(gQ));
}

__attribute__((noinline)) static void launch_bump(cl_kernel k, cl_mem a) {
  size_t global = 256;
  CHECK(clSetKernelArg(k, 0, sizeof a, &a));
  for (int i = 0; i < 2; ++i) CHECK(clEnqueueNDRangeKernel(gQ, k, 1, NULL, &global, NULL, 0, NULL, NULL));
  CHECK(clFinish(gQ));
}

__attribute__((noinline)) static void launch_2d(cl_kernel k) {
  size_t global[2] = {64, 8}, local[2] = {8, 4};
  CHECK(clEnqueueNDRangeKernel(gQ, k, 2, NULL, global, local, 0, NULL, NULL));
  CHECK(clFinish(gQ));
}

__attribute__((noinline)) static void launch_2d_auto(cl_kernel k) {
  size_t global[2] = {64, 8};
  cl_event ev;
  CHECK(clEnqueueNDRangeKernel(gQ, k, 2, NULL, global, NULL, 0, NULL, &ev));
  CHECK(clWaitForEvents(1, &ev));
  clReleaseEvent(ev);
}

__attribute__((noinline)) static void launch_pair(cl_kernel k, cl_mem a) {
  size_t global = 4, local = 1;
  CHECK(clSetKernelArg(k, 0, sizeof a, &a));
  CHECK(clSetKernelArg(k, 1, sizeof(cl_float2), NULL));
  CHECK(clSetKernelArg(k, 2, sizeof(cl_mem), NULL));
  CHECK(clEnqueueNDRangeKernel(gQ, k, 1, NULL, &global, &local, 0, NULL, NULL));
  CHECK(clFinish(gQ));
}

__attribute__((noinline)) static void rect_copies(cl_mem a, cl_mem b, float* host) {
  /* Buffers seen as rows of 64 bytes; the host array as rows of 128 bytes. */
  size_t zero[3] = {0, 0, 0}, at[3] = {8, 2, 0};
  size_t w[3] = {32, 4, 1}, r[3] = {24, 3, 1}, c[3] = {16, 2, 1};
  CHECK(clEnqueueWriteBufferRect(gQ, b, CL_TRUE, at, zero, w, 64, 0, 128, 0, host, 0, NULL, NULL));
  CHECK(clEnqueueReadBufferRect(gQ, a, CL_TRUE, zero, at, r, 64, 0, 128, 0, host, 0, NULL, NULL));
  CHECK(clEnqueueCopyBufferRect(gQ, b, a, at, zero, c, 64, 0, 64, 0, 0, NULL, NULL));
  CHECK(clFinish(gQ));
}

__attribute__((noinline)) static double map_unmap(cl_mem a) {
  cl_int rc;
  double sum = 0;
  float* p = clEnqueueMapBuffer(gQ, a, CL_TRUE, CL_MAP_READ, 0, 512, 0, NULL, NULL, &rc);
  CHECK(rc);
  if (p) {
    for (int i = 0; i < 128; ++i) sum += p[i];
    CHECK(clEnqueueUnmapMemObject(gQ, a, p, 0, NULL, NULL));
  }
  p = clEnqueueMapBuffer(gQ, a, CL_TRUE, CL_MAP_WRITE_INVALIDATE_REGION, 1024, 256, 0, NULL, NULL, &rc);
  CHECK(rc);
  if (p) {
    for (int i = 0; i < 64; ++i) p[i] = (float)i;
    CHECK(clEnqueueUnmapMemObject(gQ, a, p, 0, NULL, NULL));
  }
  p = clEnqueueMapBuffer(gQ, a, CL_TRUE, CL_MAP_WRITE, 2048, 128, 0, NULL, NULL, &rc);
  CHECK(rc);
  if (p) {
    for (int i = 0; i < 32; ++i) p[i] += 1.0f;
    CHECK(clEnqueueUnmapMemObject(gQ, a, p, 0, NULL, NULL));
  }
  CHECK(clFinish(gQ));
  return sum;
}

static float gUseHost[512];

__attribute__((noinline)) static void alloc_buffers(cl_mem* m) {
  cl_int rc;
  m[0] = clCreateBuffer(gCtx, CL_MEM_READ_WRITE, 4096, NULL, &rc);
  CHECK(rc);
  m[1] = clCreateBuffer(gCtx, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, 1024, NULL, &rc);
  CHECK(rc);
  m[2] = clCreateBuffer(gCtx, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, sizeof gUseHost, gUseHost, &rc);
  CHECK(rc);
}

__attribute__((noinline)) static void release_buffers(cl_mem* m) {
  CHECK(clRetainMemObject(m[0]));
  for (int i = 0; i < 3; ++i) CHECK(clReleaseMemObject(m[i]));
  CHECK(clReleaseMemObject(m[0]));
}

static double readAll(cl_mem a, float* host) {
  CHECK(clEnqueueReadBuffer(gQ, a, CL_TRUE, 0, kElems * sizeof(float), host, 0, NULL, NULL));
  double s = 0;
  for (int i = 0; i < kElems; ++i) s += host[i];
  return s;
}

int main(void) {
  cl_platform_id plat;
  cl_uint n = 0;
  if (clGetPlatformIDs(1, &plat, &n) != CL_SUCCESS || n == 0) return 3;
  if (clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 1, &gDev, &n) != CL_SUCCESS || n == 0) return 3;
  cl_int rc;
  gCtx = clCreateContext(NULL, 1, &gDev, NULL, NULL, &rc);
  if (rc != CL_SUCCESS) return 3;
  cl_program prog = clCreateProgramWithSource(gCtx, 1, &kSource, NULL, &rc);
  if (rc != CL_SUCCESS || clBuildProgram(prog, 1, &gDev, "", NULL, NULL) != CL_SUCCESS) return 3;
  gQ = clCreateCommandQueue(gCtx, gDev, 0, &rc);
  if (rc != CL_SUCCESS) return 3;
  const char* names[4] = {"scale", "bump", "halve", "pair"};
  cl_kernel k[4];
  for (int i = 0; i < 4; ++i) {
    k[i] = clCreateKernel(prog, names[i], &rc);
    if (rc != CL_SUCCESS) return 3;
    cl_ulong local = 0, priv = 0;
    size_t wg = 0;
    clGetKernelWorkGroupInfo(k[i], gDev, CL_KERNEL_LOCAL_MEM_SIZE, sizeof local, &local, NULL);
    clGetKernelWorkGroupInfo(k[i], gDev, CL_KERNEL_PRIVATE_MEM_SIZE, sizeof priv, &priv, NULL);
    clGetKernelWorkGroupInfo(k[i], gDev, CL_KERNEL_WORK_GROUP_SIZE, sizeof wg, &wg, NULL);
    printf("kernel %s local %lu private %lu work-group %zu\n", names[i], (unsigned long)local, (unsigned long)priv, wg);
  }

  float* host = calloc(2 * kElems, sizeof(float));
  for (int i = 0; i < 2 * kElems; ++i) host[i] = (float)(i % 13);
  cl_mem a = clCreateBuffer(gCtx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, kElems * sizeof(float), host, &rc);
  cl_mem b = clCreateBuffer(gCtx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, kElems * sizeof(float), host, &rc);
  int w = 64;
  CHECK(clSetKernelArg(k[2], 0, sizeof a, &a));
  CHECK(clSetKernelArg(k[2], 1, sizeof w, &w));

  launch_scale(k[0], a);
  launch_bump(k[1], a);
  launch_2d(k[2]);
  launch_2d_auto(k[2]);
  launch_pair(k[3], a);
  printf("kernels: checksum %.6e\n", readAll(a, host + kElems));
  rect_copies(a, b, host);
  printf("rect: checksum %.6e\n", readAll(a, host + kElems));
  double mapped = map_unmap(a);
  printf("map: read %.6e checksum %.6e\n", mapped, readAll(a, host + kElems));
  cl_mem m[3];
  alloc_buffers(m);
  release_buffers(m);
  printf("buffers: err %d\n", gErr);

  clReleaseMemObject(a);
  clReleaseMemObject(b);
  for (int i = 0; i < 4; ++i) clReleaseKernel(k[i]);
  clReleaseCommandQueue(gQ);
  clReleaseProgram(prog);
  clReleaseContext(gCtx);
  free(host);
  return gErr ? 1 : 0;
}
