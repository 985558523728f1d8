typedef int CUresult;
#define CUDAAPI
CUresult CUDAAPI cuInit(unsigned int Flags);
CUresult CUDAAPI cuDeviceGetCount(int *count);
#define cuGetProcAddress cuGetProcAddress_v2
CUresult CUDAAPI cuGetProcAddress_v2(const char *symbol, void **pfn, int v, unsigned long f);
